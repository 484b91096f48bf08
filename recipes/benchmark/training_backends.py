"""The training benchmark's rows and backends: a layer, its data, and its
compiled training step and forward pass on TensorFlow (XLA), JAX (jit) and
PyTorch (eager, and `torch.compile` with `--torch_compile`).

PyTorch runs asynchronously on a GPU: its inputs are made on the device of
the layer's weights (`torch_device`), and every timed call, the matmul
baseline's too, ends with `torch.cuda.synchronize` there (`synchronize`),
so that a time is the time the GPU took, not the time to queue its work.
"""

import math
import time

from recipes.benchmark import flags
from recipes.benchmark import stats
from recipes.benchmark.flags import BASELINE
from recipes.benchmark.flags import REFERENCES


class Row:
    """One timed configuration: a layer, its data and compiled functions."""

    def __init__(self, name, layer, batch, length, width, mask, seed):
        import numpy as np

        self.name = name
        self.layer = layer
        rng = np.random.default_rng(seed)
        self.x = rng.standard_normal((batch, length, width)).astype("float32")
        self.y = rng.standard_normal((batch, length, width)).astype("float32")
        self.mask_kind = mask
        self.value_mask = None
        if mask == "padding":
            lengths = rng.integers(length // 2, length + 1, size=batch)
            lengths[0] = length
            self.value_mask = np.arange(length)[None, :] < lengths[:, None]
        self.causal = mask == "causal"
        self.times = {"train": [], "forward": []}
        self.memory = {}
        # The torch.device the row computes on (PyTorch only): timed calls
        # synchronize it.
        self.device = None

    def call(self, x, value_mask, training=None):
        kwargs = {}
        if value_mask is not None:
            kwargs["value_mask"] = value_mask
        if self.causal:
            kwargs["use_causal_mask"] = True
        return self.layer(x, x, training=training, **kwargs)


def make_layer(name, heads, width, length, dtype, args=None):
    """The layer of row `name`: MultiHeadAttention (`BASELINE`), a
    reference layer (`flags.REFERENCES`, `references`), else a
    SynthesizerAttention of that variant. `args` (the parsed flags) gives
    `--synthesizer_options` (the row's share of them) and the references'
    `--linformer_k`."""
    import keras

    from keras_synth.layers import SynthesizerAttention
    from keras_synth.layers.synthesizers import select_options
    from keras_synth.layers.synthesizers import variants_of

    key_dim = width // heads
    if name == BASELINE:
        return keras.layers.MultiHeadAttention(
            num_heads=heads, key_dim=key_dim, dtype=dtype, name="mha"
        )
    if name in REFERENCES:
        from recipes.benchmark import references

        variant = {"lightconv": "light_conv",
                   "dynamicconv": "dynamic_conv"}.get(name)
        kernel_size, padding = (flags.conv_options(args, variant)
                                if args is not None and variant
                                else (3, "centered"))
        return references.make_reference(
            name, heads, key_dim, length, kernel_size=kernel_size,
            padding=padding,
            projected_length=getattr(args, "linformer_k", 256), dtype=dtype)
    options = getattr(args, "synthesizer_options", None)
    return SynthesizerAttention(
        num_heads=heads, key_dim=key_dim, synthesizer=name, max_length=length,
        synthesizer_options=select_options(variants_of([name]), options),
        dtype=dtype, name=name.replace("+", "_"),
    )


class Backend:
    """Compiles and runs training steps and forward passes of `Row`s."""

    def __init__(self, name=None):
        import keras

        # "torch_compile": PyTorch with torch.compile'd steps.
        self.name = name or keras.backend.backend()

    # Each method below is specialised by backend.
    def prepare(self, row, forward):
        getattr(self, f"_prepare_{self.name}")(row, forward)

    def memory(self, row):
        fn = getattr(self, f"_memory_{self.name}", None)
        return fn(row) if fn else {}

    def run(self, row, kind):
        """Seconds one call of `row.fns[kind]` takes, its device's queued
        work done before and after (PyTorch on CUDA; the other backends'
        functions return once their results are ready)."""
        synchronize(row.device)
        start = time.perf_counter()
        row.fns[kind]()
        synchronize(row.device)
        return time.perf_counter() - start

    def matmul_gflops(self, n=1024, repetitions=5):
        """GFLOP/s of an `n x n` float32 matrix product on the device the
        rows run on (each call returns once the product is done)."""
        fn = getattr(self, f"_matmul_{self.name}")(n)
        seconds = stats.median_seconds(fn, repetitions, warmup=2)
        return 2 * n**3 / seconds / 1e9

    # ---------------------------------------------------------- tensorflow

    def _prepare_tensorflow(self, row, forward):
        import tensorflow as tf

        layer = row.layer
        x, y, mask, optimizer = _inputs_and_optimizer(row, tf.constant)

        def train(x, y, mask):
            with tf.GradientTape() as tape:
                out = row.call(x, mask, training=True)
                loss = tf.reduce_mean(tf.square(tf.cast(out, "float32") - y))
            grads = tape.gradient(loss, layer.trainable_variables)
            optimizer.apply(grads, layer.trainable_variables)
            return loss

        def fwd(x, mask):
            return row.call(x, mask, training=False)

        train_fn = tf.function(train, jit_compile=True)
        fwd_fn = tf.function(fwd, jit_compile=True)
        _set_timed_functions(
            row,
            lambda: train_fn(x, y, mask).numpy(),
            lambda: fwd_fn(x, mask).numpy(),
            forward,
        )
        row._tf = (train_fn, x, y, mask)

    def _memory_tensorflow(self, row):
        train_fn, x, y, mask = row._tf
        hlo = train_fn.experimental_get_compiler_ir(x, y, mask)(
            stage="optimized_hlo"
        )
        return {"largest_tensor_bytes": stats.largest_hlo_tensor(hlo)}

    def _matmul_tensorflow(self, n):
        import tensorflow as tf

        a = tf.random.normal((n, n))
        b = tf.random.normal((n, n))
        fn = tf.function(lambda a, b: tf.matmul(a, b), jit_compile=True)
        return lambda: fn(a, b).numpy()

    # ----------------------------------------------------------------- jax

    def _prepare_jax(self, row, forward):
        import jax
        import jax.numpy as jnp

        layer = row.layer
        x, y, mask, optimizer = _inputs_and_optimizer(row, jnp.asarray)
        kwargs = {}
        if mask is not None:
            kwargs["value_mask"] = mask
        if row.causal:
            kwargs["use_causal_mask"] = True

        def loss_fn(tv, ntv, x, y, mask):
            kw = dict(kwargs)
            if mask is not None:
                kw["value_mask"] = mask
            out, ntv = layer.stateless_call(tv, ntv, x, x, training=True,
                                            **kw)
            loss = jnp.mean(jnp.square(out.astype("float32") - y))
            return loss, ntv

        grad_fn = jax.value_and_grad(loss_fn, has_aux=True)

        def train(tv, ntv, ov, x, y, mask):
            (loss, ntv), grads = grad_fn(tv, ntv, x, y, mask)
            tv, ov = optimizer.stateless_apply(ov, grads, tv)
            return loss, tv, ntv, ov

        def fwd(tv, ntv, x, mask):
            kw = dict(kwargs)
            if mask is not None:
                kw["value_mask"] = mask
            out, _ = layer.stateless_call(tv, ntv, x, x, training=False, **kw)
            return out

        state = {
            "tv": [v.value for v in layer.trainable_variables],
            "ntv": [v.value for v in layer.non_trainable_variables],
            "ov": [v.value for v in optimizer.variables],
        }
        train_fn = jax.jit(train, donate_argnums=(0, 2))
        fwd_fn = jax.jit(fwd)

        def run_train():
            loss, state["tv"], state["ntv"], state["ov"] = train_fn(
                state["tv"], state["ntv"], state["ov"], x, y, mask
            )
            loss.block_until_ready()

        def run_fwd():
            fwd_fn(state["tv"], state["ntv"], x, mask).block_until_ready()

        _set_timed_functions(row, run_train, run_fwd, forward)
        row._jax = (train_fn, state, x, y, mask)

    def _memory_jax(self, row):
        train_fn, state, x, y, mask = row._jax
        compiled = train_fn.lower(
            state["tv"], state["ntv"], state["ov"], x, y, mask
        ).compile()
        out = {"largest_tensor_bytes":
               stats.largest_hlo_tensor(compiled.as_text())}
        out.update(xla_memory(compiled))
        return out

    def _matmul_jax(self, n):
        import jax
        import jax.numpy as jnp

        a = jax.random.normal(jax.random.PRNGKey(0), (n, n))
        b = jax.random.normal(jax.random.PRNGKey(1), (n, n))
        fn = jax.jit(jnp.matmul)
        return lambda: fn(a, b).block_until_ready()

    # --------------------------------------------------------------- torch

    def _prepare_torch_compile(self, row, forward):
        self._prepare_torch(row, forward, compile=True)

    def _prepare_torch(self, row, forward, compile=False):
        import torch

        row.layer(row.x[:1], row.x[:1])  # build: its weights' device
        row.device = torch_device(row.layer.weights)
        x, y, mask, optimizer = _inputs_and_optimizer(
            row, lambda a: torch.as_tensor(a, device=row.device))
        row._torch = (x, y, mask)
        variables = row.layer.trainable_variables

        def train_loss(x, y, mask):
            out = row.call(x, mask, training=True)
            return torch.mean(torch.square(out.float() - y))

        def forward_pass(x, mask):
            return row.call(x, mask, training=False)

        if compile:
            train_loss = torch.compile(train_loss)
            forward_pass = torch.compile(forward_pass)

        def run_train():
            loss = train_loss(x, y, mask)
            for v in variables:
                v.value.grad = None
            loss.backward()
            grads = [v.value.grad for v in variables]
            with torch.no_grad():
                optimizer.apply(grads, variables)

        def run_fwd():
            with torch.no_grad():
                forward_pass(x, mask)

        _set_timed_functions(row, run_train, run_fwd, forward)

    def _matmul_torch_compile(self, n):
        return self._matmul_torch(n)

    def _matmul_torch(self, n):
        import torch

        device = torch_device()
        a = torch.randn(n, n, device=device)
        b = torch.randn(n, n, device=device)

        def product():
            out = torch.matmul(a, b)
            synchronize(device)
            return out

        return product


def torch_device(variables=()):
    """The `torch.device` of the first of `variables` (a built layer's
    weights), else Keras' default PyTorch device (CUDA when there is a GPU,
    as Keras places new weights)."""
    import torch

    for variable in variables:
        return getattr(variable, "value", variable).device
    from keras.src.backend.torch.core import get_device

    return torch.device(get_device())


def synchronize(device):
    """Waits for the work queued on `device` when it is a CUDA device
    (`torch.cuda.synchronize`); nothing for None or another device."""
    if device is None:
        return
    import torch

    device = torch.device(device)
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def _inputs_and_optimizer(row, convert):
    """The row's `x`, `y` and mask as backend tensors (`convert`), after
    building its layer, and an Adam optimizer built for the layer."""
    import keras

    x = convert(row.x)
    y = convert(row.y)
    mask = None if row.value_mask is None else convert(row.value_mask)
    row.layer(x, x)  # build
    optimizer = keras.optimizers.Adam(1e-4)
    optimizer.build(row.layer.trainable_variables)
    return x, y, mask, optimizer


def _set_timed_functions(row, run_train, run_forward, forward):
    """`row.fns` (the forward pass only with `forward`) and `row.params`."""
    row.fns = {"train": run_train}
    if forward:
        row.fns["forward"] = run_forward
    row.params = int(sum(math.prod(v.shape) for v in row.layer.weights))


def xla_memory(compiled):
    """`peak_bytes` (arguments + outputs + temporaries, less aliased
    buffers) and `temp_bytes` of a compiled JAX function, from XLA's buffer
    assignment; `{}` where the backend gives no analysis."""
    analysis = compiled.memory_analysis()
    if analysis is None:
        return {}
    return {
        "peak_bytes": int(
            analysis.argument_size_in_bytes + analysis.output_size_in_bytes
            + analysis.temp_size_in_bytes - analysis.alias_size_in_bytes
        ),
        "temp_bytes": int(analysis.temp_size_in_bytes),
    }
