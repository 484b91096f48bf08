"""`python -m recipes.lm`: train a Synthesizer language model, evaluate it
on every token of the validation and test text, sample from prompts and
export it.

Examples:

    # The built-in corpus, offline, a minute on 2 CPU cores:
    python -m recipes.lm --dataset=builtin --synthesizer=random+vanilla

    # Tiny Shakespeare (or any text files; .gz is fine), character level:
    python -m recipes.lm --train_file=shakespeare/train.txt \\
        --valid_file=shakespeare/valid.txt --synthesizer=dense+vanilla \\
        --time_budget_minutes=10

    # LM1B (the paper's corpus), one sentence per example, WordPiece:
    python -m recipes.lm --dataset=lm1b --cut=sentence \\
        --tokenizer=wordpiece --vocab_size=32000 --sequence_length=64 \\
        --hidden_dim=512 --num_layers=6 --num_heads=8 --synthesizer=random
"""

import os
import time

from recipes import cli
from recipes import serving
from recipes.core import data_files
from recipes.core import experiment
from recipes.core import flags
from recipes.core import model_flags
from recipes.core import run_directory
from recipes.core import runtime
from recipes.core import timing
from recipes.core import workers
from recipes.lm import data as data_lib

PROG = "python -m recipes.lm"
DEFAULT_PROMPTS = ("ROMEO:", "JULIET:\nO")


def build_parser():
    parser = cli.ArgumentParser(
        prog=PROG,
        description="Train a decoder-only Synthesizer language model "
        "(SynthesizerCausalLM), score every token of the validation and "
        "test text once (loss in nats/token, perplexity, bits per "
        "character), sample from prompts and export a SavedModel.",
        formatter_class=cli.HelpFormatter)
    group = parser.add_argument_group("data")
    data_files.add_data_source_flags(
        group, data_lib.SPLITS, "lm1b",
        "A tensorflow_datasets set with a `text` feature (lm1b, "
        "wiki40b/en, ...), or 'builtin': small synthetic plays shipped with "
        "the recipe, for offline runs. Ignored with --train_file.",
        lambda split: f"UTF-8 text file, {split} split (.gz read "
        "transparently).")
    group.add_argument("--max_train_examples", type=flags.positive_int,
                       default=None,
                       help="Read only the first N lines of the training "
                       "text (of each split of a tfds set).")
    group.add_argument(
        "--cut", choices=data_lib.CUTS, default="stream",
        help="stream: the text as one token stream cut into windows of "
        "--sequence_length; sentence: one line per example, padded.")
    group.add_argument("--tokenizer", choices=data_lib.TOKENIZERS,
                       default="char",
                       help="char (vocabulary of the training text), byte "
                       "(UTF-8 bytes) or wordpiece (learned, or "
                       "--vocab_file).")
    group.add_argument("--lowercase", action="store_true",
                       help="Lowercase the text before tokenizing (by "
                       "default case is kept).")
    group.add_argument("--eval_stride", type=flags.positive_int, default=None,
                       help="Score the stream with windows every N tokens, "
                       "each token once, with more context (default: "
                       "non-overlapping windows).")

    group = parser.add_argument_group("model")
    model_flags.add_model_flags(
        group, num_layers=4, hidden_dim=192,
        layers_help="Number of decoder blocks.",
        synthesizer_help="Causal self-attention of every block")
    group.add_argument("--sequence_length", type=flags.positive_int,
                       default=128,
                       help="Context length in tokens (training windows "
                       "and the model's max_length).")

    flags.add_common_flags(parser, default_batch_size=32, default_epochs=10,
                            default_learning_rate=2e-3,
                            model_dir_default="runs/lm/<dataset>-<tokenizer>"
                            "-<variant>")
    group = parser.add_argument_group("training (language modelling)")
    flags.add_time_budget_flag(group)

    group = parser.add_argument_group("generation and outputs")
    group.add_argument("--prompts", nargs="+", default=list(DEFAULT_PROMPTS),
                       help="Prompts to sample from after training.")
    group.add_argument("--sampler", choices=data_lib.SAMPLERS, default="top_k",
                       help="top_k: k=10; top_p: p=0.9.")
    group.add_argument("--temperature", type=flags.positive_float, default=0.8,
                       help="Sampling temperature.")
    group.add_argument("--max_new_tokens", type=flags.positive_int,
                       default=100,
                       help="Tokens generated after the longest prompt (the "
                       "prompts are sampled as one batch, to one length; "
                       "at most the context --sequence_length in all).")
    group.add_argument("--eval_batch_size", type=flags.positive_int,
                       default=64,
                       help="Batch size of the evaluation windows.")
    flags.add_output_switches(group, attention_plot=True)
    return parser


