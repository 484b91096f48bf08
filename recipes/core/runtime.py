"""Where a recipe runs: the backend it needs, its tf.distribute strategy,
its precision, whether this process is the chief, and the entry point
(`run_main`) that sets all that up before TensorFlow is imported.
"""

import datetime
import json
import os
import platform
import sys

STRATEGIES = ("one_device", "mirrored", "multi_worker", "tpu")
PRECISIONS = ("float32", "bfloat16", "float16")
# `--matmul_precision`: float32 matrix products and convolutions in full
# float32 ("highest") or in TensorFloat-32 where the GPU has it ("high").
MATMUL_PRECISIONS = ("highest", "high")
DEFAULT_MATMUL_PRECISION = "highest"
# Environment variable: split the first GPU (or, without one, the CPU) into
# this many logical devices, e.g. to run `--strategy=mirrored` with two
# replicas on one GPU. Read by `select_strategy` before TensorFlow starts.
LOGICAL_DEVICES_ENV = "KERAS_SYNTH_LOGICAL_DEVICES"
# Memory (MiB) of each logical GPU made by `KERAS_SYNTH_LOGICAL_DEVICES`.
LOGICAL_GPU_MEMORY_ENV = "KERAS_SYNTH_LOGICAL_GPU_MEMORY_MB"
DEFAULT_LOGICAL_GPU_MEMORY_MB = 8192
# Seconds a multi-worker process waits for its cluster (`--cluster_timeout`).
DEFAULT_CLUSTER_TIMEOUT = 300.0


def require_tensorflow_backend():
    """Selects the TensorFlow backend, or explains why it can't.

    The recipes use tf.data, tf.distribute and SavedModel. Call this before
    importing keras: it sets `KERAS_BACKEND=tensorflow` when unset.

    Raises:
        RuntimeError: another backend is forced.
    """
    backend = os.environ.setdefault("KERAS_BACKEND", "tensorflow")
    if "keras" in sys.modules:
        import keras

        backend = keras.backend.backend()
    if backend != "tensorflow":
        raise RuntimeError(
            "The recipes run on the TensorFlow backend (tf.data, "
            "tf.distribute, SavedModel), but KERAS_BACKEND="
            f"{backend!r} is set. Unset it or run with "
            "KERAS_BACKEND=tensorflow."
        )


def select_strategy(name, tpu=None,
                    cluster_timeout=DEFAULT_CLUSTER_TIMEOUT):
    """Returns the `tf.distribute.Strategy` called `name`.

    Call it first, before TensorFlow runs any op:
    `MultiWorkerMirroredStrategy` configures the process's collective ops,
    which is only possible at program start-up, and the TPU system is
    initialised before it is used.

    - `one_device`: the first GPU, else the CPU.
    - `mirrored`: `MirroredStrategy` over all local GPUs, or over all logical
      CPU devices when there is no GPU (useful to test distribution).
    - `multi_worker`: `MultiWorkerMirroredStrategy`, cluster from `TF_CONFIG`
      (checked first); the process ends with an error if the cluster is
      not up within `cluster_timeout` seconds.
    - `tpu`: `TPUStrategy` on the TPU named by `tpu`.

    With the environment variable `KERAS_SYNTH_LOGICAL_DEVICES=N`, the
    first GPU (without a GPU, the CPU) is first split into `N` logical
    devices (`split_logical_devices`).
    """
    import tensorflow as tf

    if name not in STRATEGIES:
        raise ValueError(
            f"Unknown strategy {name!r} (argument `--strategy`). Expected one "
            f"of {STRATEGIES}."
        )
    if name != "tpu" and tpu:
        raise ValueError(
            f"Argument `--tpu={tpu}` needs `--strategy=tpu`. Received: "
            f"--strategy={name}"
        )
    if name == "multi_worker":
        return _multi_worker_strategy(cluster_timeout)
    split_logical_devices()
    gpus = tf.config.list_logical_devices("GPU")
    if name == "one_device":
        device = gpus[0].name if gpus else "/cpu:0"
        return tf.distribute.OneDeviceStrategy(device)
    if name == "mirrored":
        if gpus:
            return tf.distribute.MirroredStrategy([d.name for d in gpus])
        cpus = [d.name for d in tf.config.list_logical_devices("CPU")]
        return tf.distribute.MirroredStrategy(
            cpus, cross_device_ops=tf.distribute.ReductionToOneDevice()
        )
    if not tpu:
        raise ValueError(
            "Argument `--tpu` is required by `--strategy=tpu`: the TPU name, "
            "a grpc:// address, or 'local' on a TPU VM."
        )
    resolver = tf.distribute.cluster_resolver.TPUClusterResolver(tpu=tpu)
    tf.config.experimental_connect_to_cluster(resolver)
    tf.tpu.experimental.initialize_tpu_system(resolver)
    return tf.distribute.TPUStrategy(resolver)


