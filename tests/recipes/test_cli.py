"""The recipes' command lines: honest `--help`, "did you mean", input paths
checked before TensorFlow, quiet logs, the export's usage notes and the
attention picture. Pure Python except where marked (every backend)."""

import importlib
import json
import os
import re
import subprocess
import sys

import keras
import numpy as np
import pytest

from keras_synth.layers import SynthesizerAttention
from recipes import benchmark, cli, registry, serving
from recipes.glue import tasks
from recipes.glue import train as glue_train
from recipes.translate import train as translate_train
from tests.recipes.core.tensorflow_only import once

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(
    os.path.abspath(__file__))))
# Every registered recipe that trains (`recipes/<name>/train.py`).
PARSERS = {recipe.name: importlib.import_module(
    f"{recipe.module}.train").build_parser
    for recipe in registry.recipes() if recipe.smoke}


def help_text(build_parser):
    # A wide terminal: no line breaks (argparse also breaks at hyphens)
    # inside a flag's help.
    saved = os.environ.get("COLUMNS")
    os.environ["COLUMNS"] = "1000"
    try:
        return build_parser().format_help()
    finally:
        if saved is None:
            del os.environ["COLUMNS"]
        else:
            os.environ["COLUMNS"] = saved


def flag_help(text, flag):
    """The help of `flag` (`--flag VALUE  help...`) on one line."""
    lines = text.splitlines()
    for i, line in enumerate(lines):
        if re.match(rf"\s+{re.escape(flag)}\b", line):
            entry = [line]
            for more in lines[i + 1:]:
                if not more.strip() or re.match(r"\s+-", more) or (
                        not more.startswith(" ")):
                    break
                entry.append(more.strip())
            return " ".join(entry).strip()
    raise AssertionError(f"{flag} not in --help")


def flags_in_help(text):
    """Every long flag that `--help` lists, in order."""
    return re.findall(r"^\s+(?:-\w, )?(--\w+)", text, re.MULTILINE)


@pytest.mark.parametrize("recipe", sorted(PARSERS))
def test_every_flag_has_help_and_no_misleading_default(recipe):
    # Read through argparse's public surface only: the help text, the
    # usage line (optional flags in brackets) and `get_default`.
    parser = PARSERS[recipe]()
    text = help_text(PARSERS[recipe])
    usage = " ".join(parser.format_usage().split())
    assert "(default: None)" not in text
    flags = [f for f in flags_in_help(text) if f != "--help"]
    assert "--model_dir" in flags and "--synthesizer" in flags, flags
    for flag in flags:
        line = flag_help(text, flag)
        # `--flag VALUE  help`: a value placeholder (DEST, {a,b},
        # DEST [DEST ...]) follows after one space; a switch has none.
        placeholder = re.match(
            r"( (\{[^}]*\}|[A-Z_]+|\[[A-Z_]+ \.\.\.\]))+(?= |$)",
            line[len(flag):])
        described = line[len(flag) + (placeholder.end() if placeholder
                                      else 0):].strip()
        assert described, f"{recipe}: {flag} has no help"
        default = parser.get_default(flag[2:])
        if not re.search(rf"\[{flag}\b", usage):  # required
            assert line.endswith("(required)"), line
        elif not placeholder:  # switches: no "(default: True)"
            assert "(default:" not in line, line
        elif default is not None:
            assert f"(default: {default})" in line, line


def test_help_states_the_real_model_dir_and_the_switches():
    glue = help_text(glue_train.build_parser)
    assert "Default: runs/glue/<task>-<variant>." in flag_help(
        glue, "--model_dir")
    assert "by default text is lowercased" in flag_help(glue, "--no_lowercase")
    assert "by default it is written" in flag_help(glue, "--no_export")
    translate = help_text(translate_train.build_parser)
    assert ("Default: runs/translate/<dataset>-<src>-<tgt>-<variant>."
            in flag_help(translate, "--model_dir"))
    assert "--dataset=builtin" in flag_help(translate, "--dataset")


@pytest.mark.parametrize("value, choices, expected", [
    ("randon", ["random", "dense"], " Did you mean 'random'?"),
    ("sst3", tasks.TASKS, " Did you mean 'sst2'?"),
    ("zzzz", ["random", "dense"], ""),
])
def test_suggestion(value, choices, expected):
    assert cli.suggestion(value, choices) == expected


