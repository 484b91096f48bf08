"""`--mode context`: the longest sequence whose training step fits a budget.

Model: token embeddings, `--num_layers` causal decoder blocks and an output
projection over `--vocabulary_size` tokens, a cross-entropy loss and Adam,
batch `--batch_size`: `SynthesizerDecoder` blocks for every variant (their
feedforward over chunks of `--feedforward_chunk_size` tokens), keras-hub's
`TransformerDecoder` (MultiHeadAttention) as the reference `mha`.
For each row the length doubles from `--lengths` until the step's memory
exceeds `--memory_budget_gib` (or passes `--max_context`).

Memory is XLA's buffer assignment of the compiled JAX step (arguments +
outputs + temporaries, less aliased buffers; the parameters, their
gradients and Adam's two slots included). Nothing is allocated: the
variables are created inside a `keras.StatelessScope` (deferred, never
initialised) and the step is compiled from shapes alone, so lengths far
past the machine's memory can be probed. JAX only: TensorFlow's CPU
allocator keeps no peak statistics and its compiled HLO carries no buffer
assignment; PyTorch has no compiler here.
"""

import math

from recipes.benchmark import stats
from recipes.benchmark.flags import BASELINE
from recipes.benchmark.training_backends import xla_memory


def step_memory(row, args, length):
    """The memory of one training step at `length` (XLA's analysis):
    `{"peak_bytes", "temp_bytes", "parameter_bytes", "state_bytes"}`,
    `state_bytes` the parameters with their Adam slots (3x, gradients
    not counted)."""
    import jax
    import keras
    import keras_hub

    from keras_synth.layers import SynthesizerDecoder

    width, heads = args.hidden_dim, args.num_heads
    # (Its step counter is a tensor-valued variable, made outside the scope.)
    optimizer = keras.optimizers.Adam(1e-4)
    with keras.StatelessScope():
        embedding = keras.layers.Embedding(args.vocabulary_size, width)
        blocks = []
        for _ in range(args.num_layers):
            if row == BASELINE:
                block = keras_hub.layers.TransformerDecoder(4 * width, heads)
            else:
                block = SynthesizerDecoder(
                    4 * width, heads, synthesizer=row, max_length=length,
                    feedforward_chunk_size=args.feedforward_chunk_size or None)
            blocks.append(block)
        head = keras.layers.Dense(args.vocabulary_size)
        embedding.build((args.batch_size, length))
        for block in blocks:
            block.build((args.batch_size, length, width))
        head.build((args.batch_size, length, width))
        layers = [embedding, *blocks, head]
        trainable = [v for layer in layers for v in layer.trainable_variables]
        fixed = [v for layer in layers
                 for v in layer.non_trainable_variables]
        optimizer.build(trainable)
        slots = list(optimizer.variables)

    def loss_fn(tv, ntv, tokens, labels):
        mapping = list(zip(trainable, tv)) + list(zip(fixed, ntv))
        with keras.StatelessScope(state_mapping=mapping):
            x = embedding(tokens)
            for block in blocks:
                x = block(x, use_causal_mask=True, training=True)
            logits = head(x)
            loss = keras.losses.sparse_categorical_crossentropy(
                labels, logits, from_logits=True)
        return keras.ops.mean(loss)

    def train(tv, ntv, ov, tokens, labels):
        loss, grads = jax.value_and_grad(loss_fn)(tv, ntv, tokens, labels)
        tv, ov = optimizer.stateless_apply(ov, grads, tv)
        return loss, tv, ov

    def spec(variables):
        return [jax.ShapeDtypeStruct(tuple(v.shape), v.dtype)
                for v in variables]

    tokens = jax.ShapeDtypeStruct((args.batch_size, length), "int32")
    compiled = jax.jit(train, donate_argnums=(0, 2)).lower(
        spec(trainable), spec(fixed), spec(slots), tokens, tokens
    ).compile()
    out = xla_memory(compiled)
    parameters = sum(math.prod(v.shape) * 4 for v in trainable + fixed)
    out["parameter_bytes"] = parameters
    out["state_bytes"] = parameters + sum(
        math.prod(v.shape) * 4 for v in slots)
    out["largest_tensor_bytes"] = stats.largest_hlo_tensor(compiled.as_text())
    return out


def run_worker(args):
    """For every row, doubles the length until the step does not fit."""
    import keras

    backend = keras.backend.backend()
    if backend != "jax":
        raise SystemExit("--mode context measures XLA's buffer assignment "
                         f"on JAX; received the {backend} backend (pass "
                         "--backends jax)")
    budget = args.memory_budget_gib * 2**30
    rows = []
    for row in [BASELINE] + list(args.variants):
        probes = []
        length = args.lengths[0]
        while length <= args.max_context:
            memory = step_memory(row, args, length)
            fits = memory.get("peak_bytes", math.inf) <= budget
            probes.append({"length": length, "fits": fits, **memory})
            stats.log(
                f"context {row} T={length}: "
                f"{memory.get('peak_bytes', 0) / 2**30:.2f} GiB "
                f"(parameters+Adam {memory['state_bytes'] / 2**30:.2f} GiB)"
                f" {'fits' if fits else 'does not fit'}")
            if not fits:
                break
            length *= 2
        fitting = [p["length"] for p in probes if p["fits"]]
        failed = next((p for p in probes if not p["fits"]), None)
        rows.append({
            "row": row,
            "longest_length": max(fitting) if fitting else None,
            "probes": probes,
            # What stops the next length: the parameters (with their
            # gradients and Adam's two slots) when they are more than half
            # of its memory, else the activations.
            "limit": None if failed is None else (
                "parameters" if failed["state_bytes"]
                + failed["parameter_bytes"] > failed["peak_bytes"] / 2
                else "activations"),
        })
    return {"backend": backend, "keras_version": keras.__version__,
            "budget_bytes": budget, "rows": rows}