def setup(args, log=print):
    """Returns the strategy (`--strategy`, `--tpu`, `--cluster_timeout`),
    created first, before TensorFlow runs any op; then seeds Keras
    (`--seed`) and sets the dtype policy (`--mixed_precision`), logging
    both. Call it before reading data or learning a vocabulary."""
    import keras

    strategy = select_strategy(args.strategy, args.tpu,
                               getattr(args, "cluster_timeout",
                                       DEFAULT_CLUSTER_TIMEOUT))
    check_jit_compile(getattr(args, "jit_compile", False), args.strategy,
                      strategy.num_replicas_in_sync)
    keras.utils.set_random_seed(args.seed)
    policy = configure_precision(args.mixed_precision)
    log(f"Strategy: {type(strategy).__name__} with "
        f"{strategy.num_replicas_in_sync} replica(s); dtype policy {policy}.")
    log_devices(strategy, getattr(args, "matmul_precision",
                                  DEFAULT_MATMUL_PRECISION), log)
    return strategy


def log_devices(strategy, matmul_precision=DEFAULT_MATMUL_PRECISION,
                log=print):
    """Sets `--matmul_precision` (`configure_matmul_precision`) and logs
    the devices the strategy computes on (`describe_devices`) with it."""
    configure_matmul_precision(matmul_precision)
    tf32 = ("TF32 allowed" if matmul_precision == "high"
            else "full float32, TF32 off")
    log(f"Devices: {describe_devices(strategy)}; float32 matmuls: "
        f"{matmul_precision} ({tf32}).")


def configure_matmul_precision(precision):
    """Sets TensorFlow's float32 matrix-product precision
    (`--matmul_precision`).

    NVIDIA GPUs from Ampere on run float32 matrix products and convolutions
    in TensorFloat-32 (inputs rounded to a 10-bit mantissa) unless told
    otherwise, so a "float32" model differs from its CPU run by about 1e-3
    relatively. `"highest"` (the default) turns TF32 off: float32 is
    float32 on every device. `"high"` allows it (faster on such GPUs). CPUs
    and the bfloat16/float16 policies' products are unaffected.

    Raises:
        ValueError: naming `--matmul_precision`, for another value.
    """
    import tensorflow as tf

    if precision not in MATMUL_PRECISIONS:
        raise ValueError(
            f"Unknown matmul precision {precision!r} (argument "
            f"`--matmul_precision`). Expected one of {MATMUL_PRECISIONS}."
        )
    tf.config.experimental.enable_tensor_float_32_execution(
        precision == "high")
    return precision


def describe_devices(strategy):
    """The devices `strategy` computes on, for the log: each device's name
    with its GPU model (e.g. `GPU:0 (NVIDIA H200)`), or `CPU (no GPU
    found)` when no GPU was found (`one_device` then runs on the CPU)."""
    devices = list(getattr(strategy.extended, "worker_devices", ())) or [
        getattr(strategy.extended, "_device", "CPU")]
    names = _gpu_names()
    labels = []
    for device in devices:
        short = device.rsplit("device:", 1)[-1].upper()
        if short.startswith("GPU"):
            labels.append(f"{short} ({names.get(short, 'GPU')})")
        else:
            labels.append(short)
    text = ", ".join(labels)
    if not any(label.startswith("GPU") for label in labels):
        text = ("CPU (no GPU found)" if text in ("CPU", "CPU:0")
                else f"{text} (no GPU found)")
    return text


