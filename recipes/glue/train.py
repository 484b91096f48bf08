"""`python -m recipes.glue`: train and evaluate a Synthesizer encoder on GLUE.

Examples:

    # The built-in task, offline, a few minutes on 2 CPU cores:
    python -m recipes.glue --task=builtin --synthesizer=random+vanilla

    # GLUE's TSV files, two GPUs:
    python -m recipes.glue --task=sst2 --data_dir=glue_data \
        --synthesizer=dense --strategy=mirrored --mixed_precision=bfloat16
"""

import os
import time

from recipes import cli
from recipes.core import flags
from recipes.core import run_directory
from recipes.core import runtime
from recipes.core import training
from recipes.core import vocabulary
from recipes.glue import metrics as metrics_lib
from recipes.glue import tasks as tasks_lib

PROG = "python -m recipes.glue"


def build_parser():
    parser = cli.ArgumentParser(
        prog=PROG,
        description="Train and evaluate a Transformer encoder made of "
        "SynthesizerEncoder blocks on a GLUE task.",
        formatter_class=cli.HelpFormatter,
    )
    group = parser.add_argument_group("task and data")
    group.add_argument(
        "--task", required=True,
        help="One of " + ", ".join(tasks_lib.TASKS) + " ('builtin' is a "
        "tiny sentiment task shipped with the package, for offline runs).")
    group.add_argument(
        "--data_dir", default=None,
        help="GLUE's TSV files (the GLUE root holding SST-2/, MNLI/, ... or "
        "the task's folder). Without it: tensorflow_datasets glue/<task> "
        "(needs a download).")
    group.add_argument("--tfds_data_dir", default=None,
                       help="data_dir of tensorflow_datasets (default: "
                       "its own, ~/tensorflow_datasets).")
    group.add_argument("--max_train_examples", type=int, default=None,
                       help="Use only the first N training examples "
                       "(default: all).")
    group = parser.add_argument_group("model")
    group.add_argument(
        "--synthesizer", default="random+vanilla",
        help="Attention variant: vanilla, dense, random, fixed_random, "
        "factorized_dense, factorized_random, or a mixture such as "
        "random+vanilla.")
    group.add_argument("--max_length", type=int, default=128,
                       help="Packed sequence length (the synthesizers' "
                       "max_length).")
    group.add_argument("--num_layers", type=int, default=2,
                       help="SynthesizerEncoder blocks.")
    group.add_argument("--hidden_dim", type=int, default=128,
                       help="Model width (embeddings and blocks).")
    group.add_argument("--num_heads", type=int, default=4,
                       help="Attention heads per block.")
    group.add_argument("--intermediate_dim", type=int, default=None,
                       help="Feedforward width (default: 4 x "
                       "--hidden_dim).")
    group.add_argument("--dropout", type=float, default=0.1,
                       help="Dropout rate of the embeddings, attention, "
                       "feedforward and head.")
    group.add_argument("--token_dropout", type=float, default=0.0,
                       help="Word dropout: the probability that a training "
                       "token is left out of attention and pooling.")
    group.add_argument("--pooling", choices=("mean", "cls"), default="mean",
                       help="Sentence vector: mean of the unpadded tokens, "
                       "or the [CLS] token.")
    group.add_argument("--factorized_rank", type=int, default=8,
                       help="Rank of factorized_random (the paper's r).")
    group.add_argument(
        "--pad_to_max_length", action="store_true",
        help="Pad every batch to --max_length (static shapes; always on "
        "with --strategy=tpu). By default batches are cut to their longest "
        "sequence.")
    group.add_argument("--no_lowercase", dest="lowercase",
                       action="store_false",
                       help="Keep case in the WordPiece tokenizer (by "
                       "default text is lowercased).")
    flags.add_common_flags(parser,
                            model_dir_default="runs/glue/<task>-<variant>")
    group = parser.add_argument_group("outputs")
    group.add_argument("--no_export", dest="export", action="store_false",
                       help="Skip the SavedModel export (by default it is "
                       "written to <model_dir>/export).")
    group.add_argument("--no_tensorboard", dest="tensorboard",
                       action="store_false",
                       help="Skip the TensorBoard logs (by default written "
                       "to <model_dir>/logs).")
    return parser


def validate_args(args):
    """Canonicalises `args` in place; ValueError on bad values."""
    task = tasks_lib.get_task(args.task)
    args.task = task.name
    args.synthesizer = flags.canonical_synthesizer("synthesizer",
                                                    args.synthesizer)
    for name in ("max_length", "num_layers", "hidden_dim", "num_heads",
                 "batch_size", "epochs", "learning_rate", "vocab_size",
                 "factorized_rank"):
        flags.positive(name, getattr(args, name))
    if args.max_length < 4 + task.num_segments:
        raise ValueError(f"Argument `--max_length`={args.max_length} is too "
                         "short to pack a sentence.")
    if args.max_train_examples is not None:
        flags.positive("max_train_examples", args.max_train_examples)
    flags.check_ema_momentum(args.ema_momentum)
    for name in ("dropout", "token_dropout"):
        if not 0.0 <= getattr(args, name) < 1.0:
            raise ValueError(f"Argument `--{name}` must be in [0, 1). "
                             f"Received: --{name}={getattr(args, name)}")
    if args.model_dir is None:
        args.model_dir = os.path.join(
            "runs", "glue", f"{task.name}-{args.synthesizer.replace('+', '_')}"
        )
    return task


