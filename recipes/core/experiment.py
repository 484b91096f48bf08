"""The fit-evaluate-export skeleton every recipe's `run()` ends with.

A recipe prepares its data, then hands `train_and_evaluate` its own pieces:
how to build and compile the model, the training dataset, how to evaluate
and how to export. The skeleton builds the model under the strategy's
scope, trains with the shared callbacks (`callbacks.assemble_callbacks`:
the run directory's checkpoint resumes an interrupted run), evaluates on
every worker, exports on the chief, and writes `results.json`.
"""

import contextlib
import time

from recipes.core import callbacks
from recipes.core import devices
from recipes.core import run_directory
from recipes.core import runtime
from recipes.core import training
from recipes.core import workers


def open_run(args, validate, load, runtime_flags=run_directory.RUNTIME_FLAGS,
             log=print, added_flags=None):
    """How every recipe's `run()` starts: checks `args` (`validate(args)`, which may canonicalise them), creates
    the strategy (`runtime.setup`: first, before the backend runs any op,
    as multi-worker and TPU strategies need; it selects the backend), reads the data
    (`load(checked)`, with what `validate` returned, before anything is
    written), then opens the run directory `--model_dir` for this
    configuration (refusing one that holds another; `runtime_flags` may
    differ; `added_flags`, `{flag: value}`, are read as `value` in a
    configuration saved before they existed).

    Returns:
        `(data, run_dir, strategy)`: what `load` returned, the
        `RunDirectory` and the `tf.distribute.Strategy` (on JAX and
        PyTorch its stand-in, `compute.BackendStrategy`).
    """
    checked = validate(args)
    config = dict(vars(args))
    strategy = runtime.setup(args, log)
    workers.check_batch_size(args.batch_size)
    data = load(checked)
    run_dir = run_directory.RunDirectory(args.model_dir, config,
                                         runtime_flags=runtime_flags,
                                         added_flags=added_flags)
    log(f"Run directory: {run_dir.root}")
    return data, run_dir, strategy


