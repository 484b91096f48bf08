"""Nothing cut silently: `truncation=` of the preprocessors, prompts that
leave no room to generate, and what the exports report (issue #29)."""

import warnings

import keras
import numpy as np
import pytest

from keras_synth.models import SynthesizerCausalLM
from keras_synth.models import SynthesizerCausalLMBackbone
from keras_synth.models import SynthesizerCausalLMPreprocessor
from keras_synth.models import SynthesizerCharTokenizer
from keras_synth.models import SynthesizerMaskedLMPreprocessor
from keras_synth.models import SynthesizerSeq2SeqBackbone
from keras_synth.models import SynthesizerSeq2SeqLM
from keras_synth.models import SynthesizerSeq2SeqLMPreprocessor
from keras_synth.models import SynthesizerTextClassifierPreprocessor
from keras_synth.models import SynthesizerTokenizer
from keras_synth.models import TruncationWarning

TEXTS = ["abc abc", "ab"]
VOCAB = ["[PAD]", "[CLS]", "[SEP]", "[UNK]", "[MASK]", "the", "plot", "is",
         "dull", "."]


def char_tokenizer():
    return SynthesizerCharTokenizer(
        SynthesizerCharTokenizer.learn_vocabulary(TEXTS)
    )


def preprocessors(truncation):
    """Each preprocessor, the input it cuts, and the input it keeps."""
    char = char_tokenizer()
    word = SynthesizerTokenizer(VOCAB)
    long, short = ["the plot is dull ."], ["the plot"]
    return {
        # [CLS] + 7 + [SEP] = 9 > 8 (the causal LM packs 8 + 1).
        "causal_lm": (
            SynthesizerCausalLMPreprocessor(
                char, sequence_length=7, truncation=truncation),
            ["abc abc"], ["abc"],
        ),
        "classifier": (
            SynthesizerTextClassifierPreprocessor(
                word, sequence_length=5, truncation=truncation),
            long, short,
        ),
        "classifier_pair": (
            SynthesizerTextClassifierPreprocessor(
                word, sequence_length=6, truncation=truncation),
            (short, short), (["the"], ["plot"]),
        ),
        "masked_lm": (
            SynthesizerMaskedLMPreprocessor(
                word, sequence_length=5, truncation=truncation),
            long, short,
        ),
        "seq2seq_source": (
            SynthesizerSeq2SeqLMPreprocessor(
                char, encoder_sequence_length=5, decoder_sequence_length=8,
                truncation=truncation),
            {"encoder_text": ["abc abc"], "decoder_text": ["ab"]},
            {"encoder_text": ["abc"], "decoder_text": ["ab"]},
        ),
        "seq2seq_target": (
            SynthesizerSeq2SeqLMPreprocessor(
                char, encoder_sequence_length=8, decoder_sequence_length=4,
                truncation=truncation),
            {"encoder_text": ["ab"], "decoder_text": ["abc abc"]},
            {"encoder_text": ["ab"], "decoder_text": ["ab"]},
        ),
    }


def call(preprocessor, x):
    if isinstance(x, tuple):
        return preprocessor(x=x)
    return preprocessor(x)


NAMES = sorted(preprocessors("warn"))


@pytest.mark.parametrize("name", NAMES)
def test_warn_is_the_default_and_counts(name):
    preprocessor, long, short = preprocessors("warn")[name]
    assert preprocessor.get_config()["truncation"] == "warn"
    with warnings.catch_warnings():
        warnings.simplefilter("error", TruncationWarning)
        call(preprocessor, short)  # fits: no warning
    with pytest.warns(TruncationWarning, match=r"1 of 1 .* were longer"):
        call(preprocessor, long)


@pytest.mark.parametrize("name", NAMES)
def test_error_raises_and_allow_is_silent(name):
    preprocessor, long, short = preprocessors("error")[name]
    call(preprocessor, short)
    with pytest.raises(ValueError, match="truncation="):
        call(preprocessor, long)
    preprocessor, long, _ = preprocessors("allow")[name]
    with warnings.catch_warnings():
        warnings.simplefilter("error", TruncationWarning)
        call(preprocessor, long)


def test_message_names_lengths_and_sequence_length():
    preprocessor, _, _ = preprocessors("warn")["classifier"]
    with pytest.warns(TruncationWarning) as record:
        preprocessor(["the plot is dull .", "the", "the plot is dull . ."])
    message = str(record[0].message)
    assert message.startswith("2 of 3 inputs were longer than "
                              "`sequence_length`=5 tokens")
    assert "lengths with the special tokens: 7, 8" in message


def test_unknown_mode_and_old_configs():
    with pytest.raises(ValueError, match="Argument `truncation`.*'cut'"):
        SynthesizerTextClassifierPreprocessor(
            SynthesizerTokenizer(VOCAB), truncation="cut")
    preprocessor = SynthesizerTextClassifierPreprocessor(
        SynthesizerTokenizer(VOCAB), sequence_length=5, truncation="allow")
    config = keras.layers.serialize(preprocessor)
    assert config["config"]["truncation"] == "allow"
    del config["config"]["truncation"]  # a config of release 0.1.0
    assert keras.layers.deserialize(config).truncation == "warn"


