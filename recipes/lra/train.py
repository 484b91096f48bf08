"""`python -m recipes.lra`: Long Range Arena's ListOps and byte-level text
classification with a Synthesizer encoder.

Examples:

    # ListOps generated offline (seeded, cached), a small set, 10 minutes:
    python -m recipes.lra --task=listops --synthesizer=factorized_random \\
        --listops_train_size=2000 --listops_val_size=200 \\
        --listops_test_size=200 --time_budget_minutes=10

    # LRA's released ListOps files:
    python -m recipes.lra --task=listops --data_dir=lra_release/listops-1000

    # Byte-level IMDB (LRA's text task; needs the prepared set), 4K bytes:
    python -m recipes.lra --task=text --dataset=imdb_reviews --max_length=4096

    # Any labelled text files (label<TAB>text, .gz read transparently):
    python -m recipes.lra --task=text --dataset=files \\
        --train_file=train.tsv.gz --test_file=test.tsv.gz

    # The Linformer-style baseline (only the attention layer differs):
    python -m recipes.lra --task=text --attention=linformer --linformer_k=256
"""

import os
import time

from recipes import cli
from recipes.core import cluster
from recipes.core import data_files
from recipes.core import experiment
from recipes.core import flags
from recipes.core import model_flags
from recipes.core import run_directory
from recipes.core import runtime
from recipes.core import workers
from recipes.lra import listops
from recipes.lra import text as text_lib

PROG = "python -m recipes.lra"
TASKS = ("listops", "text")
# LRA's lengths: ListOps 2,000 tokens, text 1,000 bytes (4,000 in the
# paper's longer setting).
DEFAULT_MAX_LENGTH = {"listops": 2000, "text": 1000}
POOLINGS = ("cls", "mean")
ATTENTIONS = ("synthesizer", "linformer")
DEFAULT_LINFORMER_K = 256