@pytest.mark.parametrize("argv, message", [
    (["--task=builtin", "--strategy=mirorred"],
     r"invalid choice: 'mirorred'.*Did you mean 'mirrored'\?"),
    # Not the closest spelling ('tpu'): what a GPU user wants.
    (["--task=builtin", "--strategy=gpu"],
     r"invalid choice: 'gpu'.*Did you mean 'mirrored'\?"),
    (["--task=builtin", "--strategy=cpu"], r"Did you mean 'one_device'\?"),
    (["--task=builtin", "--pooling=cl"], r"Did you mean 'cls'\?"),
])
def test_choices_suggest_the_closest(argv, message, capsys):
    with pytest.raises(SystemExit):
        glue_train.build_parser().parse_args(argv)
    assert re.search(message, capsys.readouterr().err)


def test_unknown_names_get_a_suggestion():
    with pytest.raises(ValueError, match=r"synthesizer='randon'\. Did you "
                       r"mean 'random'\?"):
        SynthesizerAttention(num_heads=2, key_dim=4, synthesizer="randon",
                             max_length=8)
    with pytest.raises(ValueError, match=r"'sst3'.*Did you mean 'sst2'\?"):
        tasks.get_task("sst3")
    with pytest.raises(ValueError, match="Did you mean"):
        SynthesizerAttention(num_heads=2, key_dim=4,
                             synthesizer="random+vanila", max_length=8)


@pytest.mark.parametrize("recipe, argv, flag", [
    ("glue", ["--task=sst2", "--data_dir=/no/such/glue"], "--data_dir"),
    ("glue", ["--task=builtin", "--vocab_file=/no/vocab.txt"], "--vocab_file"),
    ("translate", ["--src=de", "--tgt=en", "--train_src=/no/train.de",
                   "--train_tgt=/no/train.en"], "--train_src"),
    ("summarize", ["--train_file=/no/train.tsv"], "--train_file"),
    ("dialogue", ["--data_dir=/no/personachat"], "--data_dir"),
])
def test_missing_input_paths_are_reported_before_tensorflow(
        recipe, argv, flag, tmp_path):
    # In a fresh process, so that TensorFlow's import would show.
    code = ("import sys; from recipes.%s.train import main; code = main(%r);"
            "print('tensorflow' in sys.modules); sys.exit(code)"
            % (recipe, argv + [f"--model_dir={tmp_path}"]))
    result = subprocess.run([sys.executable, "-c", code], cwd=ROOT,
                            capture_output=True, text=True, timeout=300)
    assert result.returncode == 2
    assert result.stdout.strip() == "False"  # TensorFlow never imported
    assert result.stderr.count("\n") == 1, result.stderr  # one line
    assert f"Argument `{flag}`: no such file or directory" in result.stderr


# Bad flags and values, each reported in one line before TensorFlow (or
# Keras) is imported: (recipe, arguments, what the error says). The table
# of docs/recipes/glue.md ("Bad flags") shows these rows.
FLAG_ERRORS = [
    ("glue", ["--task=builtin", "--hiden_dim=64"],
     "unrecognized arguments: --hiden_dim=64"),
    ("glue", ["--task=sst3"], "Did you mean 'sst2'?"),
    ("glue", ["--task=builtin", "--strategy=gpu"], "Did you mean 'mirrored'?"),
    ("glue", ["--task=builtin", "--synthesizer=randon"],
     "Argument `--synthesizer`: Unknown variant 'randon'. Expected one of "
     "dense, random, fixed_random, factorized_dense, factorized_random, "
     "vanilla, light_conv, dynamic_conv or a mixture of them joined with "
     "'+'. Received: "
     "--synthesizer=randon. Did you mean 'random'?"),
    ("glue", ["--task=builtin", "--synthesizer=random+random"],
     "Argument `--synthesizer` names random more than once"),
    ("glue", ["--task=builtin", "--hidden_dim=-3"],
     "Argument `--hidden_dim` must be positive. Received: --hidden_dim=-3"),
    ("glue", ["--task=builtin", "--dropout=1.5"],
     "Argument `--dropout` must be in [0, 1). Received: --dropout=1.5"),
    ("glue", ["--task=builtin", "--synthesizer_options=rank=4"],
     "Argument `--synthesizer_options` must be a JSON object"),
    ("lm", ["--sequence_length=0"],
     "Argument `--sequence_length` must be positive"),
    ("lm", ["--hidden_dim=30", "--num_heads=4"],
     "Argument `--hidden_dim` must be a multiple of `--num_heads` (each head "
     "gets hidden_dim / num_heads features). Received: --hidden_dim=30, "
     "--num_heads=4"),
    ("lm", ["--synthesizer=rnadom"], "Did you mean 'random'?"),
    ("translate", ["--src=de", "--tgt=en", "--label_smoothing=1"],
     "Argument `--label_smoothing` must be in [0, 1)"),
    ("translate", ["--src=de", "--tgt=en",
                   "--cross_attention_synthesizer=dense+"],
     "Argument `--cross_attention_synthesizer`: Unknown variant ''"),
    ("benchmark", ["--hidden_dim=30"],
     "Argument `--hidden_dim` must be a multiple of `--num_heads` (each head "
     "gets hidden_dim / num_heads features). Received: --hidden_dim=30, "
     "--num_heads=4"),
    ("benchmark", ["--backends=jaxx"], "Did you mean 'jax'?"),
    ("benchmark", ["--mode=generate", "--backends=torch_compile"],
     "--backends torch_compile times --mode train only"),
]

