"""`LengthPenaltyBeamSampler`: beam search ranked with GNMT's length penalty."""

import keras
from keras import ops
from keras import tree

from keras_synth._hub import keras_hub

NEG_INF = -1.0e9


def length_penalty_factor(length, alpha):
    """GNMT's length penalty `((5 + length) / 6) ** alpha` (Wu et al., 2016)."""
    return ops.power((5.0 + ops.cast(length, "float32")) / 6.0, alpha)


@keras.saving.register_keras_serializable(package="keras_synth")
class LengthPenaltyBeamSampler(keras_hub.samplers.Sampler):
    """Beam search whose finished hypotheses are ranked with a length penalty.

    `num_beams` hypotheses stay alive. Each step scores every one-token
    extension of them by its log-probability; the best of the `2 *
    num_beams` best extensions that ends with a stop token is finished and
    scored `log p / ((5 + n) / 6) ** length_penalty`, `n` the number of
    generated tokens (stop token included), as in GNMT (Wu et al., 2016) and
    Tensor2Tensor; the best extensions without a stop token stay alive. A hypothesis
    that reaches the end of the sequence unfinished is scored the same way.
    The search stops once no alive hypothesis can beat the best finished one
    in any row, and returns the best-scoring hypothesis of each row.

    `length_penalty=0` ranks by log-probability alone; larger values favour
    longer outputs (keras-hub's `BeamSampler`, which ranks by log-probability
    only, tends to stop early on translation).

    Follows keras-hub's `Sampler` interface: pass it to `compile(sampler=...)`
    of any keras-hub or keras-synth generative task. Prompt tokens (where
    `mask` is true) are kept as they are and are not scored.

    Args:
        num_beams: int, the number of hypotheses kept alive. Defaults to 4.
        length_penalty: float >= 0, GNMT's alpha. Defaults to 0.6.
        temperature: float, the logits are divided by it. Defaults to 1.

    Call arguments:
        next, prompt, cache, index, mask, stop_token_ids, hidden_states,
        model: as keras-hub's `Sampler`.

    Returns:
        The `(batch, max_length)` token ids of the best hypothesis of each
        row; positions after its stop token keep the prompt's padding.

    Example:

    >>> import numpy as np
    >>> sampler = LengthPenaltyBeamSampler(num_beams=2, length_penalty=0.6)
    >>> table = np.log(np.array(
    ...     [[0.1, 0.5, 0.4], [0.6, 0.2, 0.2], [0.1, 0.1, 0.8]], "float32"))
    >>> def next(prompt, cache, index):  # logits from the last token only
    ...     last = prompt[:, index - 1]
    ...     return keras.ops.take(table, last, axis=0), None, cache
    >>> prompt = np.array([[2, 0, 0, 0]], "int32")
    >>> ids = sampler(next, prompt, index=1, stop_token_ids=(0,),
    ...               mask=np.array([[True, False, False, False]]))
    >>> keras.ops.convert_to_numpy(ids).tolist()
    [[2, 2, 2, 2]]
    """

    def __init__(self, num_beams=4, length_penalty=0.6, **kwargs):
        super().__init__(**kwargs)
        if not isinstance(num_beams, int) or num_beams < 1:
            raise ValueError(
                "Argument `num_beams` must be a positive int. Received: "
                f"num_beams={num_beams!r}"
            )
        if not isinstance(length_penalty, (int, float)) or length_penalty < 0:
            raise ValueError(
                "Argument `length_penalty` must be a float >= 0 (GNMT's "
                "alpha; the search's stopping rule needs it non-negative). "
                f"Received: length_penalty={length_penalty!r}"
            )
        self.num_beams = num_beams
        self.length_penalty = float(length_penalty)

    def __call__(
        self,
        next,
        prompt,
        cache=None,
        index=0,
        mask=None,
        stop_token_ids=None,
        hidden_states=None,
        model=None,
        **kwargs,
    ):
        k = self.num_beams
        alpha = self.length_penalty
        batch_size, max_length = ops.shape(prompt)[0], ops.shape(prompt)[1]
        index = ops.cast(index, "int32")
        prompt = ops.convert_to_tensor(prompt)
        if mask is None:
            mask = ops.zeros_like(prompt, dtype="bool")
        mask = ops.cast(mask, "bool")
        prompt_length = ops.sum(ops.cast(mask, "int32"), axis=-1)
        # Generated tokens of a hypothesis that reaches the end.
        full_penalty = length_penalty_factor(max_length - prompt_length, alpha)
        stop_ids = (
            None
            if stop_token_ids is None
            else ops.convert_to_tensor(list(stop_token_ids), "int32")
        )

        def repeat(x):
            return ops.repeat(x, k, axis=0)

        def unflatten(x):
            return ops.reshape(x, (-1, k) + tuple(ops.shape(x)[1:]))

        def flatten(x):
            return ops.reshape(x, (-1,) + tuple(ops.shape(x)[2:]))

        has_cache = cache is not None
        cache = tree.map_structure(repeat, cache) if has_cache else ()
        prompt = repeat(prompt)
        mask_flat = repeat(mask)
        # On the first step only the first beam is alive.
        alive = ops.broadcast_to(
            ops.convert_to_tensor([[0.0] + [NEG_INF] * (k - 1)], "float32"),
            (batch_size, k),
        )
        finished = ops.zeros((batch_size, max_length), prompt.dtype)
        finished_score = ops.full((batch_size,), 2 * NEG_INF, "float32")

        def cond(prompt, cache, index, alive, finished, finished_score):
            if stop_ids is None:
                return ops.convert_to_tensor(True)
            # An alive hypothesis only loses log-probability; with alpha >= 0
            # the best it can reach is its log p over the largest penalty.
            bound = ops.max(alive, axis=-1) / full_penalty
            return ops.any(ops.greater(bound, finished_score))

        def body(prompt, cache, index, alive, finished, finished_score):
            logits, _, cache = next(prompt, cache, index)
            vocab_size = ops.shape(logits)[-1]
            log_probs = ops.log_softmax(
                ops.cast(logits, "float32") / self.temperature, axis=-1
            )
            # Prompt tokens are forced and not scored.
            forced = mask_flat[:, index]
            current = ops.cast(prompt[:, index], "int32")
            is_current = ops.equal(
                ops.arange(0, vocab_size, dtype="int32")[None, :], current[:, None]
            )
            log_probs = ops.where(
                forced[:, None], ops.where(is_current, 0.0, NEG_INF), log_probs
            )
            scores = alive[..., None] + ops.reshape(log_probs, (-1, k, vocab_size))
            scores = ops.reshape(scores, (-1, k * vocab_size))
            tokens = ops.arange(k * vocab_size, dtype="int32") % vocab_size
            forced_row = ops.any(ops.reshape(forced, (-1, k)), axis=-1)
            if stop_ids is None:
                is_stop = ops.zeros_like(scores, dtype="bool")
            else:
                is_stop = ops.any(
                    ops.equal(tokens[:, None], stop_ids[None, :]), axis=-1
                )
                is_stop = ops.logical_and(
                    is_stop[None, :], ops.logical_not(forced_row)[:, None]
                )

            # As in Tensor2Tensor, the 2 * num_beams best extensions are the
            # candidates; the best of them ending with a stop token may
            # finish a row. (An unlikely stop, e.g. an empty output, is not
            # a candidate: a search that finishes every extension prefers
            # short outputs of a model that is unsure.)
            penalty = length_penalty_factor(index + 1 - prompt_length, alpha)
            num_candidates = 2 * k
            if isinstance(vocab_size, int):
                num_candidates = min(num_candidates, k * vocab_size)
            top_scores, top = ops.top_k(scores, k=num_candidates, sorted=True)
            top_is_stop = ops.take_along_axis(is_stop, top, axis=1)
            stop_scores = ops.where(
                top_is_stop, top_scores / penalty[:, None], 2 * NEG_INF
            )
            best_candidate = ops.argmax(stop_scores, axis=-1)
            best_score = ops.take_along_axis(
                stop_scores, best_candidate[:, None], axis=1
            )[:, 0]
            best = ops.take_along_axis(top, best_candidate[:, None], axis=1)[
                :, 0
            ]
            best_beam = ops.cast(best // vocab_size, "int32")
            candidate = ops.take_along_axis(
                unflatten(prompt), best_beam[:, None, None], axis=1
            )[:, 0]
            candidate = ops.slice_update(
                candidate,
                [0, index],
                ops.cast(ops.take(tokens, best), prompt.dtype)[:, None],
            )
            improved = ops.logical_and(
                ops.greater(best_score, finished_score),
                ops.greater(best_score, NEG_INF),
            )
            finished = ops.where(improved[:, None], candidate, finished)
            finished_score = ops.where(improved, best_score, finished_score)

            # The best other extensions stay alive.
            alive_scores = ops.where(is_stop, 2 * NEG_INF, scores)
            alive, chosen = ops.top_k(alive_scores, k=k, sorted=True)
            alive = ops.reshape(alive, (-1, k))
            chosen = ops.reshape(chosen, (-1, k))
            beams = chosen // vocab_size
            new_tokens = ops.cast(flatten(chosen % vocab_size), prompt.dtype)

            def gather(x):
                x = unflatten(x)
                indices = beams
                for axis in range(2, len(x.shape)):
                    indices = ops.expand_dims(indices, axis)
                return flatten(ops.take_along_axis(x, indices, axis=1))

            prompt = gather(prompt)
            if has_cache:
                cache = tree.map_structure(gather, cache)
            prompt = ops.slice_update(prompt, [0, index], new_tokens[:, None])
            return prompt, cache, index + 1, alive, finished, finished_score

        prompt, _, _, alive, finished, finished_score = self.run_loop(
            cond,
            body,
            loop_vars=(prompt, cache, index, alive, finished, finished_score),
            maximum_iterations=max_length - index,
            model=model,
        )
        # Alive hypotheses that reached the end compete with finished ones
        # (when the loop stopped early, no alive one can beat them).
        alive_best = ops.argmax(alive, axis=-1)
        alive_score = ops.max(alive, axis=-1) / full_penalty
        alive_sequence = ops.take_along_axis(
            unflatten(prompt), alive_best[:, None, None], axis=1
        )[:, 0]
        use_finished = ops.greater_equal(finished_score, alive_score)
        return ops.where(use_finished[:, None], finished, alive_sequence)

    def get_config(self):
        config = super().get_config()
        config.update(
            {"num_beams": self.num_beams, "length_penalty": self.length_penalty}
        )
        return config