def build_parser():
    parser = cli.ArgumentParser(
        prog=PROG,
        description="Train and evaluate a SynthesizerTextClassifier on Long "
        "Range Arena's ListOps (generated offline and seeded, or LRA's TSV "
        "files) or byte-level text classification (IMDB, labelled text "
        "files, or a built-in set), at 1K-4K tokens.",
        formatter_class=cli.HelpFormatter)
    group = parser.add_argument_group("task and data")
    group.add_argument("--task", required=True, choices=TASKS,
                       help="listops: the value (0-9) of a nested MIN/MAX/"
                       "MED/SM expression; text: the class of a document "
                       "read as UTF-8 bytes.")
    group.add_argument(
        "--data_dir", default=None,
        help="listops: LRA's folder of basic_train.tsv, basic_val.tsv and "
        "basic_test.tsv (Source<TAB>Target; e.g. lra_release/listops-1000). "
        "Without it the set is generated (--seed, the --listops_* flags) "
        "and cached in --cache_dir.")
    group.add_argument("--cache_dir", default=os.path.join("runs", "lra",
                                                           "data"),
                       help="listops: where generated sets are written "
                       "once (one folder per seed and parameters) and read "
                       "again.")
    for name, help_text in (
            ("train_size", "training examples"),
            ("val_size", "validation examples"),
            ("test_size", "test examples"),
            ("min_length", "tokens a tree must exceed"),
            ("max_length", "tokens a tree must stay below"),
            ("max_depth", "deepest level of a tree (root 1)"),
            ("max_args", "most arguments of an operator")):
        group.add_argument(
            f"--listops_{name}", type=int, default=listops.DEFAULTS[name],
            help=f"listops generator: {help_text} (LRA: "
            f"{listops.DEFAULTS[name]:,}).")
    group.add_argument("--dataset", choices=text_lib.DATASETS,
                       default=text_lib.BUILTIN,
                       help="text: builtin (offline, small), files "
                       "(--train_file, --test_file), or a tensorflow_datasets "
                       "set (needs the prepared set, a download): "
                       "imdb_reviews (LRA's), ag_news_subset (4 classes of "
                       "news, title + description), yelp_polarity_reviews "
                       "(2 classes).")
    for split, required in (("train", "required"), ("valid", "optional"),
                            ("test", "required")):
        group.add_argument(f"--{split}_file", default=None,
                           help=f"text, --dataset=files: the {split} split "
                           f"({required}), label<TAB>text a line (.gz read "
                           "transparently).")
    data_files.add_tfds_data_dir_flag(group)
    group.add_argument("--max_train_examples", type=flags.positive_int,
                       default=None,
                       help="Use only the first N training examples.")

    group = parser.add_argument_group("model")
    model_flags.add_model_flags(
        group, num_layers=2, hidden_dim=64,
        layers_help="SynthesizerEncoder blocks.",
        dropout_help="Dropout of the embeddings, attention, feedforward "
        "layers and head. At 0 the batch-independent variants share one "
        "attention map over the batch in training (query-blocked past "
        "2,048 tokens); attention dropout is per example.")
    group.set_defaults(dropout=0.0)
    group.add_argument("--max_length", type=flags.positive_int, default=None,
                       help="Tokens per example, [CLS] included (padded; "
                       "longer examples cut and counted). Default: "
                       "listops 2000, text 1000 (LRA's).")
    group.add_argument(
        "--attention", choices=ATTENTIONS, default="synthesizer",
        help="synthesizer: SynthesizerEncoder blocks of --synthesizer; "
        "linformer: the Linformer-style baseline (Wang et al. 2020), the "
        "same model but for the attention layers (recipes/lra/"
        "linformer.py: keys and values projected along the length to k "
        "rows, k set by --linformer_k), without preset or SavedModel "
        "export.")
    group.add_argument(
        "--linformer_k", type=flags.positive_int, default=None,
        help="Linformer's k (with --attention=linformer): the rows that "
        "keys and values are projected to, at most --max_length. Default: "
        f"{DEFAULT_LINFORMER_K}.")
    group.add_argument("--pooling", choices=POOLINGS, default="cls",
                       help="The classified vector: the [CLS] token "
                       "(LRA's pooling_mode CLS) or the mean of the "
                       "tokens.")

    flags.add_common_flags(parser, default_batch_size=32, default_epochs=3,
                           default_learning_rate=1e-3,
                           model_dir_default="runs/lra/<task>-<data>-"
                           "<variant>-<max_length>")
    group = parser.add_argument_group("training (LRA)")
    group.add_argument("--steps_per_epoch", type=flags.positive_int,
                       default=None,
                       help="Batches per epoch (default: one pass over the "
                       "training examples, without the last partial "
                       "batch); a backup after each epoch.")
    flags.add_time_budget_flag(group)
    group.add_argument("--eval_batch_size", type=flags.positive_int,
                       default=32,
                       help="Batch size of the evaluation.")
    flags.add_output_switches(parser.add_argument_group("outputs"),
                              attention_plot=True)
    # The shared vocabulary flags do not apply (fixed vocabularies): a
    # `--vocab_size` given is refused, not ignored.
    parser.set_defaults(vocab_size=None)
    return parser


# A run directory may be restarted with another time budget, or another
# cache of the same generated set.
RUNTIME_FLAGS = run_directory.RUNTIME_FLAGS | {
    "time_budget_minutes", "eval_batch_size", "cache_dir", "attention_plot"}
# Flags added after runs may have started: a run directory saved without
# them holds a Synthesizer run, and resumes.
ADDED_FLAGS = {"attention": "synthesizer", "linformer_k": None}


def listops_parameters(args):
    """The generator's parameters from the `--listops_*` flags."""
    return {name: getattr(args, f"listops_{name}")
            for name in listops.DEFAULTS}