_FLAG_ERRORS_SCRIPT = """
import contextlib, importlib, io, json, sys

recipe, rows = sys.argv[1], json.loads(sys.argv[2])
module = "recipes.benchmark.runner" if recipe == "benchmark" else (
    f"recipes.{recipe}.train")
main = importlib.import_module(module).main
report = []
for argv in rows:
    err = io.StringIO()
    with contextlib.redirect_stderr(err):
        try:
            code = main(argv)
        except SystemExit as exit:
            code = exit.code
    if isinstance(code, str):  # SystemExit("message"): Python prints it
        err.write(code + "\\n")
        code = 1
    report.append({"code": code, "stderr": err.getvalue(), "imported": [
        m for m in ("tensorflow", "keras") if m in sys.modules]})
print(json.dumps(report))
"""


@once
@pytest.mark.parametrize("recipe", sorted(PARSERS) + ["benchmark"])
def test_flag_errors_come_before_tensorflow(recipe):
    # One fresh process per recipe runs its rows: a bad flag or value is
    # reported without importing TensorFlow or Keras (which take seconds).
    rows = [(argv, message) for name, argv, message in FLAG_ERRORS
            if name == recipe]
    result = subprocess.run(
        [sys.executable, "-c", _FLAG_ERRORS_SCRIPT, recipe,
         json.dumps([argv for argv, _ in rows])],
        cwd=ROOT, capture_output=True, text=True, timeout=300,
        env={k: v for k, v in os.environ.items() if k != "KERAS_BACKEND"})
    assert result.returncode == 0, result.stderr[-3000:]
    report = json.loads(result.stdout.strip().splitlines()[-1])
    for (argv, message), outcome in zip(rows, report):
        assert outcome["code"] in (1, 2), (argv, outcome)
        assert outcome["imported"] == [], (argv, outcome)
        last = outcome["stderr"].strip().splitlines()[-1]
        assert message in last, (argv, outcome["stderr"])
        assert "Traceback" not in outcome["stderr"]


def test_flag_error_table_is_in_the_docs():
    with open(os.path.join(ROOT, "docs", "recipes", "glue.md"),
              encoding="utf-8") as f:
        text = f.read()
    for recipe, argv, _ in FLAG_ERRORS:
        command = f"`python -m recipes.{recipe} {' '.join(argv)}`"
        assert command in text, command


def test_recipe_variants_are_the_layers_variants():
    from keras_synth.layers.synthesizers import CONV_VARIANTS
    from keras_synth.layers.synthesizers import VARIANTS

    from recipes.core import model_flags

    # Read from the package's source, not a copy: the paper's variants in
    # its order, then the convolutions.
    assert model_flags.SYNTHESIZERS == VARIANTS + CONV_VARIANTS
    assert model_flags.canonical_synthesizer("s", " random + vanilla") == (
        "random+vanilla")
    for spec in ("light_conv", "dynamic_conv", "dynamic_conv+vanilla",
                 "light_conv+random"):
        assert model_flags.canonical_synthesizer("synthesizer", spec) == spec


