"""The language model of the recipe: `SynthesizerCausalLM` built, compiled
and fed; evaluation (every token once), generation and attention maps."""

import math
import time

import keras
import keras_hub
import numpy as np
import tensorflow as tf

from keras_synth.models import SynthesizerCausalLM
from keras_synth.models import SynthesizerCausalLMBackbone
from keras_synth.models import SynthesizerCausalLMPreprocessor
from recipes.core import flags
from recipes.core import training
from recipes.lm.data import SAMPLERS


def make_sampler(name, temperature=1.0, seed=None):
    """A keras-hub sampler from `--sampler` and `--temperature`."""
    if name == "greedy":
        return keras_hub.samplers.GreedySampler(temperature=temperature)
    if name == "top_k":
        return keras_hub.samplers.TopKSampler(k=10, seed=seed,
                                              temperature=temperature)
    if name == "top_p":
        return keras_hub.samplers.TopPSampler(p=0.9, seed=seed,
                                              temperature=temperature)
    if name == "random":
        return keras_hub.samplers.RandomSampler(seed=seed,
                                                temperature=temperature)
    raise ValueError(f"Argument `--sampler` must be one of {SAMPLERS}. "
                     f"Received: --sampler={name!r}")


def build_lm(tokenizer, args, stream):
    """The `SynthesizerCausalLM` with its preprocessor (a stream model gets
    no start/end tokens around prompts: it never saw them in training)."""
    preprocessor = SynthesizerCausalLMPreprocessor(
        tokenizer, sequence_length=args.sequence_length,
        add_start_token=not stream, add_end_token=not stream)
    backbone = SynthesizerCausalLMBackbone(
        vocabulary_size=tokenizer.vocabulary_size(),
        num_layers=args.num_layers, num_heads=args.num_heads,
        hidden_dim=args.hidden_dim,
        intermediate_dim=args.intermediate_dim or 4 * args.hidden_dim,
        max_sequence_length=args.sequence_length,
        synthesizer=args.synthesizer, dropout=args.dropout,
        synthesizer_options=args.synthesizer_options)
    return SynthesizerCausalLM(backbone, preprocessor)


def compile_lm(lm, args, total_steps, steps_per_execution=1):
    """The recipes' AdamW (`training.adamw`: the summed gradient clipped
    to a global norm of 1, no decay of biases and norms) with linear warmup
    and cosine decay; `steps_per_execution` training steps per call of the
    compiled step; the sampler for `generate`."""
    schedule = training.learning_rate_schedule(
        args.learning_rate, total_steps, args.warmup_fraction)
    # The gradient of the global batch is clipped (after the all-reduce):
    # the same training on any number of replicas.
    optimizer = training.adamw(schedule, args.weight_decay,
                               ema_momentum=args.ema_momentum, beta_1=0.9,
                               beta_2=0.99)
    lm.compile(
        optimizer=optimizer,
        loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True),
        # The loss divides by every label position, padding included; this
        # metric is the mean over the scored tokens (nats/token).
        weighted_metrics=[keras.metrics.SparseCategoricalCrossentropy(
            from_logits=True, name="token_loss")],
        jit_compile=flags.keras_jit_compile(args),
        steps_per_execution=steps_per_execution,
        sampler=make_sampler(args.sampler, args.temperature, args.seed))


def _features(windows, weights):
    inputs = windows[:, :-1]
    x = {"token_ids": inputs,
         "padding_mask": tf.cast(tf.not_equal(inputs, 0), "int32")}
    return x, windows[:, 1:], weights