def validate_args(args, check_options=True):
    """Canonicalises `args` in place; ValueError on bad values.

    Pure Python, called before TensorFlow is imported, except the check of
    the synthesizer options' values (`check_options`), which imports Keras.
    Idempotent: `run` calls it again with that check.
    """
    args.synthesizer = model_flags.canonical_synthesizer(
        "synthesizer", args.synthesizer)
    if args.max_length is None:
        args.max_length = DEFAULT_MAX_LENGTH[args.task]
    if args.max_length < 8:
        raise ValueError("Argument `--max_length` must be at least 8. "
                         f"Received: --max_length={args.max_length}")
    _check_attention(args)
    flags.check_hidden_dim(args.hidden_dim, args.num_heads)
    if not 0.0 <= args.dropout < 1.0:
        raise ValueError("Argument `--dropout` must be in [0, 1). "
                         f"Received: --dropout={args.dropout}")
    for name in ("vocab_file", "vocab_size"):
        if getattr(args, name) is not None:
            raise ValueError(
                f"Argument `--{name}` does not apply to recipes.lra: its "
                "vocabularies are fixed (ListOps' tokens, UTF-8 bytes). "
                f"Received: --{name}={getattr(args, name)}")
    args.synthesizer_options = model_flags.synthesizer_options(
        args, max_length=args.max_length, check_values=check_options)
    if args.task == "listops":
        listops.check_parameters(**listops_parameters(args))
        for name in ("dataset", "train_file", "valid_file", "test_file"):
            if getattr(args, name) not in (None, text_lib.BUILTIN):
                raise ValueError(f"Argument `--{name}` is for --task=text. "
                                 f"Received: --{name}={getattr(args, name)}")
        data = "lra" if args.data_dir else f"generated{args.seed}"
    else:
        if args.data_dir is not None:
            raise ValueError("Argument `--data_dir` is for --task=listops; "
                             "text files are --train_file/--test_file. "
                             f"Received: --data_dir={args.data_dir}")
        given = [name for name in ("train_file", "valid_file", "test_file")
                 if getattr(args, name)]
        if args.dataset == text_lib.FILES:
            missing = [name for name in ("train_file", "test_file")
                       if not getattr(args, name)]
            if missing:
                raise ValueError(
                    "Argument `--dataset=files` needs "
                    + " and ".join(f"--{m}" for m in missing) + ".")
        elif given:
            raise ValueError(
                f"Argument `--{given[0]}` reads text files: pass "
                f"--dataset=files with it (received --dataset="
                f"{args.dataset}).")
        data = args.dataset
    if args.model_dir is None:
        variant = (f"linformer_k{args.linformer_k}"
                   if args.attention == "linformer"
                   else args.synthesizer.replace("+", "_"))
        args.model_dir = os.path.join(
            "runs", "lra", f"{args.task}-{data}-{variant}-{args.max_length}")


def _check_attention(args):
    """`--attention` against `--synthesizer*` and `--linformer_k`:
    ValueError naming the flags; sets `args.linformer_k` to its default
    for the baseline."""
    if args.attention != "linformer":
        if args.linformer_k is not None:
            raise ValueError(
                "Argument `--linformer_k` is for --attention=linformer. "
                f"Received: --linformer_k={args.linformer_k} with "
                f"--attention={args.attention}")
        return
    default = model_flags.canonical_synthesizer(
        "synthesizer", build_parser().get_default("synthesizer"))
    if args.synthesizer != default:
        raise ValueError(
            "Argument `--synthesizer` does not apply to "
            "--attention=linformer (the baseline's attention is Linformer's,"
            " --linformer_k). Received: --synthesizer="
            f"{args.synthesizer} with --attention=linformer")
    for name in ("synthesizer_options", "factorized_rank"):
        if getattr(args, name, None) is not None:
            raise ValueError(
                f"Argument `--{name}` does not apply to "
                "--attention=linformer. Received: "
                f"--{name}={getattr(args, name)} with --attention=linformer")
    if args.linformer_k is None:
        args.linformer_k = DEFAULT_LINFORMER_K
    if args.linformer_k > args.max_length:
        raise ValueError(
            "Argument `--linformer_k` must be at most --max_length="
            f"{args.max_length} (keys and values are projected from "
            f"--max_length positions to k rows). Received: --linformer_k="
            f"{args.linformer_k}")


