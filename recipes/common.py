"""What every recipe shares: flags, data checks, vocabularies, strategies and
the run directory.

The recipes (`recipes.glue`, and encoder-decoder recipes such as translation)
use the same command-line flags for these (`add_common_flags`) and the same
helpers, so that a new recipe only writes its data pipeline and its model.

Importing this module needs no TensorFlow: the TensorFlow-specific helpers
import it when called, and the pure-Python parts (`DataError`,
`check_data_file`, `RunDirectory`'s configuration checks, `write_json`) work
on every Keras backend.
"""

import datetime
import json
import os
import platform
import sys
import time

RESERVED_TOKENS = ("[PAD]", "[CLS]", "[SEP]", "[UNK]", "[MASK]")
PAD, CLS, SEP, UNK, MASK = RESERVED_TOKENS

STRATEGIES = ("one_device", "mirrored", "multi_worker", "tpu")
PRECISIONS = ("float32", "bfloat16", "float16")

# Flags that don't change what a run computes: a run directory may be reused
# with different values (e.g. resume a run on another machine).
RUNTIME_FLAGS = frozenset(
    {"model_dir", "strategy", "tpu", "verbose", "tensorboard", "export",
     "jit_compile", "data_dir", "vocab_file", "tfds_data_dir", "tf_logs"}
)


class DataError(ValueError):
    """A missing or malformed data file; the message says what was expected."""


# ---------------------------------------------------------------- backend


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


# ------------------------------------------------------------------- flags


def add_common_flags(parser, default_batch_size=32, default_epochs=3,
                     default_learning_rate=1e-3, model_dir_default=None):
    """Adds the flags every recipe shares to an `argparse.ArgumentParser`.

    `model_dir_default` is the text `--help` shows as `--model_dir`'s
    default (the recipe derives the folder from other flags).
    """
    from recipes import cli

    group = parser.add_argument_group("training (shared by all recipes)")
    group.add_argument("--model_dir", default=None,
                       help="Run directory: checkpoints (resumed when the "
                       "run is started again with the same arguments), "
                       "TensorBoard logs, results.json, vocabulary, export."
                       + (f" Default: {model_dir_default}."
                          if model_dir_default else ""))
    group.add_argument("--vocab_file", default=None,
                       help="WordPiece vocabulary (one token a line); "
                       "learned from the training split when not given.")
    group.add_argument("--vocab_size", type=int, default=8000,
                       help="Size of the learned WordPiece vocabulary.")
    group.add_argument("--batch_size", type=int, default=default_batch_size,
                       help="Global batch size (split over the replicas).")
    group.add_argument("--epochs", type=int, default=default_epochs,
                       help="Passes over the training data.")
    group.add_argument("--learning_rate", type=float,
                       default=default_learning_rate,
                       help="Peak learning rate (linear warmup, cosine "
                       "decay, AdamW).")
    group.add_argument("--warmup_fraction", type=float, default=0.1,
                       help="Linear warmup as a fraction of all training "
                       "steps.")
    group.add_argument("--weight_decay", type=float, default=0.01,
                       help="AdamW's decoupled weight decay (0: Adam).")
    group.add_argument("--ema_momentum", type=float, default=None,
                       help="Keep an exponential moving average of the "
                       "weights with this momentum (e.g. 0.999) and "
                       "evaluate and export it; the per-epoch log lines "
                       "show the raw weights. Off by default.")
    group.add_argument("--seed", type=int, default=0,
                       help="Random seed: initial weights, data order, "
                       "dropout.")
    group.add_argument("--strategy", choices=STRATEGIES, default="one_device",
                       help="tf.distribute strategy: one device, "
                       "MirroredStrategy (all local GPUs, else all logical "
                       "CPUs), MultiWorkerMirroredStrategy (from TF_CONFIG) "
                       "or TPUStrategy (--tpu).")
    group.add_argument("--tpu", default=None,
                       help="TPU name or grpc:// address for --strategy=tpu "
                       "('local' for a TPU VM).")
    group.add_argument("--mixed_precision", choices=PRECISIONS,
                       default="float32",
                       help="Compute dtype; float16 uses loss scaling.")
    group.add_argument("--jit_compile", action="store_true",
                       help="Compile the train step with XLA (off by "
                       "default).")
    group.add_argument("--verbose", type=int, choices=(0, 1, 2), default=2,
                       help="Keras progress output: 0 none, 1 progress "
                       "bars, 2 one line per epoch.")
    cli.add_log_flag(group)
    return group