# A run directory may be restarted with other generation flags, or trained
# further (`--time_budget_minutes`).
RUNTIME_FLAGS = run_directory.RUNTIME_FLAGS | {
    "prompts", "sampler", "temperature", "max_new_tokens", "eval_batch_size",
    "time_budget_minutes", "attention_plot",
}


def validate_args(args, check_options=True):
    """Canonicalises `args` in place; ValueError on bad values.

    Pure Python, called before TensorFlow is imported, except the check of
    the synthesizer options' values (`check_options`), which imports Keras.
    Idempotent: `run` calls it again with that check.
    """
    args.synthesizer = model_flags.canonical_synthesizer(
        "synthesizer", args.synthesizer)
    args.synthesizer_options = model_flags.synthesizer_options(
        args, max_length=args.sequence_length,
        check_values=check_options)
    flags.check_hidden_dim(args.hidden_dim, args.num_heads)
    if not 0.0 <= args.dropout < 1.0:
        raise ValueError("Argument `--dropout` must be in [0, 1). "
                         f"Received: --dropout={args.dropout}")
    if args.eval_stride and args.eval_stride > args.sequence_length:
        raise ValueError(
            f"Argument `--eval_stride` must be at most --sequence_length="
            f"{args.sequence_length}. Received: "
            f"--eval_stride={args.eval_stride}")
    if args.eval_stride and args.cut != "stream":
        raise ValueError("Argument `--eval_stride` needs `--cut=stream` "
                         "(sentences are scored one by one).")
    if args.cut == "stream" and not all(args.prompts):
        raise ValueError(
            "Argument `--prompts` holds an empty prompt; a model of a "
            "contiguous stream (`--cut=stream`) has no start token, so each "
            f"prompt needs at least one character. Received: --prompts="
            f"{args.prompts}")
    if args.vocab_file and args.tokenizer != "wordpiece":
        raise ValueError("Argument `--vocab_file` needs "
                         "`--tokenizer=wordpiece`.")
    if args.train_file:
        if args.dataset == data_lib.BUILTIN:
            raise ValueError("--dataset=builtin reads the corpus shipped "
                             "with the recipe; don't pass --train_file.")
        args.dataset = "files"
    elif args.valid_file or args.test_file:
        raise ValueError("Argument `--train_file` is required with text "
                         "files.")
    if args.model_dir is None:
        args.model_dir = os.path.join(
            "runs", "lm", f"{args.dataset.replace('/', '_')}-{args.tokenizer}"
            f"-{args.synthesizer.replace('+', '_')}")


def load_corpus(args):
    """`{split: text}` as the arguments ask."""
    if args.dataset in ("files", data_lib.BUILTIN):
        corpus = data_lib.load_files(
            data_lib.builtin_files() if args.dataset == data_lib.BUILTIN
            else {s: getattr(args, f"{s}_file") for s in data_lib.SPLITS})
        if args.max_train_examples:
            lines = corpus["train"].splitlines(keepends=True)
            corpus["train"] = "".join(lines[:args.max_train_examples])
        return corpus
    return data_lib.load_tfds(args.dataset, args.tfds_data_dir,
                              args.max_train_examples)


