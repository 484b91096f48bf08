"""`python -m recipes.glue`: train and evaluate a Synthesizer encoder on GLUE
(and SuperGLUE's classification tasks).

Examples:

    # The built-in task, offline, a few minutes on 2 CPU cores:
    python -m recipes.glue --task=builtin --synthesizer=random+vanilla

    # GLUE's TSV files, two GPUs:
    python -m recipes.glue --task=sst2 --data_dir=glue_data \
        --synthesizer=dense --strategy=mirrored --mixed_precision=bfloat16

    # SuperGLUE's released JSONL files (BoolQ/train.jsonl, val.jsonl, ...):
    python -m recipes.glue --task=boolq --data_dir=superglue_data

    # Fine-tune a pretrained backbone (recipes.pretrain's preset):
    python -m recipes.glue --task=sst2 --data_dir=glue_data \
        --preset=runs/pretrain/mlm-files-random_vanilla/preset
"""

import os
import time

from recipes import cli
from recipes.core import data_files
from recipes.core import experiment
from recipes.core import flags
from recipes.core import model_flags
from recipes.core import presets
from recipes.core import runtime
from recipes.core import vocabulary
from recipes.core import workers
from recipes.glue import metrics as metrics_lib
from recipes.glue import tasks as tasks_lib

PROG = "python -m recipes.glue"
# The architecture flags: a preset decides them (`presets.resolve_flags`);
# these are their defaults without one.
MODEL_DEFAULTS = {"synthesizer": "random+vanilla", "num_layers": 2,
                  "hidden_dim": 128, "num_heads": 4, "intermediate_dim": None,
                  "synthesizer_options": None, "max_length": 128,
                  "vocab_size": 8000, "lowercase": True, "pooling": "mean"}
PRESET_BACKBONES = ("SynthesizerBackbone",)
# Defaults that depend on --lora_rank: (full fine-tuning, LoRA), from the
# SST-2 sweep of docs/lora_quantization.md (its targets:
# `model.LORA_EXTRA_TARGETS`).
LORA_DEFAULTS = {"learning_rate": (1e-3, 5e-3), "dropout": (0.1, 0.0)}


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
        help="GLUE: " + ", ".join(tasks_lib.GLUE_TASKS) + "; SuperGLUE: "
        + ", ".join(tasks_lib.SUPERGLUE_TASKS) + " (SuperGLUE's RTE is "
        "superglue_rte); 'builtin' is a tiny sentiment task shipped with the "
        "package, for offline runs.")
    group.add_argument(
        "--data_dir", default=None,
        help="GLUE's TSV files (the GLUE root holding SST-2/, MNLI/, ... or "
        "the task's folder; local or gs://...), or for a SuperGLUE task its "
        "JSONL files (the root holding BoolQ/, CB/, ... or the task's "
        "folder: train.jsonl, val.jsonl, test.jsonl). Without it: "
        "tensorflow_datasets glue/<task> or super_glue/<task> (needs a "
        "download).")
    data_files.add_tfds_data_dir_flag(group)
    group.add_argument("--max_train_examples", type=flags.positive_int,
                       default=None,
                       help="Use only the first N training examples "
                       "(default: all).")
    group = parser.add_argument_group("model")
    model_flags.add_model_flags(
        group, num_layers=2, hidden_dim=128,
        layers_help="SynthesizerEncoder blocks.",
        dropout_help="Dropout rate of the embeddings, attention, feedforward "
        "layers and classification head.")
    group.add_argument("--max_length", type=flags.positive_int, default=128,
                       help="Packed sequence length (the synthesizers' "
                       "max_length).")
    group.add_argument("--token_dropout", type=float, default=0.0,
                       help="Word dropout: the probability that a training "
                       "token is left out of attention and pooling.")
    group.add_argument("--pooling", choices=("mean", "cls"), default="mean",
                       help="Sentence vector: mean of the unpadded tokens, "
                       "or the [CLS] token.")
    group.add_argument(
        "--pad_to_max_length", action="store_true",
        help="Pad every batch to --max_length (static shapes; always on "
        "with --jit_compile and --strategy=tpu). By default batches are cut "
        "to their longest sequence.")
    group.add_argument("--no_lowercase", dest="lowercase",
                       action="store_false",
                       help="Keep case in the WordPiece tokenizer (by "
                       "default text is lowercased).")
    group.add_argument(
        "--preset", default=None,
        help="Fine-tune from a keras-hub preset folder holding a "
        "SynthesizerBackbone (recipes.pretrain's <model_dir>/preset, a "
        "SynthesizerMaskedLM or SynthesizerTextClassifier preset): its "
        "backbone weights, WordPiece vocabulary and architecture (a model "
        "flag that contradicts it is an error); the head is new. "
        "--max_length may be shorter than the preset's.")
    group.add_argument(
        "--lora_rank", type=flags.positive_int, default=None,
        help="Fine-tune the preset's backbone with LoRA of this rank "
        "(keras-hub's `backbone.enable_lora`): its weights are frozen and "
        "low-rank adapters train on the layers it names for its "
        "synthesizer (value and output projections, vanilla query/key, the "
        "dense synthesizer's kernels, the random logits); the "
        "classification head trains in full. Needs --preset. The saved "
        "model and preset hold the merged weights.")
    group.add_argument(
        "--lora_targets", type=flags.comma_list, default=None,
        help="Comma-separated names of the backbone's layers that --lora_rank "
        "adapts (keras-hub's `enable_lora(rank, target_layer_names)`), e.g. "
        "value,attention_output,query,key,random,token_embedding,"
        "feedforward_intermediate_dense,feedforward_output_dense. Default: "
        "the backbone's `default_lora_layer_names()` and token_embedding.")
    flags.add_common_flags(parser,
                            model_dir_default="runs/glue/<task>-<variant>")
    flags.add_output_switches(parser.add_argument_group("outputs"))
    presets.defer_defaults(parser, MODEL_DEFAULTS)
    for action in parser._actions:  # (argparse has no public iterator)
        if action.dest in LORA_DEFAULTS:
            full, lora = LORA_DEFAULTS[action.dest]
            action.default = None
            action.help += f" Default: {full}; {lora} with --lora_rank."
    return parser


