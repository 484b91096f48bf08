"""What a recipe's SavedModel export needs, said next to it.

The exports tokenize inside the graph with tensorflow-text's ops
(`RegexSplitWithOffsets`, `WordpieceTokenizeWithOffsets`, ...), which a
process serving them must load (`import tensorflow_text`; TF Serving: a
build with the tensorflow-text ops). `usage` describes an export; the
recipes write it as `export/assets/README.md` (`write_export`) and into
`results.json`.

`save_preset` and `save_keras_model` write the other files a recipe
leaves for loading with the package alone: a keras-hub preset folder, a
`.keras` file.

Pure Python (an export at a `gs://` path is written through
`recipes.core.files`).
"""

import os
import shutil
import tempfile

from recipes.core import atomic
from recipes.core import files

NEEDS = ("tensorflow and tensorflow-text (same version as tensorflow): the "
         "tokenizer inside the graph uses tensorflow-text's ops, so run "
         "`import tensorflow_text` before `tf.saved_model.load` (TF Serving: "
         "a build that includes the tensorflow-text ops); with keras-synth "
         "installed, `keras_synth.models.load_export(path)` does both.")


def usage(path, signature, inputs, outputs, example):
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
    """
    python = (
        "import tensorflow as tf\n"
        "import tensorflow_text  # noqa: F401 (registers the tokenizer's "
        "ops)\n\n"
        f"model = tf.saved_model.load({path!r})\n"
        f"outputs = model.signatures[{signature!r}]({example})\n"
        "print({name: value.numpy() for name, value in outputs.items()})\n"
    )
    lines = [
        "# SavedModel exported by a keras-synth recipe",
        "",
        f"Needs {NEEDS}",
        "",
        f"Signature `{signature}`, batched (first dimension: examples):",
        "",
    ]
    lines += [f"- input `{k}`: {v}" for k, v in inputs.items()]
    lines += [f"- output `{k}`: {v}" for k, v in outputs.items()]
    lines += ["", "In Python:", "", "```python", python.rstrip("\n"), "```",
              ""]
    return {
        "needs": NEEDS,
        "signature": signature,
        "inputs": dict(inputs),
        "outputs": dict(outputs),
        "python": python,
        "readme": "\n".join(lines),
    }


def write_readme(export_dir, description):
    """Writes `description["readme"]` as `<export_dir>/assets/README.md`."""
    folder = files.join(export_dir, "assets")
    files.makedirs(folder)
    path = files.join(folder, "README.md")
    files.write_text(path, description["readme"])
    return path


def write_export(path, save, describe):
    """Writes a SavedModel with `save(folder)` and its
    `assets/README.md` from `describe("path/to/export")` (a `usage`).

    Written to a temporary folder, then renamed: a kill while exporting
    never leaves a half-written SavedModel at `path`. Returns `path`.
    """
    def write(tmp):
        save(tmp)
        write_readme(tmp, describe("path/to/export"))

    atomic.atomic_write(path, write)
    return path


def save_preset(path, model):
    """Saves `model` (a keras-hub task, with its preprocessor) as a preset
    folder at `path` (`model.save_to_preset`), replaced atomically.

    keras-hub writes presets with local file operations: for a `path`
    with a scheme (`gs://`), the preset is written to a local temporary
    folder, then copied (`files.write_locally`). Returns `path`.
    """
    atomic.atomic_write(path, lambda tmp: files.write_locally(
        tmp, model.save_to_preset))
    return path


def save_keras_model(path, model):
    """Saves `model` as a `.keras` file at `path` (`model.save`), replaced
    atomically; for a `path` with a scheme (`gs://`), saved to a local
    temporary file, then copied. Returns `path`."""
    def write(tmp):
        if files.is_local(tmp):
            model.save(tmp)
            return
        local = tempfile.mkdtemp(prefix="recipes-")
        try:
            saved = os.path.join(local, files.basename(tmp))
            model.save(saved)
            files.copy(saved, tmp)
        finally:
            shutil.rmtree(local, ignore_errors=True)

    atomic.atomic_write(path, write)
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


__all__ = ["NEEDS", "save_keras_model", "save_preset",
           "saved_model_unsupported", "usage", "write_export",
           "write_readme"]