def _gpu_names():
    """`{"GPU:i": model name}` for the logical GPUs TensorFlow sees (a
    physical GPU split in several logical ones names each of them)."""
    import tensorflow as tf

    physical = tf.config.list_physical_devices("GPU")
    logical = tf.config.list_logical_devices("GPU")
    models = []
    for device in physical:
        try:
            details = tf.config.experimental.get_device_details(device)
        except Exception:  # pragma: no cover - depends on the driver
            details = {}
        models.append(details.get("device_name", "GPU"))
    names = {}
    for i, _ in enumerate(logical):
        model = (models[i] if len(models) == len(logical)
                 else models[0] if len(models) == 1 else "GPU")
        names[f"GPU:{i}"] = model
    return names


def split_logical_devices(environ=None):
    """Splits the first GPU, or the CPU without a GPU, into the number of
    logical devices that `KERAS_SYNTH_LOGICAL_DEVICES` names (unset: no
    change), each logical GPU with `KERAS_SYNTH_LOGICAL_GPU_MEMORY_MB` MiB
    (default 8192). Returns that number (1 when unset).

    TensorFlow fixes its devices when it initialises: call this before
    any op runs (`select_strategy` does). A split already in place is
    kept.

    Raises:
        ValueError: naming the variable, for a value that is not a
            positive integer.
        RuntimeError: TensorFlow already initialised with other devices.
    """
    import tensorflow as tf

    environ = os.environ if environ is None else environ
    count = _positive_int_env(environ, LOGICAL_DEVICES_ENV, 1)
    if count == 1 and not environ.get(LOGICAL_DEVICES_ENV, "").strip():
        return 1
    gpus = tf.config.list_physical_devices("GPU")
    device = gpus[0] if gpus else tf.config.list_physical_devices("CPU")[0]
    if gpus:
        memory = _positive_int_env(environ, LOGICAL_GPU_MEMORY_ENV,
                                   DEFAULT_LOGICAL_GPU_MEMORY_MB)
        config = [tf.config.LogicalDeviceConfiguration(memory_limit=memory)
                  for _ in range(count)]
    else:
        config = [tf.config.LogicalDeviceConfiguration()
                  for _ in range(count)]
    current = tf.config.get_logical_device_configuration(device)
    if current is not None and len(current) == count:
        return count
    try:
        tf.config.set_logical_device_configuration(device, config)
    except RuntimeError as error:
        raise RuntimeError(
            f"{LOGICAL_DEVICES_ENV}={count} cannot split {device.name}: "
            f"TensorFlow has already initialised its devices ({error}). "
            "Set it before the process runs any TensorFlow op."
        ) from None
    return count


def _positive_int_env(environ, name, default):
    text = environ.get(name, "").strip()
    if not text:
        return default
    try:
        value = int(text)
    except ValueError:
        value = 0
    if value < 1:
        raise ValueError(
            f"Environment variable `{name}` must be a positive integer. "
            f"Received: {name}={text!r}"
        )
    return value


def check_jit_compile(jit_compile, strategy, num_replicas):
    """Refuses `--jit_compile` with `--strategy=mirrored` or
    `multi_worker` over more than one replica.

    XLA-compiling a `MirroredStrategy` train step is a known failure mode
    of Keras on several GPUs (the compiled step is handed resources placed
    on another device); Keras' own `jit_compile="auto"` turns XLA off
    under tf.distribute for that reason. One replica (`one_device`, or
    `mirrored` on one GPU) is compiled; on a TPU XLA is implicit.

    Raises:
        ValueError: naming both flags, the replicas and what to do.
    """
    if (jit_compile and strategy in ("mirrored", "multi_worker")
            and num_replicas > 1):
        raise ValueError(
            f"Argument `--jit_compile` is not supported with "
            f"`--strategy={strategy}` over {num_replicas} replicas: an "
            "XLA-compiled MirroredStrategy train step fails on resources "
            "placed on another device (Keras' own jit_compile='auto' turns "
            "XLA off under tf.distribute). Drop --jit_compile, or compile "
            "on one device (--strategy=one_device); on a TPU "
            "(--strategy=tpu) XLA is implicit.")