def test_every_registered_builtin_variant_is_a_flag_choice():
    # The registry after importing the package: every variant that
    # keras-synth itself registers (user-registered ones, e.g. from
    # doctests, live in other modules) is a choice of `--synthesizer`.
    from keras_synth.layers.synthesizers import get_synthesizer
    from keras_synth.layers.synthesizers import registered_synthesizers

    from recipes.core import model_flags

    builtin = [name for name in registered_synthesizers()
               if get_synthesizer(name).__module__.startswith(
                   "keras_synth.layers.synthesizers.")]
    assert "light_conv" in builtin and "dynamic_conv" in builtin
    assert sorted(builtin) == sorted(model_flags.SYNTHESIZERS)
    assert sorted(model_flags.builtin_variants()) == sorted(builtin)


def test_builtin_variants_follow_the_package_source(tmp_path, monkeypatch):
    # A variant registered by a new module of the package (not listed in
    # any tuple) becomes a choice; a package without VARIANTS is an error.
    import importlib.util
    import shutil
    import types

    from recipes.core import model_flags

    real = importlib.util.find_spec("keras_synth").origin
    package = tmp_path / "keras_synth"
    synthesizers = package / "layers" / "synthesizers"
    shutil.copytree(os.path.dirname(os.path.dirname(real)) + "/keras_synth"
                    "/layers/synthesizers", synthesizers,
                    ignore=shutil.ignore_patterns("__pycache__"))
    (package / "__init__.py").write_text("")
    (synthesizers / "banded.py").write_text(
        "from keras_synth.layers.synthesizers.base import Synthesizer\n"
        "from keras_synth.layers.synthesizers.registry import "
        "register_synthesizer\n\n\n"
        "@register_synthesizer(\"banded\")\n"
        "class Banded(Synthesizer):\n    pass\n")
    init = synthesizers / "__init__.py"
    text = init.read_text()
    init.write_text(text.replace(
        "from keras_synth.layers.synthesizers.registry import "
        "deserialize_options",
        "from keras_synth.layers.synthesizers.banded import Banded\n"
        "from keras_synth.layers.synthesizers.registry import "
        "deserialize_options", 1))
    spec = types.SimpleNamespace(origin=str(package / "__init__.py"))
    monkeypatch.setattr(importlib.util, "find_spec", lambda name: spec)
    assert model_flags.builtin_variants() == (
        model_flags.SYNTHESIZERS + ("banded",))
    init.write_text(text.replace("VARIANTS = (", "OTHER = ("))
    with pytest.raises(RuntimeError, match="defines no VARIANTS tuple"):
        model_flags.builtin_variants()


@pytest.mark.parametrize("options, error", [
    ('{"kernel_size": 7}', None),
    ('{"kernel_size": 7, "padding": "causal"}', None),
    ('{"dynamic_conv": {"kernel_size": 5}}', None),
    ('{"kernel_size": 0}', "kernel_size=0"),
    ('{"padding": "same"}', "padding='same'"),
    ('{"kernel_sise": 7}', "Did you mean 'kernel_size'?"),
])
def test_convolution_options_through_a_recipe_parser(options, error):
    # The lm recipe's parser: --synthesizer=dynamic_conv+vanilla with the
    # convolutions' options in --synthesizer_options.
    from recipes.lm import train

    args = train.build_parser().parse_args(
        ["--synthesizer=dynamic_conv+vanilla",
         f"--synthesizer_options={options}"])
    if error is None:
        train.validate_args(args)
        assert args.synthesizer == "dynamic_conv+vanilla"
        assert args.synthesizer_options == json.loads(options)
    else:
        with pytest.raises(ValueError, match="Argument `--synthesizer_"
                           "options`") as info:
            train.validate_args(args)
        assert error in str(info.value)


@pytest.mark.skipif(keras.backend.backend() != "tensorflow",
                    reason="the recipes run on the TensorFlow backend")