def run(args, log=print):
    """Runs the recipe for parsed `args`; returns the results dict."""
    wall_start = time.time()
    # The strategy first, before TensorFlow runs any op (multi-worker, TPU).
    corpus, run_dir, strategy = experiment.open_run(
        args, validate_args, lambda _: load_corpus(args), RUNTIME_FLAGS, log)
    log(f"Data ({args.dataset}): " + ", ".join(
        f"{split} {len(text):,} characters" for split, text in corpus.items()))

    from recipes.lm import evaluation
    from recipes.lm import export as export_lib
    from recipes.lm import model as model_lib
    from recipes.lm import tokenizers

    def prepare():  # the chief's vocabulary and backup, for every worker
        return (tokenizers.prepare_tokenizer(run_dir, args, corpus["train"],
                                             log), run_dir.resume())

    tokenizer, initial_epoch = workers.chief_first(
        strategy, prepare, fingerprint=lambda prepared: repr(
            (tokenizers.vocabulary_of(prepared[0]), prepared[1])))
    stream = args.cut == "stream"
    encoded = evaluation.encode_splits(tokenizer, corpus, args)
    train = encoded["train"]
    log(f"Tokens ({args.tokenizer}, vocabulary "
        f"{tokenizer.vocabulary_size()}): " + ", ".join(
            f"{s} {e['tokens']:,} ({e['unknown']:,} unknown)"
            for s, e in encoded.items()))
    train_rows = train["stream"] if stream else train["windows"]
    windows_per_epoch = ((len(train_rows) - 1 - (args.sequence_length - 1))
                         // args.sequence_length if stream
                         else len(train_rows[0]))
    steps_per_epoch = windows_per_epoch // args.batch_size
    if steps_per_epoch < 1:
        raise ValueError(
            f"Argument `--batch_size`={args.batch_size} exceeds the "
            f"{windows_per_epoch} training windows of --sequence_length="
            f"{args.sequence_length} tokens.")
    steps_per_execution = flags.steps_per_execution(
        args.steps_per_execution, args.strategy, steps_per_epoch)
    train_ds = model_lib.train_dataset(
        train_rows, args.batch_size, args.seed, args.epochs, initial_epoch,
        steps_per_epoch,
        stream_length=args.sequence_length + 1 if stream else None)
    valid_ds = None
    if "valid" in encoded:
        valid_ds = model_lib.eval_dataset(
            *encoded["valid"]["eval"], args.eval_batch_size)

    def build():
        lm = model_lib.build_lm(tokenizer, args, stream)
        model_lib.compile_lm(lm, args, steps_per_epoch * args.epochs,
                             steps_per_execution)
        return lm

    def describe(parameters):
        return (f"Model: {args.num_layers} blocks, {args.synthesizer!r}, "
                f"width {args.hidden_dim}, {args.num_heads} heads, context "
                f"{args.sequence_length}: {parameters:,} trainable "
                f"parameters; {steps_per_epoch} steps per epoch, "
                f"{args.epochs} epochs.")

    def evaluate(lm, run):
        speed = timing.training_speed(
            run["steps_per_second"], args.batch_size * args.sequence_length,
            "window positions", "steps/s x batch_size x sequence_length "
            "(every window position is a scored label in the stream cut; "
            "padding included in the sentence cut)", log)
        results = evaluation.evaluate_and_sample(lm, encoded, corpus, args,
                                                 run_dir, log)
        results.update({
            "dataset": args.dataset,
            "cut": args.cut,
            "tokenizer": args.tokenizer,
            "synthesizer": args.synthesizer,
            "vocabulary_size": tokenizer.vocabulary_size(),
            "unknown_tokens": {s: e["unknown"] for s, e in encoded.items()},
            **speed,
        })
        return results

    saved_model = experiment.saved_model_export(
        args, run_dir, export_lib.export_saved_model, export_lib.export_usage,
        "signature 'generate', strings in and out", log)

    def export(lm):  # on the chief
        results = saved_model(lm)
        results["preset"] = serving.save_preset(run_dir.path("preset"), lm)
        log(f"Saved a keras-hub preset to {results['preset']}")
        return results

    return experiment.train_and_evaluate(
        args, run_dir, strategy, build, train_ds, steps_per_epoch, evaluate,
        export=export, describe=describe,
        fit_options={"validation_data": valid_ds},
        # The batches are token ids already: `fit` must not preprocess.
        fit_context=model_lib.without_preprocessor,
        wall_start=wall_start, log=log)


def main(argv=None):
    """Command-line entry point; returns the exit status (2 on bad input,
    with one line `python -m recipes.lm: error: ...`)."""
    paths = ["vocab_file"] + [f"{split}_file" for split in data_lib.SPLITS]
    return runtime.run_main(build_parser(), run, PROG, argv,
                            validate=validate_args,
                            input_paths=paths)