def _eval_callback(task, eval_data, log):
    import keras

    from recipes.glue.model import predictions_from_outputs

    class TaskMetrics(keras.callbacks.Callback):
        """Adds the task's official dev metrics to each epoch's logs."""

        def on_epoch_end(self, epoch, logs=None):
            for split, (dataset, labels) in eval_data.items():
                outputs = self.model.predict(dataset, verbose=0)
                values = metrics_lib.compute_metrics(
                    task, labels, predictions_from_outputs(task, outputs)
                )
                for name, value in values.items():
                    if logs is not None:
                        logs[f"{split}_{name}"] = value

    return TaskMetrics()


def run(args, log=print):
    """Runs the recipe for parsed `args`; returns the results dict."""
    wall_start = time.time()
    runtime.require_tensorflow_backend()
    task = validate_args(args)
    from recipes.glue import loading

    config = dict(vars(args))
    # First, before TensorFlow runs any op (multi-worker, TPU).
    strategy = runtime.select_strategy(args.strategy, args.tpu,
                                       args.cluster_timeout)
    train, evals, tests = loading.load_task_data(
        task, args.data_dir, args.tfds_data_dir
    )
    run_dir = run_directory.RunDirectory(args.model_dir, config)
    log(f"Run directory: {run_dir.root}")
    train = loading.subsample(train, args.max_train_examples)
    log(f"Task {task.name} ({task.description}): {len(train)} training "
        "examples, " + ", ".join(f"{k} {len(v)}" for k, v in evals.items())
        + (", " + ", ".join(f"{k} {len(v)}" for k, v in tests.items())
           if tests else ", no test split"))
    if len(train) < args.batch_size:
        raise ValueError(
            f"Argument `--batch_size`={args.batch_size} exceeds the "
            f"{len(train)} training examples."
        )

    import keras

    from recipes.glue import export as export_lib
    from recipes.glue import model as model_lib

    keras.utils.set_random_seed(args.seed)
    policy = runtime.configure_precision(args.mixed_precision)

    def prepare():  # the chief's vocabulary and backup, for every worker
        vocab = vocabulary.prepare_vocabulary(
            run_dir,
            lambda: [text for example in train.texts for text in example],
            vocab_file=args.vocab_file,
            vocab_size=args.vocab_size,
            lowercase=args.lowercase,
            log=log,
        )
        return vocab, run_dir.resume()

    vocab, initial_epoch = runtime.chief_first(strategy, prepare)
    log(f"Strategy: {type(strategy).__name__} with "
        f"{strategy.num_replicas_in_sync} replica(s); dtype policy {policy}.")

    preprocessor = model_lib.make_preprocessor(vocab, args.max_length,
                                               args.lowercase)
    trim = not (args.pad_to_max_length or args.strategy == "tpu")
    train_ds = model_lib.make_dataset(
        train, preprocessor, args.batch_size, task, shuffle=True,
        seed=args.seed, drop_remainder=True, trim=trim,
        epochs=args.epochs, initial_epoch=initial_epoch,
        token_dropout=args.token_dropout,
    )
    eval_data = {
        split: (model_lib.make_dataset(data, preprocessor, args.batch_size,
                                       task, labeled=False, trim=trim),
                data.labels)
        for split, data in evals.items()
    }
    steps_per_epoch = len(train) // args.batch_size

    with strategy.scope():
        model, probe = model_lib.build_model(
            vocab_size=len(vocab),
            num_classes=task.num_classes,
            num_segments=task.num_segments,
            sequence_length=args.max_length,
            synthesizer=args.synthesizer,
            hidden_dim=args.hidden_dim,
            num_layers=args.num_layers,
            num_heads=args.num_heads,
            intermediate_dim=args.intermediate_dim,
            dropout=args.dropout,
            pooling=args.pooling,
            **({"factorized_rank": args.factorized_rank}
               if "factorized_random" in args.synthesizer else {}),
        )
        model_lib.compile_model(
            model, task, args.learning_rate, steps_per_epoch * args.epochs,
            warmup_fraction=args.warmup_fraction,
            weight_decay=args.weight_decay, jit_compile=args.jit_compile,
            ema_momentum=args.ema_momentum,
        )
    parameters = training.count_params(model)
    log(f"Model: SynthesizerTextClassifier, {args.num_layers} x "
        "SynthesizerEncoder("
        f"{args.synthesizer!r}), width {args.hidden_dim}, {args.num_heads} "
        f"heads, max_length {args.max_length}: {parameters:,} trainable "
        "parameters.")
    if initial_epoch:
        log(f"Resuming after epoch {initial_epoch} from {run_dir.backup_dir}.")

    timer = training.make_steps_timer()
    callbacks = [timer, _eval_callback(task, eval_data, log)]
    callbacks += run_dir.callbacks(tensorboard=args.tensorboard)
    train_start = time.time()
    if initial_epoch < args.epochs:  # else killed before results.json
        # The backup callback restores the weights, the optimizer and the
        # epoch; the data stream starts at that epoch.
        model.fit(
            train_ds,
            epochs=args.epochs,
            initial_epoch=initial_epoch,
            steps_per_epoch=steps_per_epoch,
            callbacks=callbacks,
            verbose=args.verbose,
            shuffle=False,  # shuffled per epoch (seeded) by tf.data
        )
    else:
        run_dir.restore(model)
        training.finalize_weights(model)
    train_time = time.time() - train_start

    # Final evaluation.
    results_metrics = {}
    for split, (dataset, labels) in eval_data.items():
        outputs = model.predict(dataset, verbose=0)
        predictions = model_lib.predictions_from_outputs(task, outputs)
        results_metrics[split] = metrics_lib.compute_metrics(
            task, labels, predictions
        )
    summary = "; ".join(
        f"{split} " + ", ".join(f"{k}={v:.4f}" for k, v in values.items())
        for split, values in results_metrics.items()
    )
    log(f"Evaluation: {summary}")

    submissions = {}
    from recipes.glue import tsv

    for split, data in tests.items():
        # Every worker predicts (the predictions are gathered over the
        # workers), the chief writes.
        dataset = model_lib.make_dataset(
            data, preprocessor, args.batch_size, task, labeled=False,
            trim=trim)
        predictions = model_lib.predictions_from_outputs(
            task, model.predict(dataset, verbose=0))
        if run_dir.is_chief:
            filename = task.test_splits[split][2]
            path = run_dir.path("submission", filename)
            tsv.write_submission(path, task, data.ids, predictions)
            submissions[split] = path

    # Attention maps of the first evaluation example.
    first_split = next(iter(evals))
    example = evals[first_split]
    example_inputs = model_lib.pack(preprocessor, tuple(
        [example.texts[0][i]] for i in range(task.num_segments)))
    scores = [s[0] for s in probe(example_inputs)]
    n = int(example_inputs["padding_mask"].numpy()[0].sum())
    tokens = model_lib.tokens(preprocessor,
                              example_inputs["token_ids"].numpy()[0][:n])
    plot_path = None
    if run_dir.is_chief:
        plot_path = export_lib.plot_attention(
            run_dir.path("attention.png"), scores, tokens,
            title=f"{task.name} / {args.synthesizer}: "
            + " | ".join(example.texts[0])[:120],
            caption=export_lib.example_caption(
                task, example.labels[0],
                model(example_inputs, training=False)),
        )

    export_path = None
    if args.export and run_dir.is_chief:
        export_path = export_lib.export_saved_model(
            run_dir.path("export"), model, preprocessor, task
        )
        log(f"Exported a SavedModel (raw strings in) to {export_path}")
    preset_path = None
    if run_dir.is_chief:
        preset_path = export_lib.save_preset(run_dir.path("preset"), model,
                                             preprocessor)
        log(f"Saved a keras-hub preset to {preset_path}")

    history = run_dir.history()
    results = {
        "task": task.name,
        "synthesizer": args.synthesizer,
        "main_metric": task.main_metric,
        "metrics": results_metrics,
        "parameters": parameters,
        "parameters_total": int(model.count_params()),
        "steps_per_second": (timer.steps_per_second if timer.steps
                             else (history[-1].get("steps_per_second")
                                   if history else None)),
        "train_steps": steps_per_epoch * args.epochs,
        "optimizer_steps": int(keras.ops.convert_to_numpy(
            model.optimizer.iterations)),
        "epochs": args.epochs,
        "resumed_from_epoch": initial_epoch,
        "train_time_s": train_time,
        "wall_time_s": time.time() - wall_start,
        "num_replicas": strategy.num_replicas_in_sync,
        "history": history,
        "submissions": submissions,
        "attention_png": plot_path,
        "export": export_path,
        "export_usage": (export_lib.export_usage(export_path, task)
                         if export_path else None),
        "preset": preset_path,
        "args": config,
        "environment": runtime.environment(),
    }
    if run_dir.is_chief:
        path = run_dir.write_results(results)
        log(f"Results: {path}")
    return results


def main(argv=None):
    """Command-line entry point; returns the exit status (2 on bad input,
    with one line `python -m recipes.glue: error: ...`)."""
    return runtime.run_main(build_parser(), run, PROG, argv,
                           input_paths=("data_dir", "vocab_file"))