def parse_tf_config(text=None):
    """Reads and checks `TF_CONFIG` (default: the environment's).

    Returns:
        `(cluster, task_type, task_index)`: `cluster` maps a job (`chief`,
        `worker`) to its list of `host:port` addresses; `(None, None,
        None)` when `TF_CONFIG` is unset or empty.

    Raises:
        ValueError: naming `TF_CONFIG`, what is wrong and what was
            expected.
    """
    if text is None:
        text = os.environ.get("TF_CONFIG", "")
    if not text.strip():
        return None, None, None
    expected = ('Expected JSON like {"cluster": {"worker": ["host0:port0", '
                '"host1:port1"]}, "task": {"type": "worker", "index": 0}}.')

    def fail(problem):
        raise ValueError(f"Environment variable `TF_CONFIG` {problem}. "
                         f"Received: TF_CONFIG={text!r}. {expected}")

    try:
        config = json.loads(text)
    except ValueError as error:
        fail(f"is not valid JSON ({error})")
    if not isinstance(config, dict):
        fail("is not a JSON object")
    cluster, task = config.get("cluster"), config.get("task")
    if not isinstance(cluster, dict) or not cluster:
        fail('has no "cluster" object')
    for job, addresses in cluster.items():
        if job not in ("chief", "worker", "evaluator", "ps"):
            fail(f'names an unknown job {job!r} in "cluster" (expected '
                 '"chief" and "worker")')
        if (not isinstance(addresses, list) or not addresses or not all(
                isinstance(a, str) and a.rpartition(":")[2].isdigit()
                and a.rpartition(":")[0] for a in addresses)):
            fail(f'lists the {job!r} addresses as {addresses!r}, not as a '
                 'non-empty list of "host:port" strings')
    if not isinstance(task, dict):
        fail('has no "task" object')
    kind, index = task.get("type"), task.get("index")
    if kind not in cluster:
        fail(f'has "task" type {kind!r}, which is not a job of "cluster" '
             f"({sorted(cluster)})")
    if (not isinstance(index, int) or isinstance(index, bool)
            or not 0 <= index < len(cluster[kind])):
        fail(f'has "task" index {index!r}; the {kind!r} job has '
             f"{len(cluster[kind])} address(es), so it must be an integer "
             f"in [0, {len(cluster[kind])})")
    return cluster, kind, index


def is_chief():
    """Whether this process writes the run directory: the only process, or
    the `chief` task of `TF_CONFIG`, or worker 0 of a cluster without one."""
    cluster, kind, index = parse_tf_config()
    if cluster is None:
        return True
    return kind == "chief" or (kind == "worker" and index == 0
                               and "chief" not in cluster)


def _program():
    """`python -m recipes.<name>` of the running recipe, for messages."""
    spec = getattr(sys.modules.get("__main__"), "__spec__", None)
    name = getattr(spec, "name", "") or ""
    return "python -m " + name.removesuffix(".__main__") if name else "recipes"


# Run by a watchdog process: ends the process `pid` (the recipe) with
# `message` on stderr unless its stdin closes (the recipe's cluster is up,
# or the recipe ended) within `timeout` seconds.
_WATCHDOG = """
import os, select, signal, sys
pid, timeout, message = int(sys.argv[1]), float(sys.argv[2]), sys.argv[3]
if not select.select([sys.stdin], [], [], timeout)[0]:
    sys.stderr.write(message + "\\n")
    sys.stderr.flush()
    os.kill(pid, signal.SIGKILL)
"""


def _start_cluster_watchdog(timeout, cluster):
    """Ends this process with a clear error if the cluster is not up
    within `timeout` seconds (TensorFlow would wait for a missing worker
    for an hour); returns the watchdog process: close its stdin once the
    cluster is up.

    A process, not a thread: while TensorFlow waits for the cluster it
    holds Python's lock, and no thread or signal handler of this process
    runs."""
    import subprocess

    addresses = ", ".join(a for job in cluster.values() for a in job)
    message = (f"{_program()}: error: The cluster of TF_CONFIG "
               f"({addresses}) was not up within --cluster_timeout="
               f"{timeout:g} seconds: start every worker (the same command, "
               "each with its own TF_CONFIG task index), check that the "
               "addresses are reachable, or raise --cluster_timeout.")
    return subprocess.Popen(
        [sys.executable, "-c", _WATCHDOG, str(os.getpid()), str(timeout),
         message], stdin=subprocess.PIPE)