def load_data(args, log=print):
    """`(splits, classes, describe)`: `splits` maps `train`, `valid` (or
    None for text without one) and `test` to `(sequences, labels)` of token
    ids (not cut yet); `classes` the class names; `describe` a line about
    the source."""
    if args.task == "listops":
        if args.data_dir:
            rows = listops.read_splits(args.data_dir)
            where = f"LRA's files in {args.data_dir}"
        else:
            rows, folder = listops.cached_splits(
                args.cache_dir, args.seed, listops_parameters(args),
                write=cluster.is_chief(), log=log)
            where = f"generated with seed {args.seed}, cached in {folder}"
        splits = {}
        for split, name in (("train", "train"), ("valid", "val"),
                            ("test", "test")):
            splits[split] = (
                [listops.encode(source, f"ListOps {name} example {i + 1}")
                 for i, (source, _) in enumerate(rows[name])],
                [label for _, label in rows[name]])
        return splits, list(listops.DIGITS), f"ListOps ({where})"

    from recipes.lra import sequences

    if args.dataset == text_lib.BUILTIN:
        pairs = text_lib.builtin_splits(args.seed)
    elif args.dataset == text_lib.FILES:
        pairs = {split: text_lib.read_labelled_file(
            getattr(args, f"{split}_file"), f"{split} file (--{split}_file)")
            for split in ("train", "valid", "test")
            if getattr(args, f"{split}_file")}
    else:
        pairs = text_lib.tfds_splits(args.dataset, args.tfds_data_dir,
                                     args.max_train_examples)
    classes = text_lib.class_names(pairs["train"])
    splits = {"valid": None}
    for split, split_pairs in pairs.items():
        splits[split] = (
            sequences.byte_sequences([body for _, body in split_pairs]),
            text_lib.label_ids(split_pairs, classes, split))
    return splits, classes, f"text ({args.dataset}, UTF-8 bytes)"


def run(args, log=print):
    """Runs the recipe for parsed `args`; returns the results dict."""
    wall_start = time.time()
    (splits, classes, source), run_dir, strategy = experiment.open_run(
        args, validate_args, lambda _: load_data(args, log), RUNTIME_FLAGS,
        log, added_flags=ADDED_FLAGS)

    from recipes.lra import model as model_lib
    from recipes.lra import sequences

    train_sequences, train_labels = splits["train"]
    if args.max_train_examples:
        train_sequences = train_sequences[:args.max_train_examples]
        train_labels = train_labels[:args.max_train_examples]
    log(f"Data: {source}.")
    keep_last = args.task == "text"  # [SEP] stays last, as the exporter's
    packed, labels = {}, {}
    for split, data in (("train", (train_sequences, train_labels)),
                        ("valid", splits["valid"]), ("test", splits["test"])):
        if data is None:
            continue
        packed[split] = sequences.pack(data[0], args.max_length, keep_last)
        labels[split] = data[1]
        log(sequences.cut_line("ListOps" if args.task == "listops"
                               else "Text", split, packed[split],
                               args.max_length))
    count = len(labels["train"])
    if count < args.batch_size:
        raise ValueError(f"Argument `--batch_size`={args.batch_size} exceeds "
                         f"the {count} training examples.")
    linformer = args.attention == "linformer"
    if linformer:
        path, reason = "linformer", (
            f"keys and values projected to k={args.linformer_k} rows: "
            "B x H x T x k probabilities")
    else:
        path, reason = model_lib.attention_path(
            args.synthesizer, args.dropout, args.max_length)
    log(f"Attention in training: {path.replace('_', '-')} path ({reason}).")

    initial_epoch = workers.chief_first(strategy, run_dir.resume)
    steps_per_epoch = args.steps_per_epoch or count // args.batch_size
    steps_per_execution = flags.steps_per_execution(
        args.steps_per_execution, args.strategy, steps_per_epoch)
    train_ds = model_lib.train_dataset(
        packed["train"].token_ids, labels["train"], args.batch_size,
        args.seed, steps_per_epoch, initial_epoch)
    vocabulary_size = (len(listops.VOCABULARY) if args.task == "listops"
                       else 260)
    built = {}

    def build():
        model, built["probe"] = model_lib.build_model(
            args, vocabulary_size, len(classes))
        model_lib.compile_model(model, args, steps_per_epoch * args.epochs,
                                steps_per_execution)
        return model

    def describe(parameters):
        block = (f"LinformerEncoder(k={args.linformer_k})" if linformer
                 else f"SynthesizerEncoder({args.synthesizer!r})")
        return (f"Model: SynthesizerTextClassifier, {args.num_layers} x "
                f"{block}, width "
                f"{args.hidden_dim}, {args.num_heads} heads, {args.pooling} "
                f"pooling, max_length {args.max_length}: {parameters:,} "
                f"trainable parameters; {steps_per_epoch} steps per epoch, "
                f"{args.epochs} epochs.")

    def evaluate(model, run):
        metrics = {split: {"accuracy": model_lib.accuracy(
            model, packed[split].token_ids, labels[split],
            args.eval_batch_size)} for split in ("valid", "test")
            if split in packed}
        log("Evaluation: " + "; ".join(
            f"{split} accuracy={m['accuracy']:.4f}"
            for split, m in metrics.items()))
        log(f"Steps reached: {run['optimizer_steps']:,}"
            + (" (stopped by the time budget)"
               if run.get("stopped_by_time_budget") else "")
            + (f", {run['steps_per_second']:.3f} steps/s"
               if run["steps_per_second"] else "") + ".")
        return {
            "task": args.task, "source": source,
            "attention": args.attention,
            "synthesizer": None if linformer else args.synthesizer,
            "linformer_k": args.linformer_k, "metrics": metrics,
            "classes": list(classes), "max_length": args.max_length,
            "attention_path": path, "attention_path_reason": reason,
            "steps_reached": run["optimizer_steps"],
            "cut": {split: p.cut for split, p in packed.items()},
            "sequences": {split: p.summary() for split, p in packed.items()},
        }

    def export(model):  # on the chief
        outputs = {"attention_png": None}
        if linformer:
            skipped = (
                "--attention=linformer: the baseline's classes live in "
                "recipes (recipes/lra/linformer.py), so no preset or "
                "SavedModel is written (they would need recipes to load); "
                "no attention.png (its maps are T x k)")
            log(f"Export skipped: {skipped}.")
            outputs.update({"export": None, "export_usage": None,
                            "preset": None, "export_skipped": skipped})
            return outputs
        if args.attention_plot:
            outputs["attention_png"] = attention_picture(
                run_dir.path("attention.png"), model, built["probe"],
                packed["test"], labels["test"], classes, args)
        if args.task == "text":
            def save(path, model):
                return model_lib.export_text_model(path, model,
                                                   args.max_length, classes)

            def usage(path):
                return model_lib.text_export_usage(path, classes)
        else:
            def save(path, model):
                return model_lib.export_token_model(path, model,
                                                    args.max_length)

            def usage(path):
                return model_lib.token_export_usage(path, args.max_length)
        outputs.update(experiment.saved_model_export(
            args, run_dir, save, usage,
            "raw strings in" if args.task == "text" else "token ids in",
            log)(model))
        from recipes import serving

        preset = serving.save_preset(run_dir.path("preset"), model)
        log(f"Saved a keras-hub preset to {preset}")
        outputs["preset"] = preset
        return outputs

    return experiment.train_and_evaluate(
        args, run_dir, strategy, build, train_ds, steps_per_epoch, evaluate,
        export=export, describe=describe, wall_start=wall_start, log=log)