def train_dataset(rows, batch_size, seed, epochs, initial_epoch,
                  steps_per_epoch, stream_length=None):
    """Batches for epochs `initial_epoch .. epochs - 1` (one stream).

    `rows` is either a token stream (with `stream_length`, the window
    length + 1: each epoch cuts it at an offset drawn from `(seed, epoch)`)
    or `(windows, weights)` of the sentence cut. Each epoch's order is a
    permutation drawn from `(seed, epoch)`, and an epoch is exactly
    `steps_per_epoch` batches, so a resumed run sees the batches an
    uninterrupted one sees.
    """
    if stream_length is not None:
        stream = tf.constant(rows, tf.int32)
        length = stream_length - 1

        def epoch_rows(epoch):
            offset = tf.random.stateless_uniform(
                [], [seed, epoch], maxval=length, dtype=tf.int32)
            count = (tf.size(stream) - offset - 1) // length
            starts = offset + length * tf.range(count)
            order = tf.argsort(tf.random.stateless_uniform(
                [count], [seed + 1, epoch]))
            starts = tf.gather(starts, order)
            # Every window is whole (`count` of them fit after `offset`):
            # its static length keeps the compiled step's shapes static
            # (XLA, TPUs, the layers' query-blocked path).
            return tf.data.Dataset.from_tensor_slices(starts).map(
                lambda s: (tf.ensure_shape(stream[s:s + stream_length],
                                           [stream_length]),
                           tf.ones([length], tf.float32)))
    else:
        windows = tf.constant(rows[0], tf.int32)
        weights = tf.constant(rows[1], tf.float32)

        def epoch_rows(epoch):
            order = tf.argsort(tf.random.stateless_uniform(
                [tf.shape(windows)[0]], [seed + 1, epoch]))
            return tf.data.Dataset.from_tensor_slices(
                (tf.gather(windows, order), tf.gather(weights, order)))

    epochs_ds = tf.data.Dataset.range(initial_epoch, epochs).map(
        lambda e: tf.cast(e, tf.int32))
    dataset = epochs_ds.flat_map(
        lambda e: epoch_rows(e).batch(batch_size, drop_remainder=True)
        .take(steps_per_epoch))
    return dataset.map(_features, num_parallel_calls=tf.data.AUTOTUNE
                       ).prefetch(tf.data.AUTOTUNE)


def eval_dataset(windows, weights, batch_size):
    return tf.data.Dataset.from_tensor_slices(
        (windows.astype("int32"), weights.astype("float32"))
    ).batch(batch_size).map(_features).prefetch(tf.data.AUTOTUNE)


def evaluate(lm, windows, weights, batch_size):
    """Sum of the token losses (nats) and the number of scored tokens.

    On TensorFlow a `tf.function` scores each batch; on JAX and PyTorch
    `predict_on_batch` (compiled on JAX) gives the logits, scored in
    float64 NumPy."""
    if keras.backend.backend() != "tensorflow":
        return _evaluate_in_numpy(lm, windows, weights, batch_size)

    @tf.function
    def step(x, y, w):
        logits = tf.cast(lm(x, training=False), tf.float32)
        loss = tf.nn.sparse_softmax_cross_entropy_with_logits(y, logits)
        return (tf.reduce_sum(tf.cast(loss * w, tf.float64)),
                tf.reduce_sum(tf.cast(w, tf.float64)))

    total, count = 0.0, 0.0
    for x, y, w in eval_dataset(windows, weights, batch_size):
        nats, n = step(x, y, w)
        total += float(nats)
        count += float(n)
    return total, int(round(count))


def _evaluate_in_numpy(lm, windows, weights, batch_size):
    total, count = 0.0, 0.0
    with training.without_preprocessor(lm):
        for x, y, w in eval_dataset(windows, weights,
                                    batch_size).as_numpy_iterator():
            logits = np.asarray(lm.predict_on_batch(x), np.float64)
            logits -= logits.max(axis=-1, keepdims=True)
            log_z = np.log(np.exp(logits).sum(axis=-1))
            picked = np.take_along_axis(logits, y[..., None], -1)[..., 0]
            total += float(((log_z - picked) * w).sum())
            count += float(w.sum())
    return total, int(round(count))


