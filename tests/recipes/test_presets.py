"""`--preset` of recipes.glue and recipes.translate, before TensorFlow: the
preset decides the architecture flags, and a flag that contradicts it is an
error that names both values (every backend: pure Python)."""

import json

import pytest

from recipes.core import presets
from recipes.core.data_files import DataError
from recipes.glue import train as glue
from recipes.translate import train as translate

VOCAB = ["[PAD]", "[CLS]", "[SEP]", "[UNK]", "[MASK]", "the", "film", "."]


def write_preset(folder, backbone_class="SynthesizerBackbone", **config):
    folder.mkdir()
    backbone = {"vocabulary_size": len(VOCAB), "num_layers": 2,
                "num_heads": 2, "hidden_dim": 16, "intermediate_dim": 32,
                "synthesizer": "random+vanilla", "max_sequence_length": 64,
                "num_segments": 2, "pooling": "mean",
                "synthesizer_options": None}
    backbone.update(config)
    (folder / "config.json").write_text(json.dumps(
        {"class_name": backbone_class, "config": backbone}))
    (folder / "tokenizer.json").write_text(json.dumps(
        {"class_name": "SynthesizerTokenizer",
         "config": {"lowercase": True}}))
    (folder / "task.json").write_text(json.dumps(
        {"class_name": "SynthesizerMaskedLM", "config": {}}))
    assets = folder / "assets" / "tokenizer"
    assets.mkdir(parents=True)
    (assets / "vocabulary.txt").write_text("\n".join(VOCAB) + "\n")
    return str(folder)


def glue_args(*argv):
    args = glue.build_parser().parse_args(["--task=builtin", *argv])
    glue.validate_args(args, check_options=False)
    return args


def test_without_a_preset_the_defaults_hold():
    args = glue_args()
    assert (args.synthesizer, args.num_layers, args.hidden_dim,
            args.max_length, args.vocab_size, args.lowercase,
            args.pooling) == ("random+vanilla", 2, 128, 128, 8000, True,
                              "mean")
    assert glue_args("--hidden_dim=64").hidden_dim == 64


def test_the_preset_decides_the_architecture(tmp_path):
    path = write_preset(tmp_path / "p", synthesizer="dense", num_layers=3)
    args = glue_args(f"--preset={path}")
    assert (args.synthesizer, args.num_layers, args.hidden_dim,
            args.num_heads, args.intermediate_dim, args.max_length,
            args.vocab_size) == ("dense", 3, 16, 2, 32, 64, len(VOCAB))
    # Idempotent (the recipe validates twice); a shorter length is fine;
    # flags equal to the preset's are fine; pooling may be chosen.
    glue.validate_args(args, check_options=False)
    args = glue_args(f"--preset={path}", "--max_length=32",
                     "--hidden_dim=16", "--synthesizer=dense",
                     "--pooling=cls")
    assert (args.max_length, args.pooling) == (32, "cls")


@pytest.mark.parametrize("flag, message", [
    ("--hidden_dim=32", r"`--hidden_dim=32` contradicts the preset .*its "
                        r"hidden_dim is 16"),
    ("--num_layers=1", r"`--num_layers=1` contradicts .*num_layers is 2"),
    ("--synthesizer=vanilla", r"`--synthesizer=vanilla` contradicts .*"
                              r"random\+vanilla"),
    ("--vocab_size=100", r"`--vocab_size=100` contradicts .*vocab_size is 8"),
    ("--no_lowercase", r"`--no_lowercase` contradicts .*lowercase is True"),
    ("--synthesizer_options={\"rank\": 2}", r"`--synthesizer_options="),
    ("--max_length=65", r"`--max_length`=65 exceeds the preset .*"
                        r"max_sequence_length=64"),
    ("--vocab_file=v.txt", r"`--vocab_file`=v.txt: the preset .* brings its "
                           r"own vocabulary"),
])
def test_a_contradicting_flag_names_both_values(tmp_path, flag, message):
    path = write_preset(tmp_path / "p")
    with pytest.raises(ValueError, match=message):
        glue_args(f"--preset={path}", flag)


def test_pair_tasks_need_a_segment_embedding(tmp_path):
    path = write_preset(tmp_path / "p", num_segments=1)
    args = glue.build_parser().parse_args(["--task=mrpc", f"--preset={path}"])
    with pytest.raises(ValueError, match=r"mrpc packs 2 segments.*"
                       r"num_segments=1.*--num_segments=2"):
        glue.validate_args(args, check_options=False)


def test_presets_of_another_kind_or_broken_ones_are_refused(tmp_path):
    lm = write_preset(tmp_path / "lm", "SynthesizerCausalLMBackbone")
    with pytest.raises(DataError, match=r"holds a SynthesizerCausalLMBackbone"
                       r".*fine-tunes a SynthesizerBackbone"):
        glue_args(f"--preset={lm}")
    with pytest.raises(DataError, match="is not a folder"):
        glue_args(f"--preset={tmp_path / 'missing'}")
    empty = tmp_path / "empty"
    empty.mkdir()
    with pytest.raises(DataError, match=r"config.json; no such file"):
        glue_args(f"--preset={empty}")
    broken = write_preset(tmp_path / "broken")
    (tmp_path / "broken" / "config.json").write_text("{not json")
    with pytest.raises(DataError, match="not valid JSON"):
        glue_args(f"--preset={broken}")
    novocab = write_preset(tmp_path / "novocab")
    (tmp_path / "novocab" / presets.VOCABULARY_ASSET).unlink()
    with pytest.raises(DataError, match="vocabulary .* is missing"):
        glue_args(f"--preset={novocab}")


def translate_args(*argv):
    args = translate.build_parser().parse_args(
        ["--src=de", "--tgt=en", "--dataset=builtin", *argv])
    translate.validate_args(args, check_options=False)
    return args


def test_translation_fine_tunes_a_seq2seq_preset(tmp_path):
    path = write_preset(tmp_path / "s2s", "SynthesizerSeq2SeqBackbone",
                        cross_attention_synthesizer="vanilla",
                        normalize_first=False)
    args = translate_args(f"--preset={path}", "--max_length=32")
    assert (args.hidden_dim, args.num_layers, args.max_length,
            args.vocab_size, args.lowercase) == (16, 2, 32, len(VOCAB), True)
    with pytest.raises(ValueError, match=r"`--normalize_first` contradicts"):
        translate_args(f"--preset={path}", "--normalize_first")
    with pytest.raises(ValueError, match=r"--vocab=separate.*--vocab=shared"):
        translate_args(f"--preset={path}", "--vocab=separate")
    with pytest.raises(DataError, match=r"holds a SynthesizerBackbone"):
        translate_args(f"--preset={write_preset(tmp_path / 'enc')}")
    # Without a preset, the translation defaults.
    args = translate_args()
    assert (args.hidden_dim, args.max_length, args.lowercase) == (256, 64,
                                                                  False)
