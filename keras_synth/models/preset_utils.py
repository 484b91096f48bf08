"""What the models' `from_preset` methods share (not exported)."""

import os


def check_local_preset(preset):
    """Clear errors for a preset given as a local path that is not a preset
    directory (keras-hub would report an unknown preset identifier).

    Raises:
        FileNotFoundError: `preset` looks like a path but does not exist,
            or is not a folder with a `config.json`.
    """
    if not isinstance(preset, str) or "://" in preset:
        return
    looks_like_path = (os.sep in preset or preset.startswith((".", "~"))
                       or os.path.exists(preset))
    if not looks_like_path:
        return  # a built-in preset name: keras-hub's business
    path = os.path.expanduser(preset)
    if not os.path.isdir(path):
        raise FileNotFoundError(
            f"Argument `preset`: no preset directory at {preset!r}. Expected "
            "a folder written by `save_to_preset` (or a keras-hub preset "
            "handle such as 'kaggle://...' or 'hf://...')."
        )
    if not os.path.isfile(os.path.join(path, "config.json")):
        raise FileNotFoundError(
            f"Argument `preset`: {preset!r} is not a preset directory (it "
            "has no config.json). Expected a folder written by "
            "`save_to_preset`."
        )


def preset_sequence_length(loader):
    """The `sequence_length` of the preprocessor saved in a preset, or None.

    A task's preprocessor built from a preset saved by another task (a
    text classifier from a masked-LM preset, say) reads the saved
    preprocessor's packed length from `preprocessor.json`, instead of its
    own class default, which may exceed the backbone's
    `max_sequence_length`.

    Args:
        loader: a keras-hub preset loader (its `preset`).
    """
    from keras_hub.src.utils import preset_utils

    preset = getattr(loader, "preset", None)
    if preset is None or not preset_utils.check_file_exists(
        preset, preset_utils.PREPROCESSOR_CONFIG_FILE
    ):
        return None
    config = preset_utils.load_json(
        preset, preset_utils.PREPROCESSOR_CONFIG_FILE)
    length = config.get("config", {}).get("sequence_length")
    return length if isinstance(length, int) else None


def load_local_tokenizer(preset, config_file, cls, **kwargs):
    """The tokenizer saved in a local preset directory, when it is a `cls`.

    keras-hub's `Tokenizer.from_preset` looks for a tokenizer class whose
    `backbone_cls` is the preset's backbone, so a tokenizer class shared by
    several model families (`SynthesizerTokenizer`) would not load from the
    presets of the others; the saved configuration says what it is.

    Returns:
        The tokenizer with its assets, or `None`: `preset` is not a local
        directory, or holds no `config_file`.

    Raises:
        ValueError: the preset's tokenizer is of a known class that is not
            a `cls` (a character tokenizer asked of a WordPiece preset).
    """
    import json

    import keras

    if not isinstance(preset, str) or "://" in preset:
        return None
    path = os.path.join(os.path.expanduser(preset), config_file)
    if not os.path.isfile(path):
        return None
    with open(path, encoding="utf-8") as file:
        config = json.load(file)
    saved = keras.saving.get_registered_object(
        config.get("registered_name", ""))
    if not isinstance(saved, type):
        return None
    if not issubclass(saved, cls):
        raise ValueError(
            f"Argument `preset`={preset!r} holds a {saved.__name__} "
            f"({path}), not a {cls.__name__}. Load it with "
            f"`{saved.__name__}.from_preset`."
        )
    config = dict(config, config={**config.get("config", {}), **kwargs})
    tokenizer = keras.saving.deserialize_keras_object(config)
    tokenizer.load_preset_assets(preset)
    return tokenizer


def local_preset_path(preset):
    """The folder of a local preset, or None (a handle, a built-in name)."""
    if not isinstance(preset, str) or "://" in preset:
        return None
    path = os.path.expanduser(preset)
    return path if os.path.isdir(path) else None


def saved_class_name(path, file_name):
    """`(class_name, class)` saved in a preset's json file, or None.

    The class is None when it is not registered (another package's).
    """
    import json

    import keras

    full = os.path.join(path, file_name)
    if not os.path.isfile(full):
        return None
    with open(full, encoding="utf-8") as f:
        config = json.load(f)
    name = config.get("class_name")
    registered = config.get("registered_name") or name
    saved = keras.saving.get_registered_object(registered)
    return name, saved if isinstance(saved, type) else None


def check_preset_class(preset, cls, expected_backbone):
    """Raises if a local preset's backbone is not an `expected_backbone`.

    Names the preset's task (task.json) and backbone (config.json) classes
    and the ones `cls.from_preset` expects, and which class loads it.
    """
    path = local_preset_path(preset)
    if path is None or expected_backbone is None:
        return
    backbone = saved_class_name(path, "config.json")
    if backbone is None:
        return
    name, saved = backbone
    if saved is not None and issubclass(saved, expected_backbone):
        return
    if saved is None and name == expected_backbone.__name__:
        return
    task = saved_class_name(path, "task.json")
    holds = f"a `{task[0]}` (backbone `{name}`)" if task else f"a `{name}`"
    loader = task[0] if task else name
    raise ValueError(
        f"Argument `preset`: {preset!r} holds {holds}, but "
        f"`{cls.__name__}.from_preset` expects a preset with a "
        f"`{expected_backbone.__name__}` backbone. Load it with "
        f"`{loader}.from_preset`."
    )


