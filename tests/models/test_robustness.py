"""The bad-input table of docs/robustness.md, row by row (issue #29)."""

import os
import pathlib
import re
import sys
import warnings

import pytest

from tests.models import test_preset_errors as presets
from tests.models import test_truncation as truncation

ROOT = pathlib.Path(__file__).resolve().parents[2]
SECTION = "## Bad input to the Python API"


def table_rows():
    text = (ROOT / "docs" / "robustness.md").read_text(encoding="utf-8")
    text = text.split(SECTION, 1)[1].split("\n## ", 1)[0]
    rows = []
    for line in text.splitlines():
        if line.startswith("| ") and not line.startswith(("| Input", "| ---")):
            cells = [c.strip() for c in line.strip("|").split(" | ")]
            rows.append((cells[0], cells[1]))
    return rows


ROWS = table_rows()


def message_parts(message):
    """The documented message's `...`-separated parts, outer quotes off."""
    kind, _, text = message.strip("`").partition(": ")
    return kind, [p.strip(" `") for p in text.split("...") if p.strip(" `")]


def run_row(index, tmp_path):
    """Runs row `index` of the table; returns the exception or warning."""
    if index == 0:
        lm = truncation.causal_lm()
        return catch(lambda: lm.generate("abc abc"))
    if index == 1:
        from keras_synth.models import SynthesizerSeq2SeqBackbone
        from keras_synth.models import SynthesizerSeq2SeqLM
        from keras_synth.models import SynthesizerSeq2SeqLMPreprocessor

        tokenizer = truncation.char_tokenizer()
        backbone = SynthesizerSeq2SeqBackbone(
            vocabulary_size=tokenizer.vocabulary_size(), num_layers=1,
            num_heads=2, hidden_dim=16, intermediate_dim=16,
            max_sequence_length=8, synthesizer="random")
        lm = SynthesizerSeq2SeqLM(backbone, SynthesizerSeq2SeqLMPreprocessor(
            tokenizer, encoder_sequence_length=5, decoder_sequence_length=4))
        return catch(lambda: lm.generate(
            {"encoder_text": "ab", "decoder_text": "abc"}))
    if index in (2, 3):
        mode = "warn" if index == 2 else "error"
        preprocessor, long, _ = truncation.preprocessors(mode)["classifier"]
        return catch(lambda: preprocessor(long))
    if index == 4:
        from keras_synth.models import SynthesizerTextClassifierPreprocessor
        from keras_synth.models import SynthesizerTokenizer

        return catch(lambda: SynthesizerTextClassifierPreprocessor(
            SynthesizerTokenizer(truncation.VOCAB), truncation="cut"))
    if index in (5, 6):
        from keras_synth.models import SynthesizerCausalLM
        from keras_synth.models import SynthesizerTextClassifier

        preset = presets.classifier_preset.__wrapped__(
            PathFactory(tmp_path))
        if index == 6:
            return catch(lambda: SynthesizerCausalLM.from_preset(preset))
        weights = os.path.join(preset, "model.weights.h5")
        data = open(weights, "rb").read()
        open(weights, "wb").write(data[: len(data) // 2])
        return catch(lambda: SynthesizerTextClassifier.from_preset(preset))
    if index == 7:
        from keras_synth.models import load_export

        saved = sys.modules.get("tensorflow_text", "absent")
        sys.modules["tensorflow_text"] = None
        try:
            return catch(lambda: load_export(tmp_path))
        finally:
            if saved == "absent":
                del sys.modules["tensorflow_text"]
            else:
                sys.modules["tensorflow_text"] = saved
    raise AssertionError(f"row {index} of the table has no test case")


class PathFactory:
    def __init__(self, path):
        self.path = path

    def mktemp(self, name):
        path = self.path / name
        path.mkdir()
        return path


def catch(function):
    with warnings.catch_warnings(record=True) as record:
        warnings.simplefilter("always")
        try:
            function()
        except Exception as error:  # noqa: BLE001 (the row's error)
            return error
    for warning in record:
        if warning.category.__name__ == "TruncationWarning":
            return warning.message
    return None


def test_the_table_has_rows():
    assert len(ROWS) == 8


@pytest.mark.parametrize("index", range(len(ROWS)),
                         ids=[r[0][:40] for r in ROWS])
def test_row(index, tmp_path):
    _, message = ROWS[index]
    kind, parts = message_parts(message)
    raised = run_row(index, tmp_path)
    assert raised is not None, f"row {index}: nothing raised or warned"
    assert type(raised).__name__ == kind
    for part in parts:
        assert part in str(raised), (part, str(raised))
