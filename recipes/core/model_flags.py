"""The model flags every recipe shares: the architecture
(`add_model_flags`), `--synthesizer` (the package's built-in variants and
their mixtures) and `--synthesizer_options`.

Pure Python but for `synthesizer_options`' check of the values, which
asks the variants' own code (and so imports Keras).
"""

import argparse
import json
import sys

from recipes.core import flags


def builtin_variants():
    """keras-synth's built-in variants, read from the package's source
    without importing it: importing keras_synth imports Keras (which fixes
    the backend and takes seconds), and the flags are checked before that.
    The package holds the one list: `VARIANTS` (the paper's, in its order)
    first, then every other name that a module of
    `keras_synth/layers/synthesizers/` registers with
    `@register_synthesizer("name")` (the convolutions, `CONV_VARIANTS`),
    in the order `__init__.py` imports those modules: the built-in entries
    of the registry.

    Raises:
        RuntimeError: the package's source has no `VARIANTS` tuple.
    """
    import ast
    import importlib.util
    import pathlib

    package = pathlib.Path(importlib.util.find_spec("keras_synth").origin)
    package = package.parent / "layers" / "synthesizers"
    source = package / "__init__.py"
    tree = ast.parse(source.read_text(encoding="utf-8"))
    variants = None
    modules = []
    prefix = "keras_synth.layers.synthesizers."
    for node in tree.body:
        if isinstance(node, ast.Assign) and any(
                getattr(t, "id", None) == "VARIANTS" for t in node.targets):
            variants = tuple(ast.literal_eval(node.value))
        elif (isinstance(node, ast.ImportFrom) and node.module
              and node.module.startswith(prefix)
              and node.module[len(prefix):] not in modules):
            modules.append(node.module[len(prefix):])
    if variants is None:
        raise RuntimeError(f"{source} defines no VARIANTS tuple.")
    registered = []
    for module in modules:
        path = package / f"{module}.py"
        if path.exists():
            registered += _registered_names(
                ast.parse(path.read_text(encoding="utf-8")))
    return variants + tuple(
        name for name in dict.fromkeys(registered) if name not in variants)


def _registered_names(tree):
    """The names of the `@register_synthesizer("name")` decorators of a
    module's classes, in source order."""
    import ast

    names = []
    for node in tree.body:
        if not isinstance(node, ast.ClassDef):
            continue
        for decorator in node.decorator_list:
            if (isinstance(decorator, ast.Call)
                    and getattr(decorator.func, "id", None)
                    == "register_synthesizer"
                    and decorator.args
                    and isinstance(decorator.args[0], ast.Constant)
                    and isinstance(decorator.args[0].value, str)):
                names.append(decorator.args[0].value)
    return names


# The variants a recipe's `--synthesizer` takes: the package's built-in ones.
SYNTHESIZERS = builtin_variants()
SYNTHESIZERS_HELP = ", ".join(SYNTHESIZERS[:-1]) + (
    f", {SYNTHESIZERS[-1]}, or a mixture such as random+vanilla")


def add_model_flags(group, num_layers, hidden_dim, layers_help,
                    synthesizer_help="Attention variant",
                    dropout_help="Dropout rate of the embeddings, attention "
                    "and feedforward layers."):
    """Adds the architecture flags the recipes share to an argument group:
    `--synthesizer`, `--num_layers` (`layers_help` says what it counts),
    `--hidden_dim`, `--num_heads`, `--intermediate_dim`, `--dropout`
    (`dropout_help` says where it applies), `--synthesizer_options` (and
    release 0.1's `--factorized_rank`, deprecated).
    """
    group.add_argument("--synthesizer", default="random+vanilla",
                       help=f"{synthesizer_help}: {SYNTHESIZERS_HELP}.")
    group.add_argument("--num_layers", type=flags.positive_int,
                       default=num_layers,
                       help=layers_help)
    group.add_argument("--hidden_dim", type=flags.positive_int,
                       default=hidden_dim,
                       help="Model width (embeddings and blocks).")
    group.add_argument("--num_heads", type=flags.positive_int,
                       default=4,
                       help="Attention heads per block.")
    group.add_argument("--intermediate_dim", type=flags.positive_int,
                       default=None,
                       help="Feedforward width (default: 4 x "
                       "--hidden_dim).")
    group.add_argument("--dropout", type=float, default=0.1,
                       help=dropout_help)
    group.add_argument("--synthesizer_options", default=None,
                       metavar="JSON",
                       help="The variants' options as a JSON object, e.g. "
                       "'{\"rank\": 4}' (factorized_random's rank r, "
                       "default 8), '{\"sizes\": [4, 8]}' "
                       "(factorized_dense's a x b), '{\"initializer\": "
                       "\"zeros\"}' (the random variants'), "
                       "'{\"kernel_size\": 7, \"padding\": \"causal\"}' "
                       "(light_conv's and dynamic_conv's), or per variant "
                       "'{\"factorized_random\": {\"rank\": 4}}'.")
    # Release 0.1's flag, kept working (deprecated): see
    # `synthesizer_options`.
    group.add_argument("--factorized_rank", type=int, default=None,
                       help=argparse.SUPPRESS)