@pytest.mark.parametrize("tf_logs", [False, True])
def test_a_fresh_recipe_process_prints_no_tensorflow_noise(tmp_path,
                                                           tf_logs):
    # Fails on an option value, checked by the layers after TensorFlow and
    # Keras are imported: the only line on stderr is the recipe's own
    # error, unless KERAS_SYNTH_TF_LOGS=1 asks for TensorFlow's lines.
    env = dict(os.environ, KERAS_BACKEND="tensorflow")
    env.pop("TF_CPP_MIN_LOG_LEVEL", None)
    env.pop(cli.TF_LOGS_ENV, None)
    if tf_logs:
        env[cli.TF_LOGS_ENV] = "1"
    result = subprocess.run(
        [sys.executable, "-m", "recipes.glue", "--task=builtin",
         "--synthesizer=factorized_random",
         '--synthesizer_options={"rank": -1}', f"--model_dir={tmp_path}"],
        cwd=ROOT, capture_output=True, text=True, timeout=300, env=env)
    assert result.returncode == 2
    assert result.stdout == ""
    lines = result.stderr.splitlines()
    ours = [line for line in lines
            if line.startswith("python -m recipes.glue: error:")]
    assert len(ours) == 1 and "`--synthesizer_options`" in ours[0], lines
    if tf_logs:
        assert len(lines) > 1, lines  # TensorFlow's start-up lines
    else:
        assert lines == ours, result.stderr


def test_tf_logs_env_variable(monkeypatch):
    monkeypatch.delenv(cli.TF_LOGS_ENV, raising=False)
    assert not cli.tf_logs_wanted()
    assert cli.tf_logs_wanted(argparse_namespace(tf_logs=True))
    for value, wanted in (("1", True), ("yes", True), ("0", False),
                          ("", False)):
        monkeypatch.setenv(cli.TF_LOGS_ENV, value)
        assert cli.tf_logs_wanted(argparse_namespace(tf_logs=False)) is wanted


def argparse_namespace(**kwargs):
    import argparse

    return argparse.Namespace(**kwargs)


@pytest.mark.parametrize("recipe", sorted(PARSERS) + ["benchmark"])
def test_help_shows_each_default_once(recipe):
    build = (benchmark.build_parser if recipe == "benchmark"
             else PARSERS[recipe])
    text = help_text(build)
    for flag in flags_in_help(text):
        if flag == "--help":
            continue
        line = flag_help(text, flag)
        assert line.count("(default:") <= 1, line
        if recipe == "benchmark":  # comma-separated lists, as typed
            assert "['" not in line, line
    dropout = flag_help(text, "--dropout") if recipe != "benchmark" else ""
    assert ("classification head" in dropout) == (recipe == "glue"), dropout


def test_quiet_tensorflow_restores_warnings_and_environment():
    import logging
    import warnings

    os.environ.pop("TF_CPP_MIN_LOG_LEVEL", None)
    absl = logging.getLogger("absl")
    level = absl.level
    with cli.quiet_tensorflow():
        assert os.environ["TF_CPP_MIN_LOG_LEVEL"] == "3"
        assert absl.level == logging.ERROR
        with warnings.catch_warnings(record=True) as caught:
            warnings.warn("hidden")  # "ignore" filter of the block
        assert caught == []
    assert "TF_CPP_MIN_LOG_LEVEL" not in os.environ
    assert absl.level == level
    with cli.quiet_tensorflow(enabled=False):
        assert "TF_CPP_MIN_LOG_LEVEL" not in os.environ


def test_tf_logs_is_a_runtime_flag_of_every_recipe():
    for key, recipe, argv in registry.smoke_commands():
        args = PARSERS[recipe.name]().parse_args(argv + ["--tf_logs"])
        assert args.tf_logs is True, key
    from recipes.core import run_directory
    assert "tf_logs" in run_directory.RUNTIME_FLAGS


@pytest.mark.parametrize("underscore, hyphen, dest, value", [
    ("--mask_lengths", "--mask-lengths", "mask_lengths", [16]),
    ("--memory_batch", "--memory-batch", "memory_batch", 16),
    ("--memory_length", "--memory-length", "memory_length", 16),
    ("--model_dir", "--run-dir", "model_dir", "16"),
])
def test_benchmark_flags_use_underscores_and_keep_hyphen_aliases(
        underscore, hyphen, dest, value):
    parser = benchmark.build_parser()
    for flag in (underscore, hyphen):
        assert getattr(parser.parse_args([flag, "16"]), dest) == value
    assert parser.parse_args(["--no_forward"]).no_forward
    assert parser.parse_args(["--no-forward"]).no_forward
    text = parser.format_help()
    assert underscore in text


