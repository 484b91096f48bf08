"""Shared pytest configuration.

Hypothesis budget: property-based tests run a small, fixed (derandomized)
number of examples by default so that the suite stays fast on every backend.
Set `KERAS_SYNTH_HYPOTHESIS_EXAMPLES=N` (any positive integer) to run N
new random examples per property test instead. The long search of
docs/robustness.md (4 property tests x 2500 = 10,000 cases, not run in CI):

    KERAS_SYNTH_HYPOTHESIS_EXAMPLES=2500 KERAS_BACKEND=tensorflow \
        python -m pytest -q tests/layers/test_synthesizer_attention_properties.py \
        --hypothesis-show-statistics

Precision: the tests compare float32 results with tolerances down to
1e-5, which hold for true float32 products. NVIDIA GPUs from Ampere on
run float32 matrix products in TensorFloat-32 by default (about 1e-3
relative), so the suite turns TF32 off at start on the backend it runs
on (TensorFlow: `enable_tensor_float_32_execution(False)`; JAX:
`jax_default_matmul_precision="highest"`; PyTorch: `allow_tf32 = False`
for matmuls and cuDNN). The recipes (and their tests) run on every
backend (tests/recipes/test_harness.py). On a CPU this changes
nothing. See
docs/devices.md.
"""

import os
import tempfile

import pytest
from hypothesis import HealthCheck, settings


def _share_jax_compilations():
    """JAX's persistent compilation cache, shared by the test processes
    and the recipe runs they start (they inherit the environment).

    A recipe test on JAX starts the same command two or three times (run,
    killed, resumed); each compiled the same training step anew, half of
    a tiny run's time. With the cache the later runs load it (a tiny GLUE
    run: 28 s, then 14 s; the same losses, digit for digit: the cache
    holds the very executable). Unset by the user only: a
    `JAX_COMPILATION_CACHE_DIR` already set is kept.
    """
    if "JAX_COMPILATION_CACHE_DIR" in os.environ:
        return
    os.environ["JAX_COMPILATION_CACHE_DIR"] = os.path.join(
        tempfile.gettempdir(), f"keras-synth-tests-jax-cache-{os.getuid()}")
    os.environ.setdefault("JAX_PERSISTENT_CACHE_MIN_COMPILE_TIME_SECS", "0")


_share_jax_compilations()


def _fast_xla_compilations():
    """XLA's quickest CPU code generation, for the test processes and the
    recipe runs they start.

    The tests compile many small functions and run each a few times: on
    JAX, compiling is most of a layer test's time (every eager operation
    with a new shape is a program of its own). Two flags make XLA spend
    less time making faster machine code:

    - `--xla_backend_optimization_level=0`, no LLVM optimizations:
      `tests/layers/test_numerics.py` on JAX, one process, an empty
      compilation cache: 104 s, then 81 s (the same 98 tests pass);
    - `--xla_cpu_use_fusion_emitters=false`, XLA's older CPU emitters
      for fused loops: a small program (a matmul, a softmax) compiles in
      13 ms against 23 ms; `tests/layers` on JAX, two workers, an empty
      compilation cache: 335 s, then 201 s (the same 1,122 tests pass).
      TensorFlow's XLA (`jit_compile`) reads the same flags.

    Outside the suite (the recipes, the benchmarks, users' programs)
    XLA's defaults apply; a flag already in `XLA_FLAGS` is kept. Tests
    that start processes with flags of their own (a number of CPU
    devices) add them to these.
    """
    flags = os.environ.get("XLA_FLAGS", "")
    for name, value in (("xla_backend_optimization_level", "0"),
                        ("xla_cpu_use_fusion_emitters", "false")):
        if f"--{name}" not in flags:
            flags = f"{flags} --{name}={value}".strip()
    os.environ["XLA_FLAGS"] = flags


_fast_xla_compilations()

_EXAMPLES = os.environ.get("KERAS_SYNTH_HYPOTHESIS_EXAMPLES", "").strip()

settings.register_profile(
    "keras_synth",
    # Building a Keras layer per example is slow next to Hypothesis' usual
    # budget; a first call also pays for tracing/compilation.
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
    print_blob=True,
    max_examples=int(_EXAMPLES) if _EXAMPLES else 10,
    # The default run is reproducible (same examples each time); a run with
    # an explicit budget explores new random examples.
    derandomize=not _EXAMPLES,
)
settings.load_profile("keras_synth")


def _full_float32_matmuls():
    """Turns TensorFloat-32 off for the backend under test."""
    import keras

    backend = keras.backend.backend()
    if backend == "tensorflow":
        import tensorflow as tf

        tf.config.experimental.enable_tensor_float_32_execution(False)
    if backend == "jax":
        import jax

        jax.config.update("jax_default_matmul_precision", "highest")
    if backend == "torch":
        import torch

        torch.backends.cuda.matmul.allow_tf32 = False
        torch.backends.cudnn.allow_tf32 = False


_full_float32_matmuls()


