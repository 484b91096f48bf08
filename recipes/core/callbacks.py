"""The Keras callbacks a recipe trains with (`assemble_callbacks`): the
clocks (`recipes.core.timing`), the run directory's checkpoint
(`recipes.core.run_directory`: versioned, chief-only) and TensorBoard.

The checkpoint also holds what Keras' weights files leave out: the
model's `SeedGenerator` states (dropout's); and on PyTorch every epoch's
first step seeds the global generator from the run's seed and the epoch
(`reseed_torch`): a resumed run draws the dropout masks of an
uninterrupted one.

Importing this module needs no TensorFlow or Keras: the callbacks are
built when `run_callbacks` is called.
"""

import re

from recipes.core import timing
from recipes.core import workers


def _seed_variables(model):
    """The model's `SeedGenerator` states, in order: what
    `model.variables` holds beyond `model.weights`."""
    weights = {id(w) for w in model.weights}
    return [v for v in model.variables if id(v) not in weights]


def seed_states(model):
    """`{"paths": [...], "states": [[int, int], ...]}`: the current state
    of every `SeedGenerator` of `model` (each a dropout layer's; Keras'
    weights files hold none), in `model.variables`' order."""
    import keras

    variables = _seed_variables(model)
    return {"paths": [v.path for v in variables],
            "states": [keras.ops.convert_to_numpy(v.value).tolist()
                       for v in variables]}


def reseed_torch(base_seed, epoch):
    """Seeds PyTorch's global generators for `epoch` from `base_seed`.

    Keras' PyTorch dropout draws an unseeded layer's masks from the global
    generator, which more than training advances (a PyTorch data loader
    draws a seed for every iterator: an evaluation's `predict`, a resumed
    run's new iterator); seeded at every epoch's first step from
    `(base_seed, epoch)`, an epoch draws the same masks in a resumed run
    as in an uninterrupted one."""
    import torch

    torch.manual_seed((base_seed * 1_000_003 + epoch) % (2 ** 63))


def _structure(paths):
    """The paths without Keras' uniquifying suffixes (`seed_generator_4`
    -> `seed_generator`): a model built again in the same process has the
    same structure under other numbers."""
    return [re.sub(r"_\d+(?=/|$)", "", path) for path in paths]


def restore_seed_states(model, saved):
    """Assigns `saved` (`seed_states` of a model built the same way) to
    `model`'s `SeedGenerator`s, in order.

    Raises:
        ValueError: the paths differ (another model).
    """
    import numpy as np

    variables = _seed_variables(model)
    paths = [v.path for v in variables]
    if _structure(paths) != _structure(saved["paths"]):
        raise ValueError(
            "The backup's seed states belong to another model: its "
            f"SeedGenerators are {saved['paths']}, this model's {paths}.")
    for v, state in zip(variables, saved["states"]):
        v.assign(np.asarray(state, dtype=v.dtype))


def save_weights(model, path):
    """`model.save_weights(path)` (model and optimizer), by one process
    alone: with several JAX processes, outside the distribution, whose
    variables JAX checks with the other processes."""
    with workers.without_distribution():
        model.save_weights(path)


def load_weights(model, path):
    """`model.load_weights(path)`, the optimizer's variables built first
    (as Keras' BackupAndRestore does) so that its state is restored."""
    if model.optimizer is not None and not model.optimizer.built:
        model.optimizer.build(model.trainable_variables)
    model.load_weights(path)


def _make_checkpoint_class():
    import keras

    class Checkpoint(keras.callbacks.Callback):
        """Restores the run directory's latest checkpoint when `fit`
        starts and writes one at every epoch end (the chief; other
        workers only restore), with the epoch's logs appended to the
        history.

        Kept after training: a run killed after its last epoch but before
        its results restarts without training and finds the final
        weights.
        """

        def __init__(self, run_dir):
            super().__init__()
            self.run_dir = run_dir

        def on_train_begin(self, logs=None):
            epoch = self.run_dir.load_checkpoint(self.model)
            if epoch:  # `fit` goes on from there, as after Keras' own
                self.model._initial_epoch = epoch  # BackupAndRestore
            self.rows = self.run_dir.history()
            self.torch_seed = self.reseed_epoch = None
            if keras.backend.backend() == "torch":
                import torch

                # The run's seed (`keras.utils.set_random_seed`), read
                # before the first reseeding.
                self.torch_seed = torch.initial_seed()

        def on_epoch_begin(self, epoch, logs=None):
            self.reseed_epoch = epoch

        def on_train_batch_begin(self, batch, logs=None):
            # At the first step, once the epoch's data iterator exists (a
            # resumed run creates one where an uninterrupted one goes on).
            if self.torch_seed is not None and self.reseed_epoch is not None:
                reseed_torch(self.torch_seed, self.reseed_epoch)
                self.reseed_epoch = None

        def on_epoch_end(self, epoch, logs=None):
            row = {"epoch": epoch + 1}
            for key, value in (logs or {}).items():
                try:
                    row[key] = float(keras.ops.convert_to_numpy(value))
                except (TypeError, ValueError):
                    continue  # not a number: not a history column
            self.rows = [r for r in self.rows if r["epoch"] <= epoch] + [row]
            self.run_dir.save_checkpoint(self.model, epoch + 1, self.rows)

    return Checkpoint


def checkpoint(run_dir):
    """The callback that restores and writes `run_dir`'s checkpoints."""
    return _make_checkpoint_class()(run_dir)


def run_callbacks(run_dir, tensorboard=True):
    """The callbacks every recipe trains with, in this order (put callbacks
    that add to an epoch's logs before them): TensorBoard into
    `run_dir.log_dir` unless `tensorboard` is False (chief only), then the
    checkpoint, last so that a checkpoint's history has every metric."""
    import keras

    found = []
    if run_dir.is_chief and tensorboard:
        found.append(keras.callbacks.TensorBoard(run_dir.log_dir))
    return found + [checkpoint(run_dir)]


def assemble_callbacks(run_dir, tensorboard=True, time_budget_minutes=None,
                       extra=()):
    """Every callback a recipe's `Model.fit` gets, in order: the steps
    timer (it adds `steps_per_second` to the epoch's logs), the recipe's
    `extra` callbacks (e.g. per-epoch evaluation, adding their metrics),
    then the run directory's (`run_callbacks`:
    history, TensorBoard, backup, which record the logs), then the time
    budget.

    The timer and the budget read no tensor and have no
    `on_train_batch_end`; they count steps and read the clock once per
    call of the compiled step. (On the TensorFlow backend Keras itself
    reads each call's logs before its batch hooks: it dispatches them
    asynchronously only on thread-safe backends. `--steps_per_execution`
    is what spreads that host round trip over several steps.)

    Returns:
        `(callbacks, timer, budget)`; `budget` is None without
        `time_budget_minutes`.
    """
    timer = timing.make_steps_timer()
    callbacks = [timer, *extra, *run_dir.callbacks(tensorboard)]
    budget = None
    if time_budget_minutes:
        budget = timing.make_time_budget_callback(time_budget_minutes)
        callbacks.append(budget)
    return callbacks, timer, budget