def add_time_budget_flag(group):
    """Adds `--time_budget_minutes` (see `make_time_budget_callback`)."""
    group.add_argument("--time_budget_minutes", type=float, default=None,
                       help="Stop training after this many minutes (the "
                       "epoch in progress ends early and is saved), e.g. "
                       "to compare variants at the same budget.")


def positive(name, value):
    """Raises a ValueError unless `value` is a positive number."""
    if value is None or value <= 0:
        raise ValueError(
            f"Argument `--{name}` must be positive. Received: --{name}={value}"
        )


def check_ema_momentum(value):
    """Raises a ValueError unless `--ema_momentum` is None or in (0, 1)."""
    if value is not None and not 0.0 < value < 1.0:
        raise ValueError(
            "Argument `--ema_momentum` must be in (0, 1), e.g. 0.999. "
            f"Received: --ema_momentum={value}"
        )


# -------------------------------------------------------------- data files


def check_data_file(path, what="data file"):
    """Returns `path` if it is a readable, non-empty file.

    Raises:
        DataError: naming `what` was expected and where.
    """
    if not os.path.exists(path):
        raise DataError(f"Expected the {what} at {path}; no such file.")
    if not os.path.isfile(path):
        raise DataError(f"Expected the {what} at {path}; it is not a file.")
    if os.path.getsize(path) == 0:
        raise DataError(f"The {what} at {path} is empty.")
    return path


# ------------------------------------------------------------- vocabulary


def learn_wordpiece_vocabulary(texts, vocab_size, lowercase=True):
    """Learns a WordPiece vocabulary from an iterable of strings
    (`keras_synth.models.learn_wordpiece_vocabulary`: tensorflow-text's BERT
    vocabulary learner, `RESERVED_TOKENS` first, `[PAD]` at id 0).

    Returns:
        The list of tokens.
    """
    from keras_synth.models import learn_wordpiece_vocabulary as learn

    return learn(texts, vocab_size, lowercase)


def load_vocabulary(path, reserved_tokens=RESERVED_TOKENS):
    """Reads a vocabulary file (one token a line) and checks its tokens.

    Raises:
        DataError: the file is missing or empty, or lacks a reserved token.
    """
    check_data_file(path, "vocabulary file (one token a line)")
    with open(path, encoding="utf-8") as f:
        vocab = [line.rstrip("\n") for line in f if line.rstrip("\n")]
    missing = [t for t in reserved_tokens if t not in vocab]
    if missing:
        raise DataError(
            f"The vocabulary file {path} lacks the reserved token(s) "
            f"{missing}; expected all of {list(reserved_tokens)}."
        )
    if vocab[0] != reserved_tokens[0]:
        raise DataError(
            f"The vocabulary file {path} must start with {reserved_tokens[0]}"
            f" (padding id 0); it starts with {vocab[0]!r}."
        )
    return vocab


def save_vocabulary(vocab, path):
    with open(path, "w", encoding="utf-8") as f:
        for token in vocab:
            f.write(token + "\n")


def wordpiece_tokenizer(vocab, lowercase=True):
    """A `keras_hub.tokenizers.WordPieceTokenizer` over `vocab` (ragged ids)."""
    import keras_hub

    return keras_hub.tokenizers.WordPieceTokenizer(
        vocabulary=list(vocab), lowercase=lowercase, oov_token=UNK,
        dtype="int32",
    )


def prepare_vocabulary(run_dir, texts, vocab_file=None, vocab_size=8000,
                       lowercase=True, log=print, filename="vocab.txt"):
    """Returns the run's vocabulary, saved as `<run_dir>/<filename>`.

    A resumed run reuses its saved vocabulary; otherwise `vocab_file` is
    copied, or a vocabulary is learned from `texts` (a callable returning
    the training strings, so that they are only read when needed). A run
    with several vocabularies (e.g. one per language) gives each its own
    `filename`.
    """
    saved = run_dir.path(filename)
    if os.path.isfile(saved):
        return load_vocabulary(saved)
    if vocab_file:
        vocab = load_vocabulary(vocab_file)
    else:
        start = time.time()
        vocab = learn_wordpiece_vocabulary(texts(), vocab_size, lowercase)
        log(f"Learned a WordPiece vocabulary of {len(vocab)} tokens in "
            f"{time.time() - start:.1f}s.")
    if run_dir.is_chief:
        save_vocabulary(vocab, saved)
    return vocab