def _multi_worker_strategy(cluster_timeout):
    import tensorflow as tf

    class MultiWorkerMirroredStrategy(
            tf.distribute.MultiWorkerMirroredStrategy):
        """`tf.distribute.MultiWorkerMirroredStrategy` whose `reduce` takes
        the nested values and scalars Keras 3's `fit` gives it.

        Keras' TensorFlow trainer reduces a batch `(x, y)` in one call and
        each scalar metric with `axis=0`; TensorFlow's multi-worker
        `reduce` takes neither (one tensor, and an axis the value has).
        Here each tensor of the structure is reduced, a scalar with
        `axis=None` (the mean or sum over replicas that was meant).
        """

        def reduce(self, reduce_op, value, axis):
            def reduce_one(v):
                local = v.values[0] if isinstance(
                    v, tf.distribute.DistributedValues) else v
                rank = getattr(getattr(local, "shape", None), "rank", None)
                return super(MultiWorkerMirroredStrategy, self).reduce(
                    reduce_op, v, None if rank == 0 else axis)

            return tf.nest.map_structure(reduce_one, value)

    if cluster_timeout is None or not cluster_timeout > 0:
        raise ValueError(
            "Argument `--cluster_timeout` must be a positive number of "
            f"seconds. Received: --cluster_timeout={cluster_timeout}")
    cluster, _, _ = parse_tf_config()
    if cluster is None:
        raise ValueError(
            "Argument `--strategy=multi_worker` needs the environment "
            "variable TF_CONFIG, which names the cluster and this worker, "
            'e.g. TF_CONFIG=\'{"cluster": {"worker": ["host0:port0", '
            '"host1:port1"]}, "task": {"type": "worker", "index": 0}}\' '
            "(index 1 on the other worker).")
    watchdog = _start_cluster_watchdog(cluster_timeout, cluster)
    try:
        return MultiWorkerMirroredStrategy()
    finally:
        watchdog.stdin.close()
        watchdog.wait()


def chief_first(strategy, prepare, fingerprint=repr):
    """Calls `prepare()` on the chief first, then on the other workers,
    and returns its result, the same on every worker.

    The chief prepares what the run shares (e.g. learns and saves the
    vocabulary, repairs the run directory); the other workers wait for it
    (a collective barrier: a chief that fails ends their wait too), then
    call `prepare()`, which reads what the chief saved. Their result must
    equal the chief's, compared by a checksum of `fingerprint(result)` (a
    string), else a ValueError says so (e.g. a `--model_dir` the workers
    do not share, or workers started with different arguments). Without a
    multi-worker strategy this is `prepare()`.
    """
    import zlib

    if not _is_multi_worker(strategy):
        return prepare()

    def checksum(result):
        return zlib.crc32(fingerprint(result).encode("utf-8"))

    chief = is_chief()
    result = prepare() if chief else None
    chiefs = _sum_over_workers(
        strategy, [checksum(result), 1] if chief else [0, 0])
    if not chief:
        result = prepare()
        if chiefs[1] != 1 or checksum(result) != chiefs[0]:
            raise ValueError(
                "This worker's run set-up differs from the chief's (the "
                "vocabulary, the epoch to resume from or the arguments): "
                "start every worker with the same arguments, and give "
                "them a --model_dir they all see (a shared file system).")
    return result


def _is_multi_worker(strategy):
    import tensorflow as tf

    cluster, _, _ = parse_tf_config()
    return (isinstance(strategy, tf.distribute.MultiWorkerMirroredStrategy)
            and cluster is not None
            and sum(len(a) for j, a in cluster.items()
                    if j in ("chief", "worker")) > 1)