def test_warn_in_tf_data_counts_each_batch():
    import tensorflow as tf

    preprocessor, long, short = preprocessors("warn")["classifier"]
    ds = tf.data.Dataset.from_tensor_slices(long * 2 + short * 2).batch(2)
    with pytest.warns(TruncationWarning, match="2 of 2") as record:
        list(ds.map(preprocessor))
    assert len([r for r in record
                if r.category is TruncationWarning]) == 1
    preprocessor, _, _ = preprocessors("error")["classifier"]
    with pytest.raises(tf.errors.InvalidArgumentError,
                       match="longer than `sequence_length`=5"):
        list(ds.map(preprocessor))


def causal_lm():
    tokenizer = char_tokenizer()
    backbone = SynthesizerCausalLMBackbone(
        vocabulary_size=tokenizer.vocabulary_size(), num_layers=1,
        num_heads=2, hidden_dim=16, intermediate_dim=16,
        max_sequence_length=8, synthesizer="random")
    return SynthesizerCausalLM(
        backbone, SynthesizerCausalLMPreprocessor(tokenizer, 8))


def test_causal_lm_prompt_without_room_raises():
    lm = causal_lm()
    # [CLS] + 7 = 8 tokens fill the context of 8: nothing to generate.
    with pytest.raises(ValueError, match=(
            r"no room to generate: the context is 8 tokens \(`max_length`"
            r".*Received: prompt length\(s\) \[8\]")):
        lm.generate("abc abc")
    with pytest.raises(ValueError, match=r"context is 4 tokens"):
        lm.generate("abc", max_length=4)
    out = lm.generate("abc abc"[:6])  # 7 tokens: room for one
    assert out.startswith("abc ab")


def test_seq2seq_generate_reports_source_and_refuses_full_prompt():
    tokenizer = char_tokenizer()
    backbone = SynthesizerSeq2SeqBackbone(
        vocabulary_size=tokenizer.vocabulary_size(), num_layers=1,
        num_heads=2, hidden_dim=16, intermediate_dim=16,
        max_sequence_length=8, synthesizer="random")
    lm = SynthesizerSeq2SeqLM(backbone, SynthesizerSeq2SeqLMPreprocessor(
        tokenizer, encoder_sequence_length=5, decoder_sequence_length=4))
    with pytest.warns(TruncationWarning,
                      match="1 of 1 sources .*`encoder_sequence_length`=5"):
        lm.generate("abc abc")
    with pytest.raises(ValueError, match=(
            r"target prompt leaves no room.*context is 4 tokens.*"
            r"`decoder_sequence_length`")):
        lm.generate({"encoder_text": "ab", "decoder_text": "abc"})
    with warnings.catch_warnings():
        warnings.simplefilter("error", TruncationWarning)
        assert isinstance(lm.generate("ab"), str)


requires_tf = pytest.mark.skipif(
    keras.backend.backend() != "tensorflow", reason="TensorFlow SavedModel")


@requires_tf
@pytest.mark.parametrize("truncation", ["warn", "error"])
def test_classifier_export_reports_truncated(tmp_path, truncation):
    import tensorflow as tf

    from keras_synth.models import SynthesizerBackbone
    from keras_synth.models import SynthesizerTextClassifier
    from keras_synth.models import export_text_classifier
    from keras_synth.models import load_export

    preprocessor, _, _ = preprocessors(truncation)["classifier"]
    backbone = SynthesizerBackbone(
        vocabulary_size=len(VOCAB), num_layers=1, num_heads=2, hidden_dim=16,
        intermediate_dim=16, max_sequence_length=5, synthesizer="random")
    classifier = SynthesizerTextClassifier(backbone, 2, preprocessor)
    with warnings.catch_warnings():
        warnings.simplefilter("error", TruncationWarning)
        path = export_text_classifier(classifier, str(tmp_path / "export"))
    loaded = load_export(path)  # (kept: the functions use its variables)
    serve = loaded.signatures["serving_default"]
    texts = tf.constant(["the plot is dull .", "the plot", "the plot is"])
    if truncation == "error":
        with pytest.raises(tf.errors.InvalidArgumentError,
                           match="longer than `sequence_length`=5"):
            serve(sentence=texts)
        return
    out = serve(sentence=texts)
    # [CLS] + 5 + [SEP] = 7 and [CLS] + 3 + [SEP] = 5 <= 5.
    assert out["truncated"].numpy().tolist() == [True, False, False]


@requires_tf
def test_causal_lm_export_refuses_full_prompt(tmp_path):
    import tensorflow as tf

    from keras_synth.models import export_generator
    from keras_synth.models import load_export

    lm = causal_lm()
    path = export_generator(lm, str(tmp_path / "export"))
    loaded = load_export(path)  # (kept: the functions use its variables)
    generate = loaded.generate
    out = generate(tf.constant(["abc", "ab"]))
    assert out["prompt_truncated"].numpy().tolist() == [False, False]
    with pytest.raises(tf.errors.InvalidArgumentError,
                       match="no room to generate: the context is 8"):
        generate(tf.constant(["abc abc", "ab"]))


def test_load_export_without_tensorflow_text(monkeypatch, tmp_path):
    import sys

    from keras_synth.models import load_export

    monkeypatch.setitem(sys.modules, "tensorflow_text", None)
    with pytest.raises(ImportError, match="pip install tensorflow-text"):
        load_export(tmp_path)