def attention_picture(path, model, probe, packed, labels, classes, args):
    """attention.png: the maps of the first test example, with its true
    and predicted class."""
    import keras

    from recipes.lra import model as model_lib

    token_ids = packed.token_ids[0]
    n = int(packed.lengths[0])
    if args.task == "listops":
        names = [listops.VOCABULARY[i] for i in token_ids[:n]]
    else:
        names = ["[CLS]"] + [chr(i - 4) for i in token_ids[1:n - 1]] + [
            "[SEP]"]
    logits = model(model_lib.inputs_of(token_ids[None]), training=False)
    probabilities = keras.ops.convert_to_numpy(
        keras.ops.softmax(logits, axis=-1))[0]
    predicted = int(probabilities.argmax())
    caption = (f"true: {classes[labels[0]]}, predicted: {classes[predicted]}"
               f" (p={probabilities[predicted]:.2f})")
    title = (f"{args.task} / {args.synthesizer}: "
             + ("".join(names[1:80]) if args.task == "text"
                else " ".join(names[1:40])))
    return model_lib.plot_attention(path, probe, token_ids, names, title,
                                    caption)


def main(argv=None):
    """Command-line entry point; returns the exit status (2 on bad input,
    with one line `python -m recipes.lra: error: ...`)."""
    return runtime.run_main(
        build_parser(), run, PROG, argv, validate=validate_args,
        input_paths=("data_dir", "train_file", "valid_file", "test_file"))
