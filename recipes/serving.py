"""What a recipe's SavedModel export needs, said next to it.

The exports tokenize inside the graph with tensorflow-text's ops
(`RegexSplitWithOffsets`, `WordpieceTokenizeWithOffsets`, ...), which a
process serving them must load (`import tensorflow_text`; TF Serving: a
build with the tensorflow-text ops). `usage` describes an export; the
recipes write it as `export/assets/README.md` (`write_export`) and into
`results.json`.

Off TensorFlow the recipes write the SavedModel of the token-id model
instead where Keras can (`token_ids_export`: JAX, through jax2tf).

`save_preset` and `save_keras_model` write the other files a recipe
leaves for loading with the package alone: a keras-hub preset folder, a
`.keras` file.

Pure Python (an export at a `gs://` path is written through
`tf.io.gfile`).
"""

import os
import shutil
import tempfile

from recipes.core import storage

TOKEN_IDS_NEEDS = ("tensorflow (no tensorflow-text: the token ids are "
                   "made outside the graph)")

NEEDS = ("tensorflow and tensorflow-text (same version as tensorflow): the "
         "tokenizer inside the graph uses tensorflow-text's ops, so run "
         "`import tensorflow_text` before `tf.saved_model.load` (TF Serving: "
         "a build that includes the tensorflow-text ops); with keras-synth "
         "installed, `keras_synth.models.load_export(path)` does both.")


def usage(path, signature, inputs, outputs, example, needs=NEEDS):
    """A description of an export: a dict for `results.json` (`needs`,
    `signature`, `inputs`, `outputs`, `python`) and its `readme` text.

    Args:
        path: the export folder as the example loads it (the README
            inside the export says `path/to/export`: it may be moved).
        signature: the serving signature's name.
        inputs: `{name: description}` of the signature's inputs.
        outputs: `{name: description}` of its outputs.
        example: the call's keyword arguments as Python source, e.g.
            `'sentence=tf.constant(["a fine film ."])'`.
        needs: what loading it needs (`NEEDS`: tensorflow-text's ops,
            `TOKEN_IDS_NEEDS`: tensorflow alone).
    """
    python = "import tensorflow as tf\n"
    if needs == NEEDS:
        python += ("import tensorflow_text  # noqa: F401 (registers the "
                   "tokenizer's ops)\n")
    python += (
        "\n"
        f"model = tf.saved_model.load({path!r})\n"
        f"outputs = model.signatures[{signature!r}]({example})\n"
        "print({name: value.numpy() for name, value in outputs.items()})\n"
    )
    lines = [
        "# SavedModel exported by a keras-synth recipe",
        "",
        f"Needs {needs}",
        "",
        f"Signature `{signature}`, batched (first dimension: examples):",
        "",
    ]
    lines += [f"- input `{k}`: {v}" for k, v in inputs.items()]
    lines += [f"- output `{k}`: {v}" for k, v in outputs.items()]
    lines += ["", "In Python:", "", "```python", python.rstrip("\n"), "```",
              ""]
    return {
        "needs": needs,
        "signature": signature,
        "inputs": dict(inputs),
        "outputs": dict(outputs),
        "python": python,
        "readme": "\n".join(lines),
    }


def write_readme(export_dir, description):
    """Writes `description["readme"]` as `<export_dir>/assets/README.md`."""
    folder = storage.join(export_dir, "assets")
    storage.gfile().makedirs(folder)
    return storage.write_file(storage.join(folder, "README.md"),
                                    description["readme"])


def write_export(path, save, describe):
    """Writes a SavedModel with `save(folder)` and its
    `assets/README.md` from `describe("path/to/export")` (a `usage`).

    An earlier export at `path` (a killed run's) is deleted first; the
    export is complete once `results.json` records it. Returns `path`.
    """
    _remove(path)
    save(path)
    write_readme(path, describe("path/to/export"))
    return path


def _remove(path):
    """Deletes the file or folder `path` if it exists."""
    gfile = storage.gfile()
    if gfile.isdir(path):
        gfile.rmtree(path)
    elif gfile.exists(path):
        gfile.remove(path)


def token_ids_usage(path, model):
    """How to call the token-id SavedModel of `model` at `path`
    (`export_token_ids`): its inputs as `input_specs` gives them, the
    model's output as `output_0`."""
    from keras_synth.models import input_specs

    specs = input_specs(model, batch_size=None)
    inputs = {name: f"{spec.dtype} `(batch, {spec.shape[1]})`"
              for name, spec in specs.items()}
    example = ", ".join(
        f"{name}=tf.ones([1, {spec.shape[1]}], tf.{spec.dtype})"
        for name, spec in specs.items())
    return usage(path, "serving_default", inputs,
                 {"output_0": f"the outputs of `{type(model).__name__}` "
                  "(logits), as `predict` gives them on token ids"},
                 example, needs=TOKEN_IDS_NEEDS)