def train_and_evaluate(args, run_dir, strategy, build, train_data,
                       steps_per_epoch, evaluate, export=None, describe=None,
                       extra_callbacks=(), fit_options=None, fit_context=None,
                       wall_start=None, log=print):
    """Trains, evaluates and exports a model; returns the results dict.

    Args:
        args: the parsed arguments (`epochs`, `verbose`, `tensorboard`,
            `export`, and `time_budget_minutes` where the recipe has it).
        run_dir: the `RunDirectory` (backup, history, results).
        strategy: the `tf.distribute.Strategy` to build the model under.
        build: `() -> model`, builds and compiles the model (called under
            `strategy.scope()`).
        train_data: the training dataset for `Model.fit`: the epochs from
            `run_dir.resume()` on (after the recipe's `workers.chief_first`,
            in a multi-worker run).
        steps_per_epoch: int, batches per epoch.
        evaluate: `(model, run) -> dict`, the task's results (metrics,
            samples, ...); called on every worker once training is done
            (a multi-worker `predict` gathers over the workers), with `run`
            the run's own entries of the results (`steps_per_second`,
            `history`, ...).
        export: `(model) -> dict` or None, exports on the chief (SavedModel,
            preset, plots; no `predict`, which would wait for the other
            workers) and returns what `results.json` records of it.
        describe: `(parameters) -> str` or None, the log line about the
            model (given its number of trainable parameters).
        extra_callbacks: the recipe's own callbacks (e.g. per-epoch
            evaluation), run before the checkpoint records an epoch's logs.
        fit_options: more `Model.fit` keyword arguments (e.g.
            `validation_data`).
        fit_context: `(model) -> context manager` or None, entered around
            `Model.fit`.
        wall_start: `time.time()` when the run started (default: now).
        log: a `print`-like function.

    Returns:
        The results: `evaluate`'s and `export`'s entries, then the run's
        (parameters, speed, epochs, history, arguments, environment).
    """
    import keras

    wall_start = time.time() if wall_start is None else wall_start
    with strategy.scope():
        model = build()
    # Where the backup is (the recipe's `train_data` starts there too);
    # The checkpoint callback loads it when `fit` starts.
    initial_epoch = run_dir.resume()
    parameters = training.count_params(model)
    if describe is not None:
        log(describe(parameters))
    if initial_epoch:
        log(f"Resuming after epoch {initial_epoch} from "
            f"{run_dir.backup_dir}.")

    fit_callbacks, timer, budget = callbacks.assemble_callbacks(
        run_dir, tensorboard=args.tensorboard,
        time_budget_minutes=getattr(args, "time_budget_minutes", None),
        extra=extra_callbacks)
    train_start = time.time()
    if initial_epoch < args.epochs:  # else killed before results.json
        context = (fit_context(model) if fit_context
                   else contextlib.nullcontext())
        with context:
            model.fit(workers.local_batches(train_data), epochs=args.epochs,
                      initial_epoch=initial_epoch,
                      steps_per_epoch=steps_per_epoch, callbacks=fit_callbacks,
                      verbose=args.verbose,
                      shuffle=False,  # shuffled per epoch (seeded) by tf.data
                      **(fit_options or {}))
    else:
        run_dir.restore(model)
        training.finalize_weights(model)
    train_time = time.time() - train_start
    history = run_dir.history()
    run = {
        "parameters": parameters,
        "parameters_total": int(model.count_params()),
        "steps_per_second": (timer.steps_per_second if timer.steps else (
            history[-1].get("steps_per_second") if history else None)),
        "steps_per_epoch": steps_per_epoch,
        "steps_per_execution": int(model.steps_per_execution),
        "train_steps": steps_per_epoch * args.epochs,
        "optimizer_steps": int(keras.ops.convert_to_numpy(
            model.optimizer.iterations)),
        "epochs": args.epochs,
        "resumed_from_epoch": initial_epoch,
        "train_time_s": train_time,
        "num_replicas": strategy.num_replicas_in_sync,
        "history": history,
    }
    if hasattr(args, "time_budget_minutes"):
        run["stopped_by_time_budget"] = bool(budget and budget.stopped)

    # Several JAX processes: evaluated and exported by a local copy.
    with workers.local_model(model) as local:
        results = dict(evaluate(local, run))
        if run_dir.is_chief and export is not None:
            results.update(export(local))
    results.update(run)
    results.update({
        "wall_time_s": time.time() - wall_start,
        "args": dict(run_dir.config),
        "environment": devices.environment(),
    })
    if run_dir.is_chief:
        path = run_dir.write_results(results)
        log(f"Results: {path}")
    return results


def saved_model_export(args, run_dir, export_saved_model, export_usage,
                       what, log=print):
    """An `export` for `train_and_evaluate`: with `--export`, writes the
    SavedModel at `<model_dir>/export` with `export_saved_model(path,
    model)` and records its path and `export_usage(path)`.

    On a backend that cannot write it (`serving.saved_model_unsupported`:
    JAX, PyTorch) one log line says so, and the `.keras` model is saved at
    `<model_dir>/model.keras` instead (`keras_model`, `export_skipped`),
    with the SavedModel of the token-id model at
    `<model_dir>/export_token_ids` where Keras can write it (JAX;
    `serving.token_ids_export`).

    Args:
        what: how the log line describes the export (its signature).
    """
    from recipes import serving

    def export(model):
        if not args.export:
            return {"export": None, "export_usage": None}
        skipped = serving.saved_model_unsupported(what)
        if skipped:
            log(skipped)
            path = serving.save_keras_model(run_dir.path("model.keras"),
                                            model)
            log(f"Saved the model to {path}")
            return {"export": None, "export_usage": None,
                    "export_skipped": skipped, "keras_model": path,
                    **serving.token_ids_export(
                        run_dir.path("export_token_ids"), model, log)}
        path = export_saved_model(run_dir.path("export"), model)
        log(f"Exported a SavedModel ({what}) to {path}")
        return {"export": path, "export_usage": export_usage(path)}

    return export
