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
        directory, or holds no `config_file` of a `cls`.
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
    if not (isinstance(saved, type) and issubclass(saved, cls)):
        return None
    config = dict(config, config={**config.get("config", {}), **kwargs})
    tokenizer = keras.saving.deserialize_keras_object(config)
    tokenizer.load_preset_assets(preset)
    return tokenizer