# --------------------------------------------------------------- strategy


def select_strategy(name, tpu=None):
    """Returns the `tf.distribute.Strategy` called `name`.

    - `one_device`: the first GPU, else the CPU.
    - `mirrored`: `MirroredStrategy` over all local GPUs, or over all logical
      CPU devices when there is no GPU (useful to test distribution).
    - `multi_worker`: `MultiWorkerMirroredStrategy`, cluster from `TF_CONFIG`.
    - `tpu`: `TPUStrategy` on the TPU named by `tpu`.
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
    if name == "multi_worker":
        return tf.distribute.MultiWorkerMirroredStrategy()
    if not tpu:
        raise ValueError(
            "Argument `--tpu` is required by `--strategy=tpu`: the TPU name, "
            "a grpc:// address, or 'local' on a TPU VM."
        )
    resolver = tf.distribute.cluster_resolver.TPUClusterResolver(tpu=tpu)
    tf.config.experimental_connect_to_cluster(resolver)
    tf.tpu.experimental.initialize_tpu_system(resolver)
    return tf.distribute.TPUStrategy(resolver)


def is_chief():
    """Whether this process writes the run directory (worker 0 / chief)."""
    config = json.loads(os.environ.get("TF_CONFIG", "{}") or "{}")
    task = config.get("task", {})
    kind = task.get("type", "chief")
    return kind == "chief" or (
        kind == "worker" and task.get("index", 0) == 0
        and "chief" not in config.get("cluster", {})
    )


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


def learning_rate_schedule(peak, total_steps, warmup_fraction=0.1):
    """Linear warmup to `peak`, then cosine decay to 0 over `total_steps`."""
    import keras

    warmup = int(total_steps * warmup_fraction)
    return keras.optimizers.schedules.CosineDecay(
        initial_learning_rate=0.0 if warmup else peak,
        decay_steps=max(1, total_steps - warmup),
        warmup_target=peak if warmup else None,
        warmup_steps=warmup,
    )


def ema_options(ema_momentum):
    """Optimizer keyword arguments for `--ema_momentum` (None: no EMA)."""
    if ema_momentum is None:
        return {}
    return {"use_ema": True, "ema_momentum": ema_momentum}


def finalize_weights(model):
    """Gives a restored, already finished run the weights `fit` ends with:
    the moving average under `--ema_momentum` (a no-op without it).

    `Model.fit` swaps the average in when it ends, but a run restarted
    after its last checkpoint skips `fit`, and checkpoints hold the raw
    weights (the average lives in the optimizer's state).
    """
    if model.optimizer is not None:
        model.optimizer.finalize_variable_values(model.trainable_variables)


def count_params(model):
    return int(sum(int(v.numpy().size) if hasattr(v, "numpy")
                   else int(v.size) for v in model.trainable_weights))


# ----------------------------------------------------------- run directory


TMP_PREFIX = ".tmp-"


def temporary_path(path):
    """A temporary name for `path` in the same folder (so that renaming it
    to `path` is atomic); it keeps `path`'s ending (e.g. `.weights.h5`)."""
    folder, name = os.path.split(os.path.abspath(path))
    return os.path.join(folder, f"{TMP_PREFIX}{os.getpid()}-{name}")


def atomic_write(path, write):
    """Calls `write(tmp)` to write a file or folder at a temporary name next
    to `path`, then renames it to `path`.

    A process killed (or an exception raised) while writing leaves `path`
    as it was: absent, or the previous complete version. A folder replaces
    the previous folder: the previous one is moved aside (to
    `_old_folder_path(path)`), the new one renamed to `path`, then the
    previous one removed. A process killed between those two renames
    leaves no `path` but a complete new folder, which
    `remove_temporary_files` renames to `path`; it removes every other
    leftover temporary name.
    """
    import shutil

    tmp = temporary_path(path)
    old = _old_folder_path(path)
    if os.path.isdir(tmp):
        shutil.rmtree(tmp)
    try:
        write(tmp)
        if os.path.isfile(tmp):
            with open(tmp, "rb") as f:
                os.fsync(f.fileno())
        if os.path.isdir(tmp) and os.path.isdir(path):
            # From here on `tmp` is complete: a restart keeps it.
            os.replace(path, old)
            os.replace(tmp, path)
            shutil.rmtree(old, ignore_errors=True)
        else:
            os.replace(tmp, path)
    except BaseException:
        if os.path.isdir(old) and not os.path.exists(path):
            os.replace(old, path)
        if os.path.isdir(tmp):
            shutil.rmtree(tmp, ignore_errors=True)
        elif os.path.exists(tmp):
            os.remove(tmp)
        raise
    return path


_OLD_PREFIX = f"{TMP_PREFIX}old-"


def _old_folder_path(path):
    """Where `atomic_write` moves the previous folder `path` aside."""
    folder, name = os.path.split(os.path.abspath(path))
    return os.path.join(folder, f"{_OLD_PREFIX}{os.getpid()}-{name}")


def _recover_replaced_folders(folder):
    """Finishes folder replacements that a kill interrupted between their
    two renames: the previous folder is aside and `name` is missing, so
    the new folder (complete: the previous one is moved aside only once the
    new one is written) becomes `name`, or, if it is gone, the previous
    folder comes back."""
    for entry in os.listdir(folder):
        if not entry.startswith(_OLD_PREFIX):
            continue
        pid, sep, name = entry[len(_OLD_PREFIX):].partition("-")
        if not (pid.isdigit() and sep and name):
            continue
        path = os.path.join(folder, name)
        new = os.path.join(folder, f"{TMP_PREFIX}{pid}-{name}")
        if os.path.exists(path):
            continue
        if os.path.isdir(new):
            os.replace(new, path)
        else:
            os.replace(os.path.join(folder, entry), path)


def remove_temporary_files(folder):
    """Removes what an interrupted `atomic_write` left in `folder`, after
    completing a folder replacement killed between its two renames."""
    import shutil

    if not os.path.isdir(folder):
        return []
    _recover_replaced_folders(folder)
    removed = []
    for name in os.listdir(folder):
        if name.startswith(TMP_PREFIX):
            path = os.path.join(folder, name)
            if os.path.isdir(path):
                shutil.rmtree(path, ignore_errors=True)
            else:
                os.remove(path)
            removed.append(path)
    return removed


def write_json(path, data):
    """Writes `data` as indented JSON, atomically (tmp file + rename)."""
    def write(tmp):
        with open(tmp, "w", encoding="utf-8") as f:
            json.dump(data, f, indent=2, sort_keys=False, default=str)
            f.write("\n")

    atomic_write(path, write)


def read_json(path):
    with open(path, encoding="utf-8") as f:
        return json.load(f)


class RunDirectory:
    """A run directory: configuration, checkpoints, logs and results.

    Layout:
        args.json            the run's arguments (checked on resume)
        vocab.txt            the vocabulary
        checkpoints/         `epoch-NNN.weights.h5` (model and optimizer)
                             and `state.json` (the last finished epoch)
        history.jsonl        one line of metrics per finished epoch
        logs/                TensorBoard
        results.json         the final results

    A run directory belongs to one configuration: starting it again with
    different arguments (other than `RUNTIME_FLAGS`) raises a ValueError
    naming the differences, instead of mixing two runs.

    Args:
        path: the directory (created).
        config: a dict of the run's arguments (`vars(args)`).
        runtime_flags: keys that may differ between starts.
    """

    def __init__(self, path, config, runtime_flags=RUNTIME_FLAGS):
        self.root = os.path.abspath(path)
        self.config = dict(config)
        self.runtime_flags = frozenset(runtime_flags)
        self.is_chief = is_chief()
        if not self.is_chief:
            # Other workers write to a scratch folder of their own.
            task = json.loads(os.environ["TF_CONFIG"])["task"]
            self.root = os.path.join(
                self.root, "workers", f"{task['type']}-{task['index']}"
            )
        os.makedirs(self.root, exist_ok=True)
        self.checkpoint_dir = self.path("checkpoints")
        self.log_dir = self.path("logs")
        self._check_config()
        # What a killed run was writing when it died is never loaded.
        remove_temporary_files(self.root)
        remove_temporary_files(self.checkpoint_dir)

    def path(self, *names):
        return os.path.join(self.root, *names)

    def _check_config(self):
        saved_path = self.path("args.json")
        if os.path.isfile(saved_path):
            saved = read_json(saved_path)
            keys = (set(saved) | set(self.config)) - self.runtime_flags
            differences = {
                k: (saved.get(k), self.config.get(k))
                for k in sorted(keys)
                if saved.get(k) != self.config.get(k)
            }
            if differences:
                listing = ", ".join(
                    f"--{k}: {old!r} there, {new!r} now"
                    for k, (old, new) in differences.items()
                )
                raise ValueError(
                    f"The run directory {self.root} holds a run with a "
                    f"different configuration ({listing}). Use another "
                    "--model_dir, or the same arguments to resume it."
                )
        else:
            write_json(saved_path, self.config)

    # ---------------------------------------------------------- checkpoints

    def last_epoch(self):
        """The number of finished epochs saved in `checkpoints/`, or 0."""
        state = os.path.join(self.checkpoint_dir, "state.json")
        if not os.path.isfile(state):
            return 0
        return int(read_json(state)["epoch"])

    def checkpoint_path(self, epoch):
        return os.path.join(self.checkpoint_dir, f"epoch-{epoch:03d}.weights.h5")

    def restore(self, model):
        """Loads the last checkpoint (weights and optimizer state) into
        `model` (compiled, built); returns the epoch to continue from."""
        epoch = self.last_epoch()
        self._truncate_history(epoch)
        if epoch:
            if model.optimizer is not None and not model.optimizer.built:
                model.optimizer.build(model.trainable_variables)
            model.load_weights(self.checkpoint_path(epoch))
        return epoch

    def history(self):
        """The per-epoch metrics of finished epochs (survives resumes)."""
        path = self.path("history.jsonl")
        if not os.path.isfile(path):
            return []
        with open(path, encoding="utf-8") as f:
            return [json.loads(line) for line in f if line.strip()]

    def _truncate_history(self, epoch):
        """Keeps one line per epoch up to `epoch` (the last checkpoint) in
        `history.jsonl`: a run killed after writing an epoch's line but
        before its checkpoint repeats that epoch, and its line must not
        appear twice. A half-written last line is dropped too."""
        path = self.path("history.jsonl")
        if not os.path.isfile(path):
            return
        records = {}
        with open(path, encoding="utf-8") as f:
            for line in f:
                try:
                    record = json.loads(line)
                except ValueError:
                    continue
                if isinstance(record, dict) and 1 <= record.get(
                        "epoch", 0) <= epoch:
                    records[record["epoch"]] = record
        lines = [json.dumps(records[k]) + "\n" for k in sorted(records)]

        def write(tmp):
            with open(tmp, "w", encoding="utf-8") as f:
                f.writelines(lines)

        atomic_write(path, write)

    def callbacks(self, tensorboard=True):
        """Keras callbacks: an epoch checkpoint and TensorBoard."""
        import keras

        callbacks = [_EpochCheckpoint(self)]
        if tensorboard:
            callbacks.append(keras.callbacks.TensorBoard(self.log_dir))
        return callbacks

    def write_results(self, results):
        path = self.path("results.json")
        write_json(path, results)
        return path


def _make_epoch_checkpoint_class():
    import keras

    class EpochCheckpoint(keras.callbacks.Callback):
        """Saves model + optimizer state and the epoch's logs every epoch."""

        def __init__(self, run_dir):
            super().__init__()
            self.run_dir = run_dir

        def on_epoch_end(self, epoch, logs=None):
            run_dir = self.run_dir
            os.makedirs(run_dir.checkpoint_dir, exist_ok=True)
            # Written at a temporary name, then renamed: a kill while
            # writing never leaves a half-written checkpoint; state.json
            # (written last, atomically) names the last complete one.
            atomic_write(run_dir.checkpoint_path(epoch + 1),
                         self.model.save_weights)
            record = {"epoch": epoch + 1}
            record.update({k: float(v) for k, v in (logs or {}).items()})
            with open(run_dir.path("history.jsonl"), "a",
                      encoding="utf-8") as f:
                f.write(json.dumps(record) + "\n")
            write_json(os.path.join(run_dir.checkpoint_dir, "state.json"),
                       {"epoch": epoch + 1})

    return EpochCheckpoint


def _EpochCheckpoint(run_dir):
    return _make_epoch_checkpoint_class()(run_dir)


def shuffled_epochs(dataset, buffer_size, batch_size, seed, epochs,
                    initial_epoch=0, drop_remainder=True):
    """Batches of `dataset` for epochs `initial_epoch .. epochs - 1`, one
    stream, each epoch shuffled with a seed derived from `(seed, epoch)`.

    A run resumed after epoch `k` thus sees exactly the batches an
    uninterrupted run sees in epochs `k + 1, ...` (with
    `reshuffle_each_iteration`, the order would instead depend on how many
    epochs this process has run). Pass `steps_per_epoch` (the number of
    batches per epoch) to `Model.fit`: the stream has no known length.
    """
    if not 0 <= initial_epoch <= epochs:
        raise ValueError(
            f"Expected 0 <= initial_epoch <= epochs. Received: "
            f"initial_epoch={initial_epoch}, epochs={epochs}")
    # All epochs done (killed before the results were written): no batches.
    stream = dataset.take(0).batch(batch_size, drop_remainder=drop_remainder)
    if initial_epoch < epochs:
        stream = None
    for epoch in range(initial_epoch, epochs):
        batches = dataset.shuffle(
            buffer_size, seed=(seed * 1000003 + epoch) % (2**31 - 1),
            reshuffle_each_iteration=False,
        ).batch(batch_size, drop_remainder=drop_remainder)
        stream = batches if stream is None else stream.concatenate(batches)
    return stream


def make_steps_timer():
    """A callback measuring training steps per second (excluding the work of
    callbacks that run after it at epoch end, e.g. evaluation)."""
    import keras

    class StepsTimer(keras.callbacks.Callback):
        def __init__(self):
            super().__init__()
            self.steps = 0
            self.seconds = 0.0
            self._start = None

        def on_epoch_begin(self, epoch, logs=None):
            self._start = time.perf_counter()
            self._epoch_steps = 0

        def on_train_batch_end(self, batch, logs=None):
            self._epoch_steps += 1

        def on_epoch_end(self, epoch, logs=None):
            self.seconds += time.perf_counter() - self._start
            self.steps += self._epoch_steps
            if logs is not None:
                logs["steps_per_second"] = self.steps_per_second

        @property
        def steps_per_second(self):
            return self.steps / self.seconds if self.seconds else 0.0

    return StepsTimer()


def make_time_budget_callback(minutes):
    """A callback that stops training after `minutes` (the epoch in
    progress ends early and is saved); `.stopped` tells whether it did."""
    import keras

    class TimeBudget(keras.callbacks.Callback):
        def __init__(self):
            super().__init__()
            self.start = None
            self.stopped = False

        def on_train_begin(self, logs=None):
            self.start = time.time()

        def on_train_batch_end(self, batch, logs=None):
            if time.time() - self.start > 60.0 * minutes:
                self.model.stop_training = True
                self.stopped = True

    return TimeBudget()


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


def canonical_synthesizer(flag, value):
    """`--flag=value` as `SynthesizerAttention` spells variants (`"a+b"`).

    Raises:
        ValueError: naming the flag, for an unknown variant.
    """
    from keras_synth.layers.synthesizer_attention import parse_synthesizer

    try:
        return "+".join(parse_synthesizer(value))
    except ValueError as error:
        raise ValueError(f"Argument `--{flag}`: {error}") from None


def run_main(parser, run, prog, argv=None, input_paths=()):
    """Parses `argv` and calls `run(args)`; returns the exit status.

    Before TensorFlow is imported, the flags named in `input_paths` are
    checked (a missing file or folder is reported at once). TensorFlow's
    logs and Python warnings are hidden during the run unless `--tf_logs`
    is given. A `ValueError` (bad arguments, `DataError`) or `RuntimeError`
    prints one line `prog: error: ...` and returns 2 (set
    `RECIPES_TRACEBACK=1` for the traceback).
    """
    from recipes import cli

    args = parser.parse_args(argv)
    try:
        cli.check_input_paths(args, input_paths)
        require_tensorflow_backend()
        with cli.quiet_tensorflow(not getattr(args, "tf_logs", False)):
            run(args)
    except (ValueError, RuntimeError) as error:
        if os.environ.get("RECIPES_TRACEBACK"):
            raise
        print(f"{prog}: error: {error}", file=sys.stderr)
        return 2
    return 0


__all__ = [
    "DataError", "RunDirectory", "add_common_flags", "add_time_budget_flag", "atomic_write",
    "remove_temporary_files", "shuffled_epochs", "canonical_synthesizer",
    "check_data_file", "run_main",
    "configure_precision", "count_params", "learn_wordpiece_vocabulary",
    "learning_rate_schedule", "load_vocabulary", "make_steps_timer",
    "make_time_budget_callback", "prepare_vocabulary",
    "require_tensorflow_backend", "save_vocabulary",
    "select_strategy", "wordpiece_tokenizer", "write_json",
]