def export_token_ids(path, model):
    """Writes a SavedModel of `model`'s forward pass on token ids (the
    task without its preprocessor) at `path`, with its
    `assets/README.md`: `keras_synth.models.export_model(...,
    "tf_saved_model", batch_size=None)`, Keras's `ExportArchive` (through
    jax2tf on JAX). The token-id dimension is the backbone's
    `max_sequence_length`; the batch is open. Returns `path`.

    Raises:
        keras_synth.models.ExportError, ImportError: the backend cannot
            write it (PyTorch without torch_xla) or the converter failed
            (`export_model`).
    """
    from keras_synth.models import export_model

    def save(tmp):
        preprocessor = model.preprocessor
        model.preprocessor = None
        try:
            export_model(model, tmp, "tf_saved_model", batch_size=None)
        finally:
            model.preprocessor = preprocessor

    return write_export(path, save,
                        lambda where: token_ids_usage(where, model))


def token_ids_export(path, model, log=print):
    """Where the SavedModel of raw strings is skipped (JAX, PyTorch): the
    token-id SavedModel (`export_token_ids`) at `path` where Keras can
    write it, else one log line why not.

    Returns:
        The entries for `results.json`: `export_token_ids` (the path or
        None) and `export_token_ids_usage`, or `export_token_ids_skipped`
        (the reason).
    """
    from keras_synth.models import ExportError
    from keras_synth.models import export_formats

    problem = export_formats.converter_problem("tf_saved_model")
    reason = None
    if problem is not None:
        reason = (f"{export_formats.description(model, 'tf_saved_model')}: "
                  f"{problem[1]}")
    else:
        try:
            export_token_ids(path, model)
        except ExportError as error:  # the converter failed
            reason = str(error)
    if reason is not None:
        log(f"No SavedModel of the token-id model either: {reason}")
        return {"export_token_ids": None,
                "export_token_ids_skipped": reason}
    log(f"Exported a SavedModel (token ids in) to {path}")
    return {"export_token_ids": path,
            "export_token_ids_usage": token_ids_usage(path, model)}


def save_preset(path, model):
    """Saves `model` (a keras-hub task, with its preprocessor) as a preset
    folder at `path` (`model.save_to_preset`), replacing an earlier one.

    keras-hub writes presets with local file operations: for a `path`
    with a scheme (`gs://`), the preset is written to a local temporary
    folder, then copied file by file. Returns `path`.
    """
    _remove(path)
    if storage.is_local(path):
        model.save_to_preset(path)
        return path
    gfile = storage.gfile()
    local = tempfile.mkdtemp(prefix="recipes-")
    try:
        model.save_to_preset(local)
        for folder, _, names in os.walk(local):
            relative = os.path.relpath(folder, local)
            target = (path if relative == "." else
                      storage.join(path, *relative.split(os.sep)))
            gfile.makedirs(target)
            for name in names:
                gfile.copy(os.path.join(folder, name),
                           storage.join(target, name))
    finally:
        shutil.rmtree(local, ignore_errors=True)
    return path


def save_keras_model(path, model):
    """Saves `model` as a `.keras` file at `path` (`model.save`, which
    writes `gs://` paths too), replacing an earlier one. Returns `path`."""
    _remove(path)
    model.save(path)
    return path


def saved_model_unsupported(what):
    """Why this Keras backend cannot write the recipes' SavedModel export
    (`what`: its signature, for the message), or None on TensorFlow.

    The exports take raw strings and tokenize inside the graph with
    tensorflow-text's ops; `keras.export.ExportArchive` converts a JAX
    function with jax2tf, which cannot trace string ops, and has no
    PyTorch path to a SavedModel: the recipes write the `.keras` model and
    the preset instead.
    """
    import keras

    backend = keras.backend.backend()
    if backend == "tensorflow":
        return None
    return (f"The SavedModel export ({what}) is skipped on the {backend} "
            "backend: its graph tokenizes raw strings with tensorflow-text, "
            "which only KERAS_BACKEND=tensorflow exports; the .keras model is "
            "written instead.")


__all__ = ["NEEDS", "TOKEN_IDS_NEEDS", "export_token_ids", "save_keras_model",
           "save_preset", "saved_model_unsupported", "token_ids_export",
           "token_ids_usage", "usage", "write_export", "write_readme"]