def test_export_usage_names_the_op_library(tmp_path):
    usage = serving.usage(
        "runs/x/export", "serving_default",
        {"sentence": "strings"}, {"label": "int32"},
        'sentence=tf.constant(["a fine film ."])')
    assert "import tensorflow_text" in usage["python"]
    assert "tensorflow-text" in usage["readme"]
    assert usage["python"] in usage["readme"].replace(
        "```python\n", "").replace("\n```", "\n")
    path = serving.write_readme(str(tmp_path), usage)
    assert path == os.path.join(str(tmp_path), "assets", "README.md")
    with open(path, encoding="utf-8") as f:
        assert f.read() == usage["readme"]
    json.dumps(usage)  # goes into results.json
    # The Python example is valid code calling the named signature.
    compile(usage["python"], "usage", "exec")
    assert "signatures['serving_default'](sentence=" in usage["python"]


@pytest.mark.skipif(keras.backend.backend() != "tensorflow",
                    reason="recipes.glue.export imports TensorFlow")
def test_attention_picture_and_caption(tmp_path):
    from recipes.glue import export

    task = tasks.get_task("sst2")
    caption = export.example_caption(task, 1, np.array([[0.0, np.log(3.0)]]))
    assert caption == "true label: 1, predicted: 1 (p=0.75)"
    assert export.example_caption(task, 0, np.array([[0.0, np.log(3.0)]])) \
        == "true label: 0, predicted: 1 (p=0.75)"
    stsb = tasks.get_task("stsb")
    assert export.example_caption(stsb, 3.0, np.array([[2.5]])) == (
        "true score: 3.00, predicted: 2.50")

    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    saved = {}
    original = plt.Figure.savefig

    def spy(fig, *args, **kwargs):
        saved["figure"] = fig
        return original(fig, *args, **kwargs)

    scores = [np.full((2, 5, 5), 0.2), np.eye(5)[None].repeat(2, axis=0)]
    tokens = ["[CLS]", "a", "fine", "film", "[SEP]"]
    plt.Figure.savefig = spy
    try:
        path = export.plot_attention(str(tmp_path / "a.png"), scores, tokens,
                                     title="sst2: a fine film",
                                     caption=caption)
    finally:
        plt.Figure.savefig = original
    assert os.path.getsize(path) > 1000
    fig = saved["figure"]
    maps = [ax for ax in fig.axes if ax.get_images()]
    bars = [ax for ax in fig.axes if not ax.get_images()]
    assert len(maps) == 4 and len(bars) == 1  # 2 layers x 2 heads + scale
    assert bars[0].get_ylabel() == "attention weight"
    assert {ax.get_xlabel() for ax in maps} == {"key", ""}
    assert {ax.get_ylabel() for ax in maps} == {"query", ""}
    assert all(ax.get_images()[0].get_clim() == (0.0, 1.0) for ax in maps)
    assert fig._suptitle.get_text() == f"sst2: a fine film\n{caption}"


def test_synthesizer_options_checked_in_two_passes(capsys):
    import argparse

    from recipes.core import model_flags

    def namespace(**kwargs):
        base = {"synthesizer": "factorized_random+vanilla",
                "synthesizer_options": None, "factorized_rank": None}
        return argparse.Namespace(**dict(base, **kwargs))

    # Before TensorFlow: the JSON only; then, with Keras, the values.
    args = namespace(synthesizer_options='{"rank": -1}')
    args.synthesizer_options = model_flags.synthesizer_options(
        args, max_length=8, check_values=False)
    assert args.synthesizer_options == {"rank": -1}
    with pytest.raises(ValueError, match="Argument `--synthesizer_options`"):
        model_flags.synthesizer_options(args, max_length=8)
    # Release 0.1's --factorized_rank: folded in at once, one deprecation
    # line over both passes.
    args = namespace(factorized_rank=4)
    for check_values in (False, True):
        args.synthesizer_options = model_flags.synthesizer_options(
            args, max_length=8, check_values=check_values)
        assert args.synthesizer_options == {"factorized_random": {"rank": 4}}
    assert capsys.readouterr().err.count("--factorized_rank is deprecated") \
        == 1
    args = namespace(synthesizer="random", factorized_rank=4)  # ignored
    for check_values in (False, True):
        args.synthesizer_options = model_flags.synthesizer_options(
            args, max_length=8, check_values=check_values)
        assert args.synthesizer_options is None
    assert capsys.readouterr().err.count("--factorized_rank is deprecated") \
        == 1
