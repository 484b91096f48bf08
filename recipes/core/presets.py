"""Fine-tuning from a keras-hub preset folder (`--preset`): what the preset
holds, read from its JSON files before TensorFlow is imported, and the
flags it decides.

A recipe's architecture flags default to None; `resolve_flags` gives each
the preset's value (or, without a preset, the recipe's default), and a flag
the user set to another value than the preset's is an error that names
both: the preset's weights only fit its own architecture.
"""

import collections
import json

from recipes.core import storage
from recipes.core.storage import join
from recipes.core.data_files import DataError

VOCABULARY_ASSET = "assets/tokenizer/vocabulary.txt"


Preset = collections.namedtuple("Preset", [
    "path", "backbone_class", "backbone", "tokenizer", "vocabulary",
    "vocabulary_path", "task_class"])
Preset.__doc__ = """What `read_preset` found: `path`, `backbone_class` (the
class name in `config.json`), `backbone` (its config), `tokenizer` (the
tokenizer config, or None), `vocabulary` (the tokenizer's tokens, or None),
`vocabulary_path` and `task_class` (`task.json`'s class, or None)."""


def _read_json(path, what):
    if not storage.isfile(path):
        raise DataError(f"Argument `--preset`: expected {what} at {path}; no "
                        "such file (a keras-hub preset folder, as "
                        "`save_to_preset` writes it).")
    try:
        return json.loads(storage.read_text(path))
    except (ValueError, UnicodeDecodeError) as error:
        raise DataError(f"Argument `--preset`: {path} is not valid JSON "
                        f"({error}).") from None


def read_preset(path, backbone_classes, recipe):
    """Reads the preset folder `path` (local or `gs://`).

    Args:
        backbone_classes: the backbone class names the recipe fine-tunes.
        recipe: the recipe's name, for the messages.

    Raises:
        DataError: not a preset folder, a backbone of another kind, or a
            WordPiece tokenizer without its vocabulary; the message names
            the file and what was expected.
    """
    if not storage.gfile().isdir(path):
        raise DataError(f"Argument `--preset`: {path} is not a folder; "
                        "expected a keras-hub preset folder (e.g. "
                        "<model_dir>/preset of recipes.pretrain).")
    config = _read_json(join(path, "config.json"),
                        "the backbone's config.json")
    backbone_class = config.get("class_name")
    if backbone_class not in backbone_classes:
        raise DataError(
            f"Argument `--preset`: {path} holds a {backbone_class}; "
            f"{recipe} fine-tunes a {' or '.join(backbone_classes)} "
            f"(config.json's class_name).")
    task_class = None
    if storage.isfile(join(path, "task.json")):
        task_class = _read_json(join(path, "task.json"),
                                "task.json").get("class_name")
    tokenizer = vocabulary = vocabulary_path = None
    if storage.isfile(join(path, "tokenizer.json")):
        tokenizer = _read_json(join(path, "tokenizer.json"),
                               "tokenizer.json")
    if tokenizer is None or tokenizer.get("class_name") != (
            "SynthesizerTokenizer"):
        found = tokenizer.get("class_name") if tokenizer else "none"
        raise DataError(
            f"Argument `--preset`: {path} has no WordPiece "
            f"SynthesizerTokenizer (tokenizer.json: {found}); {recipe} "
            "tokenizes with the preset's WordPiece vocabulary.")
    vocabulary_path = join(path, VOCABULARY_ASSET)
    if not storage.isfile(vocabulary_path):
        raise DataError(f"Argument `--preset`: the tokenizer's vocabulary "
                        f"{vocabulary_path} is missing.")
    vocabulary = [line for line in storage.read_text(
        vocabulary_path).split("\n") if line]
    return Preset(path, backbone_class, config.get("config", {}),
                  tokenizer.get("config", {}), vocabulary, vocabulary_path,
                  task_class)


