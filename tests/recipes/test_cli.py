"""The recipes' command lines: honest `--help`, "did you mean", input paths
checked before TensorFlow, quiet logs, the export's usage notes and the
attention picture. Pure Python except where marked (every backend)."""

import json
import os
import re
import subprocess
import sys

import keras
import numpy as np
import pytest

from keras_synth.layers import SynthesizerAttention
from recipes import benchmark, cli, serving
from recipes.glue import tasks
from recipes.glue import train as glue_train
from recipes.lm import train as lm_train
from recipes.translate import train as translate_train

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(
    os.path.abspath(__file__))))
PARSERS = {"glue": glue_train.build_parser,
           "lm": lm_train.build_parser,
           "translate": translate_train.build_parser}


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


@pytest.mark.parametrize("recipe", sorted(PARSERS))
def test_every_flag_has_help_and_no_misleading_default(recipe):
    parser = PARSERS[recipe]()
    text = help_text(PARSERS[recipe])
    assert "(default: None)" not in text
    for action in parser._actions:
        if not action.option_strings or action.help == "==SUPPRESS==":
            continue
        flag = action.option_strings[0]
        line = flag_help(text, flag)
        assert action.help, f"{recipe}: {flag} has no help"
        if action.required:
            assert line.endswith("(required)"), line
        elif action.nargs == 0:  # switches: no "(default: True)"
            assert "(default:" not in line, line
        elif action.default is not None:
            assert f"(default: {action.default})" in line, line


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


@pytest.mark.skipif(keras.backend.backend() != "tensorflow",
                    reason="the recipes run on the TensorFlow backend")
def test_a_fresh_recipe_process_prints_no_tensorflow_noise(tmp_path):
    # Fails in validation, after TensorFlow and Keras are imported: the
    # only line on stderr is the recipe's own error.
    env = dict(os.environ, KERAS_BACKEND="tensorflow")
    env.pop("TF_CPP_MIN_LOG_LEVEL", None)
    result = subprocess.run(
        [sys.executable, "-m", "recipes.glue", "--task=builtin",
         "--synthesizer=randon", f"--model_dir={tmp_path}"],
        cwd=ROOT, capture_output=True, text=True, timeout=300, env=env)
    assert result.returncode == 2
    assert result.stdout == ""
    assert result.stderr.splitlines() == [
        line for line in result.stderr.splitlines()
        if line.startswith("python -m recipes.glue: error:")], result.stderr
    assert "Did you mean 'random'?" in result.stderr


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
    required = {"glue": ["--task=builtin"],
                "translate": ["--src=de", "--tgt=en"], "lm": []}
    for recipe, build_parser in PARSERS.items():
        args = build_parser().parse_args(required[recipe] + ["--tf_logs"])
        assert args.tf_logs is True
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
    assert parser.get_default("backends") == ["tensorflow", "jax"]
    assert "default: tensorflow,jax" in " ".join(text.split())


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
