"""`LengthPenaltyBeamSampler` against exhaustive search; `samplers.get`."""

import itertools
import math

import keras
import numpy as np
import pytest
from keras import ops

import keras_hub
from keras_synth import samplers
from keras_synth.samplers import LengthPenaltyBeamSampler
from keras_synth.samplers import length_penalty_factor

BACKEND = keras.backend.backend()
VOCAB, STOP, PROMPT_ID = 4, 0, 3


def _table(seed):
    """Log-probabilities of the next token given the last token and the
    position: a tiny model whose best sequence is not the greedy one."""
    rng = np.random.default_rng(seed)
    logits = 2.0 * rng.standard_normal((8, VOCAB, VOCAB)).astype("float32")
    return logits - np.log(np.exp(logits).sum(-1, keepdims=True))


def _next(table):
    def next(prompt, cache, index):
        last = ops.cast(prompt[:, index - 1], "int32")
        rows = ops.take(ops.convert_to_tensor(table), index - 1, axis=0)
        return ops.take(rows, last, axis=0), None, cache

    return next


def _exhaustive(table, prompt, max_length, alpha, stop):
    """The best completion of `prompt` by log p / GNMT penalty, over every
    sequence that ends with `stop` or fills `max_length`."""
    best, best_score = None, -math.inf
    free = max_length - len(prompt)
    for n in range(1, free + 1):
        for tokens in itertools.product(range(VOCAB), repeat=n):
            if stop is not None and STOP in tokens[:-1]:
                continue
            ends = stop is not None and tokens[-1] == STOP
            if n < free and not ends:
                continue
            sequence = list(prompt) + list(tokens)
            log_p = sum(
                table[i - 1, sequence[i - 1], sequence[i]]
                for i in range(len(prompt), len(sequence))
            )
            score = log_p / ((5.0 + n) / 6.0) ** alpha
            if score > best_score + 1e-6:
                best, best_score = sequence, score
    return best


def _run(sampler, table, prompts, max_length, stop):
    ids = np.zeros((len(prompts), max_length), "int32")
    mask = np.zeros((len(prompts), max_length), bool)
    for row, prompt in enumerate(prompts):
        ids[row, : len(prompt)] = prompt
        mask[row, : len(prompt)] = True
    out = sampler(
        _next(table),
        ops.convert_to_tensor(ids),
        index=int(mask.sum(-1).min()),
        mask=ops.convert_to_tensor(mask),
        stop_token_ids=None if stop is None else (stop,),
    )
    return ops.convert_to_numpy(out)


def _trimmed(row, prompt_length, stop):
    row = list(row)
    if stop is not None:
        for i in range(prompt_length, len(row)):
            if row[i] == stop:
                return row[: i + 1]
    return row


@pytest.mark.parametrize("alpha", [0.0, 0.6, 2.0])
@pytest.mark.parametrize("stop", [STOP, None])
@pytest.mark.parametrize("seed", [0, 1, 2])
def test_wide_beam_equals_exhaustive_search(alpha, stop, seed):
    # Prompts of different lengths; 27 beams hold every alive prefix of
    # three free tokens (V - 1 = 3 non-stop tokens per step), so the search
    # is exact.
    table = _table(seed)
    prompts = [[PROMPT_ID], [PROMPT_ID, 1], [PROMPT_ID, 2, 1]]
    max_length = 4
    sampler = LengthPenaltyBeamSampler(num_beams=27, length_penalty=alpha)
    out = _run(sampler, table, prompts, max_length, stop)
    for row, prompt in enumerate(prompts):
        expected = _exhaustive(table, prompt, max_length, alpha, stop)
        assert _trimmed(out[row], len(prompt), stop) == expected, (row, out)


def test_length_penalty_changes_the_choice():
    # A table where stopping at once is likelier than any longer sequence
    # but a long sequence wins with a large alpha.
    table = np.log(np.full((8, VOCAB, VOCAB), 1e-3, "float32"))
    table[:, :, STOP] = np.log(0.55)
    table[:, :, 1] = np.log(0.45 - 2e-3)
    results = {}
    for alpha in (0.0, 5.0):
        sampler = LengthPenaltyBeamSampler(num_beams=2, length_penalty=alpha)
        out = _run(sampler, table, [[PROMPT_ID]], 5, STOP)
        results[alpha] = _trimmed(out[0], 1, STOP)
    assert results[0.0] == [PROMPT_ID, STOP]
    assert results[5.0] == [PROMPT_ID, 1, 1, 1, STOP]
    for alpha, expected in results.items():
        assert expected == _exhaustive(table, [PROMPT_ID], 5, alpha, STOP)


