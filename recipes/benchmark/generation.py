"""`--mode generate`: tokens/s of greedy cached generation.

A decoder-only model (token and position embeddings, `--num_layers`
decoder blocks, an output projection): `SynthesizerDecoder` blocks for
every variant, and the same model with keras-hub's own `TransformerDecoder`
blocks (`CachedMultiHeadAttention`) as the reference, `hub` in the results.
The prompt (`--prompt_length` tokens) is written to the caches in one call,
then one token per step, greedy, to each total length of `--lengths`;
compiled (TensorFlow: XLA, JAX: jit; PyTorch runs eagerly). The rows
alternate inside every repetition, so the ratio to the reference is paired
(`stats.paired_ratio`). Per row: tokens/s (generated tokens of the whole
batch per second, the prompt's call included), the ratio to the
reference's tokens/s, the cache bytes stored per token and the mean cache
bytes a step reads (the prefix up to its position, in blocks of
`attention_cache.CACHE_BLOCK` rows when compiled).
"""

import math
import statistics
import time

from recipes.benchmark import stats

REFERENCE = "hub"


def make_model(row, args, total_length):
    """`(embedding, blocks, head, caches)`: the layers of one row, built,
    and a function returning its empty caches."""
    import keras
    import keras_hub

    from keras_synth.layers import SynthesizerDecoder

    width, heads = args.hidden_dim, args.num_heads
    embedding = keras_hub.layers.TokenAndPositionEmbedding(
        args.vocabulary_size, total_length, width, dtype=args.dtype
    )
    blocks = []
    for i in range(args.num_layers):
        if row == REFERENCE:
            block = keras_hub.layers.TransformerDecoder(
                4 * width, heads, dtype=args.dtype, name=f"block_{i}"
            )
        else:
            block = SynthesizerDecoder(
                4 * width, heads, synthesizer=row, max_length=total_length,
                dtype=args.dtype, name=f"block_{i}",
            )
        block.build((args.batch_size, total_length, width))
        blocks.append(block)
    head = keras.layers.Dense(args.vocabulary_size, dtype=args.dtype)
    embedding.build((args.batch_size, total_length))
    head.build((args.batch_size, width))

    def caches():
        out = []
        for block in blocks:
            if row == REFERENCE:
                shape = (args.batch_size, 2, total_length, heads,
                         width // heads)
                out.append(keras.ops.zeros(shape, dtype=block.compute_dtype))
            else:
                out.append(block.initial_cache(args.batch_size, total_length))
        return out

    return embedding, blocks, head, caches


def decode(model, tokens, caches, index):
    """One cached call: `tokens` written to the caches at `index`; returns
    the greedy next token of each sequence and the updated caches."""
    from keras import ops

    embedding, blocks, head, _ = model
    x = embedding(tokens, start_index=index)
    new = []
    for block, cache in zip(blocks, caches):
        x, cache = block(x, self_attention_cache=cache,
                         self_attention_cache_update_index=index)
        new.append(cache)
    next_token = ops.argmax(head(x[:, -1]), axis=-1)
    return ops.cast(next_token, "int32"), new


def greedy(model, prompt, total_length):
    """Greedy generation to `total_length` tokens (prompt included)."""
    from keras import ops

    initial_caches = model[3]
    batch, prompt_length = ops.shape(prompt)

    next_token, caches = decode(model, prompt, initial_caches(), 0)
    tokens = ops.zeros((batch, total_length), dtype="int32")
    tokens = ops.slice_update(tokens, (0, 0), prompt)
    tokens = ops.slice_update(tokens, (0, prompt_length), next_token[:, None])

    def step(index, state):
        tokens, caches = state
        current = ops.slice(tokens, (0, index), (batch, 1))
        next_token, caches = decode(model, current, caches, index)
        tokens = ops.slice_update(tokens, (0, index + 1), next_token[:, None])
        return tokens, caches

    tokens, _ = ops.fori_loop(prompt_length, total_length - 1, step,
                              (tokens, caches))
    return tokens


def compiled_generate(model, total_length):
    """`fn(prompt) -> tokens`, compiled for the backend of this process."""
    return compile_fn(model, lambda prompt: greedy(model, prompt,
                                                   total_length))


def compile_fn(model, fn):
    """`fn(*tensors)`, a function of the model's layers, compiled for the
    backend of this process (TensorFlow: XLA; JAX: jit, the weights passed
    as arguments; PyTorch: eager, without autograd); its calls return NumPy
    values once the computation has finished."""
    import keras
    from keras import tree

    backend = keras.backend.backend()
    if backend == "tensorflow":
        import tensorflow as tf

        compiled = tf.function(fn, jit_compile=True)
        return lambda *args: tree.map_structure(
            lambda t: t.numpy(), compiled(*args))
    if backend == "jax":
        import jax

        variables = [v for layer in _layers(model) for v in layer.variables]

        def stateless(values, *args):
            with keras.StatelessScope(
                state_mapping=list(zip(variables, values))
            ):
                return fn(*args)

        compiled = jax.jit(stateless)
        values = [v.value for v in variables]
        return lambda *args: jax.device_get(compiled(values, *args))
    import torch

    def eager(*args):
        with torch.no_grad():
            return tree.map_structure(lambda t: t.cpu().numpy(), fn(*args))

    return eager


def _layers(model):
    embedding, blocks, head, _ = model
    return [embedding, *blocks, head]


def cache_bytes_per_token(model, total_length):
    """Cache bytes stored per token position: all layers, the whole batch."""
    import keras

    stored = 0
    for cache in model[3]():
        dtype = keras.backend.standardize_dtype(cache.dtype)
        itemsize = {"bfloat16": 2, "float16": 2, "float64": 8}.get(dtype, 4)
        stored += math.prod(cache.shape) * itemsize
    return stored / total_length


def mean_rows_read(prompt_length, total_length, block, compiled, full):
    """Mean cache rows a decoding step reads, from the prompt's call to the
    last step: the whole cache (`full`), the prefix up to the step's
    position (eager), or that prefix rounded up to whole blocks (compiled)."""
    ends = [prompt_length] + list(range(prompt_length + 1, total_length))
    if full:
        return float(total_length)
    if compiled:
        ends = [min(total_length, block * math.ceil(e / block)) for e in ends]
    return statistics.fmean(ends)


def run_worker(args):
    """Times generation for every row and total length on this backend."""
    import keras
    import numpy as np

    from keras_synth.layers.attention import cache as attention_cache

    backend = keras.backend.backend()
    compiled = backend != "torch"
    rows = [REFERENCE] + list(args.variants)
    repetitions = args.repetitions or 3
    results = []
    for total_length in args.lengths:
        rng = np.random.default_rng(args.seed)
        prompt = rng.integers(
            0, args.vocabulary_size, (args.batch_size, args.prompt_length)
        ).astype("int32")
        prepared = []
        for row in rows:
            keras.utils.set_random_seed(args.seed)
            start = time.perf_counter()
            model = make_model(row, args, total_length)
            fn = compiled_generate(model, total_length)
            fn(prompt)  # compiles
            for _ in range(args.warmup):
                fn(prompt)
            per_token = cache_bytes_per_token(model, total_length)
            rows_read = mean_rows_read(
                args.prompt_length, total_length, attention_cache.CACHE_BLOCK,
                compiled, full=row == REFERENCE,
            )
            prepared.append({
                "row": row, "fn": fn, "times": [],
                "warm_s": time.perf_counter() - start,
                "cache_bytes_per_token": per_token,
                "cache_bytes_read_per_step": per_token * rows_read,
                "params": int(sum(
                    math.prod(v.shape) for layer in _layers(model)
                    for v in layer.weights
                )),
            })
        for _ in range(repetitions):
            for entry in prepared:
                start = time.perf_counter()
                entry["fn"](prompt)
                entry["times"].append(time.perf_counter() - start)
        generated = args.batch_size * (total_length - args.prompt_length)
        base = prepared[0]
        for entry in prepared:
            ms = [1e3 * t for t in entry["times"]]
            timing = {"median_ms": statistics.median(ms), "times_ms": ms}
            ref = {"median_ms": statistics.median(
                1e3 * t for t in base["times"]),
                "times_ms": [1e3 * t for t in base["times"]]}
            # Tokens/s is the inverse of time: its ratio is ref / row.
            ratio = stats.paired_ratio(ref, timing)
            results.append({
                "backend": backend,
                "row": entry["row"],
                "total_length": total_length,
                "prompt_length": args.prompt_length,
                "batch": args.batch_size,
                "generated_tokens": generated,
                "tokens_per_s": generated / (timing["median_ms"] / 1e3),
                "tokens_per_s_ratio": ratio["ratio_to_mha"],
                "tokens_per_s_ratio_p25": ratio.get("ratio_p25"),
                "tokens_per_s_ratio_p75": ratio.get("ratio_p75"),
                "median_ms": timing["median_ms"],
                "times_ms": ms,
                "warm_s": entry["warm_s"],
                "params": entry["params"],
                "cache_bytes_per_token": entry["cache_bytes_per_token"],
                "cache_bytes_read_per_step":
                    entry["cache_bytes_read_per_step"],
            })
        stats.log(
            f"{backend} generate to {total_length}: "
            + ", ".join(
                f"{r['row']} {r['tokens_per_s']:.0f} tok/s "
                f"({r['tokens_per_s_ratio']:.2f}x)"
                for r in results if r["total_length"] == total_length
            )
        )
    return {"backend": backend, "keras_version": keras.__version__,
            "rows": results}
