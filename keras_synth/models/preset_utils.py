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