def resolve_flags(args, preset, table, defaults, flag_names=None):
    """Sets the architecture flags of `args` that are None.

    Args:
        preset: a `Preset`, or None.
        table: `{flag: preset value}` (values the preset decides).
        defaults: `{flag: default}` without a preset.
        flag_names: `{flag: how the command line spells it}` where that
            is not `--flag=value` (e.g. `{"lowercase": "--no_lowercase"}`).

    Raises:
        ValueError: a flag set to a value other than the preset's; the
            message names the flag, both values and the preset.
    """
    for flag, default in defaults.items():
        value = getattr(args, flag)
        if preset is None or flag not in table:
            if value is None:
                setattr(args, flag, default)
            continue
        wanted = table[flag]
        if value is None:
            setattr(args, flag, wanted)
        elif value != wanted:
            given = (flag_names or {}).get(flag, f"--{flag}={value}")
            raise ValueError(
                f"Argument `{given}` contradicts the preset {preset.path}: "
                f"its {flag} is {wanted}. Leave the flag out (the preset "
                "decides) or pretrain with that value.")


def apply_preset(args, prog, backbone_classes, defaults, length_flag,
                 flags_to_config, chosen=(), flag_names=None):
    """What a recipe's `--preset` decides, applied to `args` in place.

    Without `args.preset`, the flags that are None get `defaults`. With it:
    the synthesizer flags are canonicalised and the options parsed before
    they are compared; `flags_to_config` maps flags to the backbone config
    keys the preset decides (the vocabulary's size and case too); the flag
    `length_flag` may be at most the preset's `max_sequence_length` (its
    default); `chosen` maps flags whose default is the preset's but that
    may differ (e.g. pooling) to their config keys; `flag_names` as
    `resolve_flags` takes it.

    Returns:
        The `Preset`, or None.

    Raises:
        ValueError: a contradicting flag, a `--vocab_file` or a length
            beyond the preset's (`DataError` for an unreadable preset).
    """
    from recipes.core import model_flags

    for flag in ("synthesizer", "cross_attention_synthesizer"):
        if getattr(args, flag, None) is not None:
            setattr(args, flag, model_flags.canonical_synthesizer(
                flag, getattr(args, flag)))
    if isinstance(getattr(args, "synthesizer_options", None), str):
        try:  # compared as a dict; bad JSON is reported by the flag's check
            parsed = json.loads(args.synthesizer_options)
        except ValueError:
            parsed = None
        if isinstance(parsed, dict):
            args.synthesizer_options = parsed
    if not args.preset:
        resolve_flags(args, None, {}, defaults, flag_names)
        return None
    preset = read_preset(args.preset, backbone_classes, prog)
    if args.vocab_file:
        raise ValueError(
            f"Argument `--vocab_file`={args.vocab_file}: the preset "
            f"{args.preset} brings its own vocabulary ({VOCABULARY_ASSET}); "
            "leave --vocab_file out.")
    config = preset.backbone
    table = {flag: config.get(key) for flag, key in flags_to_config.items()}
    table["vocab_size"] = len(preset.vocabulary)
    table["lowercase"] = preset.tokenizer.get("lowercase", True)
    longest = config["max_sequence_length"]
    length = getattr(args, length_flag)
    if length is not None and length > longest:
        raise ValueError(
            f"Argument `--{length_flag}`={length} exceeds the preset "
            f"{args.preset}'s max_sequence_length={longest} (its position "
            "embeddings and synthesizers); pass at most that.")
    defaults = dict(defaults, **{length_flag: longest})
    defaults.update({flag: config.get(key, defaults.get(flag))
                     for flag, key in dict(chosen).items()})
    resolve_flags(args, preset, table, defaults, flag_names)
    return preset


def defer_defaults(parser, defaults):
    """Sets the defaults of the flags in `defaults` to None (so that
    `resolve_flags` can tell a flag the user gave), and says in their help
    what the default is."""
    for action in parser._actions:  # (argparse has no public iterator)
        if action.dest in defaults:
            action.default = None
            action.help = (action.help or "") + (
                f" Default: {defaults[action.dest]}; with --preset, the "
                "preset's.")


__all__ = ["Preset", "apply_preset", "defer_defaults", "read_preset", "resolve_flags"]