def apply_preset(args, task):
    """Fills the architecture flags from `--preset` (or the defaults);
    ValueError on a flag that contradicts the preset."""
    preset = presets.apply_preset(
        args, PROG, PRESET_BACKBONES, MODEL_DEFAULTS, length_flag="max_length",
        flags_to_config={"synthesizer": "synthesizer",
                         "num_layers": "num_layers",
                         "hidden_dim": "hidden_dim", "num_heads": "num_heads",
                         "intermediate_dim": "intermediate_dim",
                         "synthesizer_options": "synthesizer_options"},
        chosen={"pooling": "pooling"},
        flag_names={"lowercase": "--no_lowercase"})
    if preset is not None and task.num_segments > preset.backbone.get(
            "num_segments", 1):
        raise ValueError(
            f"Task {task.name} packs {task.num_segments} segments; the "
            f"preset {args.preset}'s backbone embeds num_segments="
            f"{preset.backbone.get('num_segments', 1)}. Pretrain with "
            f"--num_segments={task.num_segments}.")


def resolve_lora_defaults(args):
    """Fills `LORA_DEFAULTS`' flags not given: full fine-tuning's values,
    or LoRA's with --lora_rank."""
    for name, (full, lora) in LORA_DEFAULTS.items():
        if getattr(args, name) is None:
            setattr(args, name, full if args.lora_rank is None else lora)