def _no_graph_rewrites_in_tests():
    """TensorFlow: Grappler's and AutoGraph's rewrites off in the test
    processes. The recipe processes the tests start, the recipes,
    benchmarks and users' programs keep TensorFlow's defaults.

    - Grappler rewrites each `tf.function` graph before it first runs
      (constant folding, op fusions, layout, pruning): time well spent on
      a graph that runs many steps, not on the suite's, which run a few
      times each (training steps, tf.data maps, generation loops, loaded
      SavedModels). `tests/models` on two workers 385 s, then 362 s;
      `test_synthesizer_seq2seq_lm.py` in one process 101 s, then 91 s.
    - AutoGraph rewrites each Python function a `tf.function` or a
      `tf.data` map calls (Python `if`/`for` on tensors into graph control
      flow) before tracing it. Our layers and models use `keras.ops`
      control flow (as JAX needs), the recipes' `tf.data` functions
      TensorFlow ops; the whole suite passes without it (2,631 tests).
      Every thread's AutoGraph context starts from TensorFlow's internal
      `_default_control_status_ctx()` ("unspecified"); "disabled" has
      functions traced as written, and Python control flow on a tensor
      is an error, as on JAX. `test_synthesizer_seq2seq_lm.py`, one
      process, runs taken in turn: 127 s and 125 s with it, 117 s and
      120 s without.

    Measurements (the same tests pass): docs/testing.md.
    """
    import keras

    if keras.backend.backend() != "tensorflow":
        return
    import tensorflow as tf
    from tensorflow.python.autograph.core import ag_ctx

    tf.config.optimizer.set_experimental_options(
        {"disable_meta_optimizer": True})

    def disabled():
        return ag_ctx.ControlStatusCtx(status=ag_ctx.Status.DISABLED)

    ag_ctx._default_control_status_ctx = disabled
    stack = getattr(ag_ctx.stacks, "control_status", None)
    if stack:  # this thread's context, made before
        stack[0] = disabled()


_no_graph_rewrites_in_tests()


# `KERAS_SYNTH_ONE_VARIANT=1` (set by .ci/check_keras_hub only): each test
# runs for the first synthesizer variant of its parametrization (the
# `synthesizer` or `variant` argument) and every value of its other
# arguments. The keras-hub floor check runs the models' tests against the
# oldest keras-hub allowed; the variants differ in our attention layers,
# which call no keras-hub code, and each variant is tested in full by the
# main run of the suite on every backend.
_VARIANT_ARGUMENTS = ("synthesizer", "variant")


# The order the suite runs its folders in: the slowest tests first.
# `pytest -n` hands tests out in collection order; when the last ones are
# the slow ones (the recipe runs, the documentation examples that train),
# one worker finishes them while the other waits. Folders not named run
# last, in pytest's order; the order inside a folder is kept.
_FOLDER_ORDER = ("recipes", "test_readme.py", "models", "test_docstrings.py")


def _folder_rank(item):
    parts = item.nodeid.split("::")[0].split("/")
    name = parts[1] if len(parts) > 1 else ""
    return (_FOLDER_ORDER.index(name) if name in _FOLDER_ORDER
            else len(_FOLDER_ORDER))


def pytest_collection_modifyitems(config, items):
    items.sort(key=_folder_rank)  # stable: the order in a folder is kept
    if os.environ.get("KERAS_SYNTH_ONE_VARIANT") != "1":
        return
    first, kept, dropped = {}, [], []
    for item in items:
        params = getattr(getattr(item, "callspec", None), "params", {})
        variant = next((params[name] for name in _VARIANT_ARGUMENTS
                        if name in params), None)
        if variant is None:
            kept.append(item)
            continue
        key = (item.nodeid.split("[")[0], tuple(sorted(
            (name, repr(value)) for name, value in params.items()
            if name not in _VARIANT_ARGUMENTS)))
        if first.setdefault(key, variant) == variant:
            kept.append(item)
        else:
            dropped.append(item)
    if dropped:
        config.hook.pytest_deselected(items=dropped)
        items[:] = kept


def pytest_collection_finish(session):
    """Freezes the objects alive after collection out of the collector.

    Keras' `Layer.__delattr__` runs a full `gc.collect()` for every
    variable a layer drops (`quantize` drops each kernel it replaces by
    an int8 one: 14 collections for a one-layer task). A full collection
    walks every tracked object, and after TensorFlow, JAX, PyTorch and
    keras-hub are imported that is ~0.7 s each on the CI machine: 97% of
    a `quantize` (10 s of 10.5 s, profiled on JAX). `gc.freeze()` moves
    what is alive now (the imported libraries and the collected test
    modules) into a permanent generation that collections skip; objects
    the tests create are collected as before. Each xdist worker runs its
    own collection and so freezes its own heap.
    """
    import gc

    gc.collect()
    gc.freeze()


@pytest.fixture
def frozen_heap():
    """Freezes what is alive before the test, for tests that drop many
    Keras variables (`quantize`, which replaces each kernel by an int8
    one: a full `gc.collect()` per variable, see
    `pytest_collection_finish`).

    The freeze after collection leaves out what earlier tests made and
    still hold (compiled functions, module-scoped models): late in a
    worker's run each collection walks that too, and a `quantize` test
    that takes 3 s alone took 17-30 s there. One collection now, then
    frozen: the test's own collections walk only what the test made.
    Garbage is collected first, so only live objects are frozen.
    """
    import gc

    gc.collect()
    gc.freeze()
    yield