def corrupt_weights_files(path):
    """The `.h5` files of a local preset that h5py cannot open."""
    import h5py

    corrupt = []
    for name in sorted(os.listdir(path)):
        if name.endswith(".h5"):
            try:
                h5py.File(os.path.join(path, name), "r").close()
            except OSError:
                corrupt.append(os.path.join(path, name))
    return corrupt


def load_preset(cls, preset, load, expected_backbone=None):
    """`load()`, with errors that name the preset's file and the fault.

    The preset is checked first (`check_local_preset`, and
    `check_preset_class` against `expected_backbone`). An `OSError` of
    h5py while loading (a `model.weights.h5` cut short) becomes an
    `OSError` that names the corrupt file, the original as its cause.
    A missing asset already raises keras-hub's `FileNotFoundError`, which
    names the file.

    Args:
        cls: the class whose `from_preset` runs.
        preset: the preset handle or path.
        load: a function without arguments: the keras-hub loading.
        expected_backbone: the backbone class the preset must have, or
            None.
    """
    check_local_preset(preset)
    check_preset_class(preset, cls, expected_backbone)
    try:
        return load()
    except OSError as error:
        if isinstance(error, FileNotFoundError):
            raise
        path = local_preset_path(preset)
        corrupt = corrupt_weights_files(path) if path else []
        if not corrupt:
            raise
        raise OSError(
            f"Argument `preset`: the weights file {corrupt[0]!r} of preset "
            f"{preset!r} is corrupt or incomplete (cut short?) and cannot "
            f"be read ({error}). Save the preset again "
            "(`save_to_preset`) or copy the file again."
        ) from error


def save_task_weights_without_optimizer(task, filepath):
    """keras-hub's `Task.save_task_weights`, less the optimizer's state.

    keras-hub saves the whole task but the backbone, the optimizer's
    variables included; `from_preset` builds a freshly compiled task whose
    optimizer has none yet, and Keras warns "Skipping variable loading for
    optimizer ... the saved optimizer has 86". A preset holds a model, not
    a training state: the optimizer is left out.
    """
    import keras

    objects_to_skip = list(task.backbone._flatten_layers())
    if getattr(task, "optimizer", None) is not None:
        objects_to_skip.append(task.optimizer)
    keras.saving.save_weights(
        task, filepath=filepath, objects_to_skip=objects_to_skip)


def load_task_weights_without_optimizer(task, filepath):
    """keras-hub's `Task.load_task_weights`, less the optimizer's state.

    The counterpart of `save_task_weights_without_optimizer`. Files of
    presets that hold an optimizer's state (saved before) still load: that
    state is skipped.
    """
    import keras

    objects_to_skip = list(task.backbone._flatten_layers())
    if getattr(task, "optimizer", None) is not None:
        objects_to_skip.append(task.optimizer)
    keras.saving.load_weights(task, filepath, objects_to_skip=objects_to_skip)


class PresetTaskMixin:
    """`from_preset` and task weights for the tasks of this package.

    `from_preset` goes through `load_preset` (errors that name the preset's
    file and the fault, a preset of another backbone refused with the
    class it holds); task weights are saved and loaded without the
    optimizer's state (`save_task_weights_without_optimizer`). Put it
    first among the bases of a `keras_hub.models.Task` subclass that has
    a `backbone_cls`.
    """

    @classmethod
    def from_preset(cls, preset, **kwargs):
        return load_preset(
            cls, preset,
            lambda: super(PresetTaskMixin, cls).from_preset(preset, **kwargs),
            expected_backbone=cls.backbone_cls,
        )

    def save_task_weights(self, filepath):
        """Saves the head's weights, not the backbone's or optimizer's."""
        super().save_task_weights(filepath)  # (keras-hub's checks)
        save_task_weights_without_optimizer(self, filepath)

    def load_task_weights(self, filepath):
        """Loads the head's weights; an optimizer state saved is skipped."""
        load_task_weights_without_optimizer(self, filepath)


class PresetPreprocessorMixin:
    """`from_preset` of a packing preprocessor of this package.

    A local path that is no preset fails first with a clear error
    (`check_local_preset`). A preset saved by another task (a
    `SynthesizerMaskedLM` for a classifier, say) gives its tokenizer and,
    unless `sequence_length` is passed, the packed length of its own
    preprocessor (`preset_sequence_length`).
    """

    @classmethod
    def from_preset(cls, preset, **kwargs):
        check_local_preset(preset)
        return super().from_preset(preset, **kwargs)

    @classmethod
    def _add_missing_kwargs(cls, loader, kwargs):
        kwargs = super()._add_missing_kwargs(loader, kwargs)
        if "sequence_length" not in kwargs:
            length = preset_sequence_length(loader)
            if length is not None:
                kwargs["sequence_length"] = length
        return kwargs