def validate_args(args, check_options=True):
    """Canonicalises `args` in place; ValueError on bad values.

    Pure Python, called before TensorFlow is imported, except the check of
    the synthesizer options' values (`check_options`), which imports Keras.
    Idempotent: `run` calls it again with that check.
    """
    task = tasks_lib.get_task(args.task)
    args.task = task.name
    apply_preset(args, task)
    flags.check_hidden_dim(args.hidden_dim, args.num_heads)
    args.synthesizer_options = model_flags.synthesizer_options(
        args, max_length=args.max_length,
        check_values=check_options)
    if args.max_length < 4 + task.num_segments:
        raise ValueError(f"Argument `--max_length`={args.max_length} is too "
                         "short to pack a sentence.")
    if args.lora_rank is not None and args.preset is None:
        raise ValueError(
            f"Argument `--lora_rank`={args.lora_rank} needs `--preset`: "
            "LoRA adapts pretrained weights (without a preset the frozen "
            "backbone would keep its random initialization).")
    resolve_lora_defaults(args)
    if args.lora_targets is not None and args.lora_rank is None:
        raise ValueError(
            f"Argument `--lora_targets`={','.join(args.lora_targets)} needs "
            "`--lora_rank`.")
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
            # Several JAX processes: predicted by a local copy.
            with workers.local_model(self.model) as model:
                for split, (dataset, labels) in eval_data.items():
                    outputs = model.predict(dataset, verbose=0)
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
    from recipes.glue import loading

    # The strategy first, before TensorFlow runs any op (multi-worker, TPU).
    (task, train, evals, tests), run_dir, strategy = experiment.open_run(
        args, validate_args, lambda task: (task, *loading.load_task_data(
            task, args.data_dir, args.tfds_data_dir)), log=log)
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

    from recipes.glue import export as export_lib
    from recipes.glue import model as model_lib

    def prepare():  # the chief's vocabulary and backup, for every worker
        vocab = vocabulary.prepare_vocabulary(
            run_dir,
            lambda: [text for example in train.texts for text in example],
            vocab_file=(presets.read_preset(
                args.preset, PRESET_BACKBONES, PROG).vocabulary_path
                if args.preset else args.vocab_file),
            vocab_size=args.vocab_size,
            lowercase=args.lowercase,
            log=log,
        )
        return vocab, run_dir.resume()

    vocab, initial_epoch = workers.chief_first(strategy, prepare)
    preprocessor = model_lib.make_preprocessor(vocab, args.max_length,
                                               args.lowercase)
    # Static shapes (every batch padded to --max_length) where the step is
    # compiled for one shape: XLA (--jit_compile) and TPUs; on JAX (one
    # compilation per shape) batches padded up to a few lengths.
    trim = not (args.pad_to_max_length or flags.static_shapes(args))
    bucketed = trim and flags.bucketed_shapes(args)
    train_ds = model_lib.make_dataset(
        train, preprocessor, args.batch_size, task, shuffle=True,
        seed=args.seed, drop_remainder=True, trim=trim,
        epochs=args.epochs, initial_epoch=initial_epoch,
        token_dropout=args.token_dropout, bucketed=bucketed,
    )
    eval_data = {
        split: (model_lib.make_dataset(data, preprocessor, args.batch_size,
                                       task, labeled=False, trim=trim,
                                       bucketed=bucketed),
                data.labels)
        for split, data in evals.items()
    }
    steps_per_epoch = len(train) // args.batch_size
    steps_per_execution = flags.steps_per_execution(
        args.steps_per_execution, args.strategy, steps_per_epoch)
    built = {}

    def build():
        model, built["probe"] = model_lib.build_model(
            preset=args.preset,
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
            synthesizer_options=args.synthesizer_options,
        )
        if args.lora_rank:
            built["lora_layers"] = model_lib.enable_lora(
                model.backbone, args.lora_rank, args.lora_targets)
        model_lib.compile_model(
            model, task, args.learning_rate, steps_per_epoch * args.epochs,
            warmup_fraction=args.warmup_fraction,
            weight_decay=args.weight_decay, jit_compile=flags.keras_jit_compile(args),
            ema_momentum=args.ema_momentum,
            steps_per_execution=steps_per_execution,
        )
        return model

    def describe(parameters):
        return ("Model: SynthesizerTextClassifier"
                + (f" from the preset {args.preset}" if args.preset else "")
                + f", {args.num_layers} x "
                f"SynthesizerEncoder({args.synthesizer!r}), width "
                f"{args.hidden_dim}, {args.num_heads} heads, max_length "
                f"{args.max_length}: {parameters:,} trainable parameters"
                + (f" (LoRA rank {args.lora_rank} on "
                   f"{', '.join(built['lora_layers'])}, and the head)"
                   if args.lora_rank else "") + ".")

    def evaluate(model, run):
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
        for split, data in tests.items():  # on every worker (see export)
            dataset = model_lib.make_dataset(
                data, preprocessor, args.batch_size, task, labeled=False,
                trim=trim, bucketed=bucketed)
            test_predictions[split] = (
                data, model_lib.predictions_from_outputs(
                    task, model.predict(dataset, verbose=0)))
        return {"task": task.name, "synthesizer": args.synthesizer,
                "main_metric": task.main_metric, "metrics": results_metrics}

    test_predictions = {}

    def export(model):
        return export_lib.export_run(
            run_dir, model, built["probe"], preprocessor, task, evals,
            test_predictions, args, log)

    return experiment.train_and_evaluate(
        args, run_dir, strategy, build, train_ds, steps_per_epoch, evaluate,
        export=export, describe=describe,
        extra_callbacks=[_eval_callback(task, eval_data, log)],
        wall_start=wall_start, log=log)


def main(argv=None):
    """Command-line entry point; returns the exit status (2 on bad input,
    with one line `python -m recipes.glue: error: ...`)."""
    return runtime.run_main(build_parser(), run, PROG, argv,
                            validate=validate_args,
                            input_paths=("data_dir", "vocab_file"))