def _sum_over_workers(strategy, numbers):
    """Sums the lists `numbers` (non-negative integers below 2**52) over
    every worker of `strategy` (a collective: every worker calls it)."""
    import tensorflow as tf

    local = tf.constant(numbers, tf.float64)

    @tf.function
    def total():
        per_replica = strategy.run(lambda: tf.identity(local))
        return strategy.reduce("SUM", per_replica, axis=None)

    replicas_per_worker = len(strategy.extended.worker_devices)
    return [int(round(x / replicas_per_worker)) for x in total().numpy()]


def configure_precision(mixed_precision):
    """Sets Keras' global dtype policy from `--mixed_precision`.

    `float16` gets dynamic loss scaling from `Model.compile`
    (`auto_scale_loss=True`); `bfloat16` needs none.
    """
    import keras

    if mixed_precision not in PRECISIONS:
        raise ValueError(
            f"Unknown precision {mixed_precision!r} (argument "
            f"`--mixed_precision`). Expected one of {PRECISIONS}."
        )
    policy = ("float32" if mixed_precision == "float32"
              else f"mixed_{mixed_precision}")
    keras.mixed_precision.set_global_policy(policy)
    return policy


def environment():
    """Versions and devices, for results.json."""
    info = {
        "python": platform.python_version(),
        "platform": platform.platform(),
        "time": datetime.datetime.now(datetime.timezone.utc).isoformat(),
    }
    for module in ("keras", "tensorflow", "keras_hub", "keras_synth"):
        try:
            info[module] = __import__(module).__version__
        except Exception:  # pragma: no cover - optional
            pass
    try:
        import tensorflow as tf

        info["devices"] = [d.name for d in tf.config.list_logical_devices()]
    except Exception:  # pragma: no cover
        pass
    return info


def run_main(parser, run, prog, argv=None, input_paths=(), validate=None):
    """Parses `argv` and calls `run(args)`; returns the exit status.

    Before TensorFlow is imported, the arguments are checked:
    `validate(args, check_options=False)` (the recipe's checks of the
    values, pure Python) and the flags named in `input_paths` (a missing
    file or folder), so that a bad value is reported at once. TensorFlow's
    logs and Python warnings are hidden during the run unless `--tf_logs`
    (or `KERAS_SYNTH_TF_LOGS=1`) is given. A `ValueError` (bad arguments, `DataError`) or `RuntimeError`
    prints one line `prog: error: ...` and returns 2 (set
    `RECIPES_TRACEBACK=1` for the traceback); so does the error of a
    multi-worker run whose peer stopped (it says how to resume).
    """
    from recipes import cli

    args = parser.parse_args(argv)
    try:
        if validate is not None:
            validate(args, check_options=False)
        cli.check_input_paths(args, input_paths)
        require_tensorflow_backend()
        with cli.quiet_tensorflow(not cli.tf_logs_wanted(args)):
            run(args)
    except Exception as error:
        message = (str(error) if isinstance(error, (ValueError, RuntimeError))
                   else _cluster_failure(error))
        if message is None or os.environ.get("RECIPES_TRACEBACK"):
            raise
        print(f"{prog}: error: {message}", file=sys.stderr)
        return 2
    return 0


def _cluster_failure(error):
    """What to tell the user when `error` is TensorFlow's report of a
    worker that stopped in a multi-worker run, else None."""
    if "tensorflow" not in sys.modules or parse_tf_config()[0] is None:
        return None
    import tensorflow as tf

    if not isinstance(error, (tf.errors.UnavailableError,
                              tf.errors.CancelledError,
                              tf.errors.AbortedError,
                              tf.errors.DeadlineExceededError)):
        return None
    import re

    # Without TensorFlow's node names (`{{function_node ...}}`).
    text = re.sub(r"\{\{[^}]*\}\}\s*", "", str(error))
    lines = [line.strip() for line in text.splitlines() if line.strip()]
    # TensorFlow's first lines name the graph node; say who stopped.
    cause = next((line for line in lines if "unhealthy" in line
                  or "Error reported from" in line or "aborted" in line),
                 lines[0] if lines else type(error).__name__)
    return (f"A worker of the cluster stopped ({cause}). Start every worker "
            "again with the same command: the run resumes from its last "
            "backup (<model_dir>/backup).")