def test_jit_compiled_equals_eager():
    table = _table(3)
    sampler = LengthPenaltyBeamSampler(num_beams=5, length_penalty=0.6)
    ids = np.zeros((2, 6), "int32")
    ids[:, 0] = PROMPT_ID
    mask = ids > 0

    def search(ids, mask):
        return sampler(_next(table), ids, index=1, mask=mask,
                       stop_token_ids=(STOP,))

    eager = ops.convert_to_numpy(search(ids, mask))
    if BACKEND == "tensorflow":
        import tensorflow as tf

        compiled = tf.function(search, jit_compile=True)(ids, mask)
    elif BACKEND == "jax":
        import jax

        compiled = jax.jit(search)(ids, mask)
    else:
        pytest.skip("jit_compile on TensorFlow and JAX; PyTorch runs eagerly")
    np.testing.assert_array_equal(ops.convert_to_numpy(compiled), eager)


def test_length_penalty_factor():
    np.testing.assert_allclose(
        ops.convert_to_numpy(length_penalty_factor(7, 0.6)),
        (12 / 6) ** 0.6, rtol=1e-6,
    )


def test_config_round_trip_and_errors():
    sampler = LengthPenaltyBeamSampler(num_beams=3, length_penalty=1.5,
                                       temperature=0.5)
    config = keras.saving.serialize_keras_object(sampler)
    restored = samplers.get(config)
    assert isinstance(restored, LengthPenaltyBeamSampler)
    assert restored.get_config() == sampler.get_config()
    with pytest.raises(ValueError, match="num_beams=0"):
        LengthPenaltyBeamSampler(num_beams=0)
    with pytest.raises(ValueError, match="length_penalty=-1"):
        LengthPenaltyBeamSampler(length_penalty=-1)


@pytest.mark.parametrize(
    "name, cls",
    [
        ("greedy", keras_hub.samplers.GreedySampler),
        ("top_k", keras_hub.samplers.TopKSampler),
        ("top_p", keras_hub.samplers.TopPSampler),
        ("beam", keras_hub.samplers.BeamSampler),
        ("random", keras_hub.samplers.RandomSampler),
        ("length_penalty_beam", LengthPenaltyBeamSampler),
    ],
)
def test_get_by_name(name, cls):
    assert isinstance(samplers.get(name), cls)


def test_get_instance_and_errors():
    sampler = keras_hub.samplers.TopKSampler(k=3)
    assert samplers.get(sampler) is sampler
    assert samplers.get(None) is None
    with pytest.raises(ValueError, match="sampler='nope'"):
        samplers.get("nope")


def test_a_stop_outside_the_best_extensions_does_not_finish():
    # The "2 * num_beams best extensions" rule binds: with one beam, only
    # the 2 best extensions of a step are candidates. At the first step the
    # stop token is the third likeliest (0.2 after 0.5 and 0.3), so `[3,
    # STOP]` is not finished although, scored on its own, it beats every
    # longer sequence (log 0.2 = -1.61 > log(0.5 * 0.34) = -1.77 with
    # alpha 0): exhaustive search, or a rule that lets every extension
    # finish, returns it. The rule keeps the search on `[3, 1, 1]`.
    table = np.log(np.full((8, VOCAB, VOCAB), 0.25, "float32"))
    table[0, PROMPT_ID] = np.log([0.2, 0.5, 0.3, 1e-6])
    table[1, 1] = np.log([0.01, 0.34, 0.33, 0.32])
    sampler = LengthPenaltyBeamSampler(num_beams=1, length_penalty=0.0)
    out = _run(sampler, table, [[PROMPT_ID]], 3, STOP)
    assert out[0].tolist() == [PROMPT_ID, 1, 1]
    # What the rule turns down: the best sequence by score alone.
    assert _exhaustive(table, [PROMPT_ID], 3, 0.0, STOP) == [PROMPT_ID, STOP]