def synthesizer_options(args, flags=("synthesizer",), max_length=None,
                        check_values=True):
    """Parses and checks `--synthesizer_options` for the variants of the
    synthesizer flags `flags`; returns the options dict (or `None`).

    Release 0.1's `--factorized_rank=N` still works (a deprecation line on
    stderr) as `{"factorized_random": {"rank": N}}`.

    With `check_values=False` only the JSON is checked (pure Python, before
    TensorFlow is imported; no deprecation line): the options' names and
    values are checked by the variants' own code, which imports Keras.
    Called again on the options it returned (a dict), it checks them and
    returns them as they are.

    Raises:
        ValueError: naming `--synthesizer_options`, for bad JSON, an option
            no variant in use has, or a bad value.
    """
    if isinstance(args.synthesizer_options, dict):  # parsed already
        options = args.synthesizer_options
        if check_values:
            _deprecation_line(args)
            _check_option_values(args, flags, options, max_length)
        return options
    options = None
    if args.synthesizer_options is not None:
        try:
            options = json.loads(args.synthesizer_options)
        except json.JSONDecodeError as error:
            raise ValueError(
                "Argument `--synthesizer_options` must be a JSON object, e.g. "
                f"'{{\"rank\": 4}}'. Received: {args.synthesizer_options!r} "
                f"({error})") from None
        if not isinstance(options, dict):
            raise ValueError(
                "Argument `--synthesizer_options` must be a JSON object, e.g. "
                f"'{{\"rank\": 4}}'. Received: {args.synthesizer_options!r}")
    variants = set()
    for flag in flags:
        try:
            variants.update(canonical_synthesizer(
                flag, getattr(args, flag)).split("+"))
        except ValueError:
            pass  # reported with the flag's own check
    if getattr(args, "factorized_rank", None) is not None:
        if check_values:
            _deprecation_line(args)
        if "factorized_random" in variants:  # else ignored, as in 0.1
            options = dict(options or {})
            options["factorized_random"] = dict(
                options.get("factorized_random", {}),
                rank=args.factorized_rank)
    if check_values:
        _check_option_values(args, flags, options, max_length)
    return options or None


def _deprecation_line(args):
    if getattr(args, "factorized_rank", None) is not None:
        print("Warning: --factorized_rank is deprecated; use "
              f"--synthesizer_options='{{\"rank\": {args.factorized_rank}}}'",
              file=sys.stderr)


def _check_option_values(args, flags, options, max_length):
    """The variants' own checks of `options` (imports Keras)."""
    from keras_synth.layers.synthesizers import get_synthesizer
    from keras_synth.layers.synthesizers import select_options
    from keras_synth.layers.synthesizers import split_options
    from keras_synth.layers.synthesizers import variants_of

    specs = [getattr(args, flag) for flag in flags]
    variants = tuple(sorted(variants_of(specs)))
    try:
        split_options(variants, options)
        for spec in specs:
            names = variants_of([spec])
            per_variant = split_options(
                tuple(names), select_options(names, options))
            for name, given in per_variant.items():
                get_synthesizer(name).resolve_options(given, max_length)
    except ValueError as error:
        raise ValueError(f"Argument `--synthesizer_options`: {error}") from None


def canonical_synthesizer(flag, value):
    """`--flag=value` as `SynthesizerAttention` spells variants (`"a+b"`).

    Pure Python (the recipes' variants are the built-in ones,
    `SYNTHESIZERS`), so that it runs before TensorFlow is imported.

    Raises:
        ValueError: naming the flag, for an unknown variant, an empty
            mixture or a variant named twice.
    """
    from recipes import cli

    names = [name.strip() for name in str(value).split("+")]
    for name in names:
        if name not in SYNTHESIZERS:
            raise ValueError(
                f"Argument `--{flag}`: Unknown variant {name!r}. Expected "
                f"one of {', '.join(SYNTHESIZERS)} or a mixture of them "
                f"joined with '+'. Received: --{flag}={value}."
                + cli.suggestion(name, SYNTHESIZERS))
    duplicates = sorted({name for name in names if names.count(name) > 1})
    if duplicates:
        raise ValueError(
            f"Argument `--{flag}` names {', '.join(duplicates)} more than "
            f"once; each variant may appear once in a mixture. Received: "
            f"--{flag}={value}")
    return "+".join(names)


__all__ = ["SYNTHESIZERS", "SYNTHESIZERS_HELP", "add_model_flags",
           "builtin_variants", "canonical_synthesizer",
           "synthesizer_options"]