def summarize(total_nats, tokens, characters=None):
    """Mean loss (nats/token), perplexity and, given the characters the
    scored tokens spell, bits per character."""
    loss = total_nats / max(1, tokens)
    result = {"loss": loss, "perplexity": math.exp(min(loss, 700.0)),
              "tokens": tokens}
    if characters:
        result["bits_per_character"] = total_nats / math.log(2) / characters
        result["characters"] = characters
    return result


def generate(lm, prompts, max_new_tokens):
    """Samples from `prompts`; `(texts, stats)` with generation tokens/s
    (cached decoding, measured on a second call after compilation)."""
    tokenizer = lm.preprocessor.tokenizer
    lengths = [len(np.asarray(tokenizer(p))) for p in prompts]
    limit = lm.backbone.max_sequence_length
    wanted = (max(lengths) + max_new_tokens
              + int(lm.preprocessor.add_start_token))
    max_length = min(limit, wanted)
    lm.generate(prompts, max_length=max_length)  # compile
    start = time.perf_counter()
    texts = lm.generate(prompts, max_length=max_length)
    seconds = time.perf_counter() - start
    texts = [texts] if isinstance(texts, str) else list(texts)
    new = sum(max(0, len(np.asarray(tokenizer(t))) - n)
              for t, n in zip(texts, lengths))
    return texts, {"new_tokens": int(new), "seconds": seconds,
                   "tokens_per_second": new / seconds if seconds else None,
                   "max_length": max_length,
                   # Prompt and new tokens must fit the model's context.
                   "capped_by_context": wanted > limit}


def attention_scores(lm, token_ids):
    """Every block's self-attention probabilities for `token_ids`
    `(1, length)`: a list of `(num_heads, length, length)` arrays.

    Runs the backbone once in inference mode with each block's
    `self_attention` asked for its scores.
    """
    captured = []
    layers = [block.self_attention for block in lm.backbone.transformer_layers]
    originals = [layer.call for layer in layers]

    def capture(original):
        def call(*args, **kwargs):
            kwargs["return_attention_scores"] = True
            outputs, scores = original(*args, **kwargs)
            captured.append(keras.ops.convert_to_numpy(scores)[0])
            return outputs
        return call

    try:
        for layer, original in zip(layers, originals):
            layer.call = capture(original)
        ids = np.asarray(token_ids, "int32")
        lm.backbone({"token_ids": ids, "padding_mask": np.ones_like(ids)},
                    training=False)
    finally:
        for layer, original in zip(layers, originals):
            layer.call = original
    return captured


def plot_attention(scores, path, title, labels=None):
    """`attention.png`: one panel per layer and head, a shared colour
    scale, query positions down and key positions across."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    rows, cols = len(scores), scores[0].shape[0]
    fig, axes = plt.subplots(rows, cols, figsize=(2.6 * cols + 1, 2.6 * rows),
                             squeeze=False)
    vmax = max(float(s.max()) for s in scores)
    image = None
    for i, layer in enumerate(scores):
        for h in range(cols):
            ax = axes[i][h]
            image = ax.imshow(layer[h], cmap="viridis", vmin=0.0, vmax=vmax,
                              interpolation="nearest")
            ax.set_title(f"layer {i}, head {h}", fontsize=8)
            if i == rows - 1:
                ax.set_xlabel("key position", fontsize=7)
            if h == 0:
                ax.set_ylabel("query position", fontsize=7)
            ax.tick_params(labelsize=6)
    fig.colorbar(image, ax=axes, shrink=0.8, label="attention probability")
    fig.suptitle(title, fontsize=9)
    from recipes.core import storage

    storage.save_figure(fig, path, dpi=90)
    plt.close(fig)
    return path


__all__ = ["attention_scores", "build_lm", "compile_lm",
           "eval_dataset", "evaluate", "generate", "make_sampler",
           "plot_attention", "summarize", "train_dataset",
           "without_preprocessor"]

# (Shared with the pretraining recipe: `recipes.core.training`.)
without_preprocessor = training.without_preprocessor
