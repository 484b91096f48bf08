"""`python -m recipes.pretrain`: pretrain a Synthesizer model on plain text
(masked LM for the encoder, span corruption for the encoder-decoder), score
it on held-out windows and write a keras-hub preset to fine-tune from.

Examples:

    # The built-in corpus, offline, a minute or two on 2 CPU cores:
    python -m recipes.pretrain --objective=mlm --synthesizer=random+vanilla

    # Text files as one corpus (globs; .gz read transparently; the sentences
    # of a GLUE .tsv file), at most 30 minutes:
    python -m recipes.pretrain --objective=mlm --dataset=files \\
        --train_files glue_data/SST-2/train.tsv 'books/*.txt.gz' \\
        --time_budget_minutes=30

    # Span corruption for the encoder-decoder, then fine-tune on
    # translation with `python -m recipes.translate --preset=...`:
    python -m recipes.pretrain --objective=span_corruption --dataset=files \\
        --train_files=multi30k/train.en.gz --synthesizer=random+vanilla

    # C4 from tensorflow_datasets (needs the prepared set), 4 GPUs:
    python -m recipes.pretrain --objective=mlm --dataset=c4/en \\
        --max_train_examples=1000000 --strategy=mirrored --batch_size=256
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
from recipes.core import training
from recipes.core import workers
from recipes.pretrain import data as data_lib

PROG = "python -m recipes.pretrain"
OBJECTIVES = ("mlm", "span_corruption")


def build_parser():
    parser = cli.ArgumentParser(
        prog=PROG,
        description="Pretrain a Synthesizer model on plain text: a masked "
        "language model on SynthesizerBackbone (--objective=mlm, BERT's "
        "masking) or span corruption on SynthesizerSeq2SeqBackbone "
        "(--objective=span_corruption, T5's). Scores held-out windows and "
        "writes a keras-hub preset (<model_dir>/preset) that recipes.glue "
        "and recipes.translate fine-tune from (--preset).",
        formatter_class=cli.HelpFormatter)
    group = parser.add_argument_group("objective and data")
    group.add_argument("--objective", choices=OBJECTIVES, default="mlm",
                       help="mlm: SynthesizerMaskedLM (encoder); "
                       "span_corruption: SynthesizerSeq2SeqLM "
                       "(encoder-decoder).")
    group.add_argument(
        "--dataset", default=data_lib.BUILTIN,
        help="'builtin' (text shipped with the recipes: the GLUE built-in "
        "sentences and the LM recipe's plays; offline), 'files' "
        "(--train_files), or a tensorflow_datasets set with a `text` "
        "feature (c4/en, wiki40b/en, ...; needs the prepared set).")
    group.add_argument("--train_files", nargs="+", default=None,
                       metavar="PATTERN",
                       help="Text files or glob patterns, read in order as "
                       "one corpus, one document a line (.gz read "
                       "transparently; .tsv files: the --tsv_column "
                       "column). Implies --dataset=files.")
    group.add_argument("--tsv_column", default="sentence",
                       help="The column of .tsv training files to read "
                       "(their first row names the columns).")
    group.add_argument("--valid_file", default=None,
                       help="Held-out text file (default: --valid_fraction "
                       "of the training windows, a seeded sample).")
    group.add_argument("--valid_fraction", type=float, default=0.05,
                       help="Fraction of the packed windows held out when "
                       "there is no --valid_file.")
    group.add_argument("--max_train_examples", type=flags.positive_int,
                       default=None,
                       help="Read only the first N documents (lines) of the "
                       "training text (default: all).")
    data_files.add_tfds_data_dir_flag(group)
    group.add_argument("--no_lowercase", dest="lowercase",
                       action="store_false",
                       help="Keep case in the WordPiece tokenizer (by "
                       "default text is lowercased, as recipes.glue does).")

    group = parser.add_argument_group("model")
    model_flags.add_model_flags(
        group, num_layers=2, hidden_dim=128,
        layers_help="Encoder blocks (span_corruption: blocks in the encoder "
        "and in the decoder).",
        dropout_help="Dropout rate of the embeddings, attention and "
        "feedforward layers.")
    group.add_argument("--sequence_length", type=flags.positive_int,
                       default=128,
                       help="Window length in tokens ([CLS] and [SEP] "
                       "included; span_corruption: the encoder's input "
                       "length). The models' max_sequence_length.")
    group.add_argument("--num_segments", type=flags.positive_int, default=2,
                       help="mlm: segment ids the backbone embeds (2 lets "
                       "the preset fine-tune on sentence pairs).")
    group.add_argument("--cross_attention_synthesizer", default="vanilla",
                       help="span_corruption: the decoder's "
                       "cross-attention variant.")

    group = parser.add_argument_group("masking")
    group.add_argument("--mask_selection_rate", type=float, default=0.15,
                       help="mlm: fraction of the tokens selected for "
                       "prediction (BERT: 15%%; of those 80%% become "
                       "[MASK], 10%% a random token, 10%% stay).")
    group.add_argument("--noise_density", type=float, default=0.15,
                       help="span_corruption: fraction of the tokens "
                       "dropped into spans.")
    group.add_argument("--mean_noise_span_length", type=float, default=3.0,
                       help="span_corruption: mean length of a dropped "
                       "span.")
    group.add_argument("--num_sentinels", type=flags.positive_int, default=100,
                       help="span_corruption: sentinel tokens reserved in "
                       "a learned vocabulary (one per span of a window).")

    flags.add_common_flags(parser, default_batch_size=32, default_epochs=1,
                            default_learning_rate=1e-3,
                            model_dir_default="runs/pretrain/<objective>-"
                            "<dataset>-<variant>")
    group = parser.add_argument_group("training (pretraining)")
    group.add_argument("--steps_per_epoch", type=flags.positive_int,
                       default=None,
                       help="Batches per epoch (a step budget: --epochs x "
                       "--steps_per_epoch batches; a backup after each "
                       "epoch). Default: one pass over the training "
                       "windows, the last batch filled from the next "
                       "pass.")
    flags.add_time_budget_flag(group)
    group.add_argument("--eval_batch_size", type=flags.positive_int,
                       default=64,
                       help="Batch size of the held-out scoring.")
    group.add_argument("--no_tensorboard", dest="tensorboard",
                       action="store_false",
                       help="Skip the TensorBoard logs (by default written "
                       "to <model_dir>/logs).")
    return parser


# A run directory may be restarted with another time budget, or trained
# further.
RUNTIME_FLAGS = run_directory.RUNTIME_FLAGS | {
    "time_budget_minutes", "eval_batch_size"}


def validate_args(args, check_options=True):
    """Canonicalises `args` in place; ValueError on bad values.

    Pure Python, called before TensorFlow is imported, except the check of
    the synthesizer options' values (`check_options`), which imports Keras.
    Idempotent: `run` calls it again with that check.
    """
    args.synthesizer = model_flags.canonical_synthesizer(
        "synthesizer", args.synthesizer)
    variants = ("synthesizer",)
    if args.objective == "span_corruption":
        args.cross_attention_synthesizer = model_flags.canonical_synthesizer(
            "cross_attention_synthesizer", args.cross_attention_synthesizer)
        variants += ("cross_attention_synthesizer",)
    flags.check_hidden_dim(args.hidden_dim, args.num_heads)
    args.synthesizer_options = model_flags.synthesizer_options(
        args, flags=variants, max_length=args.sequence_length,
        check_values=check_options)
    for name in ("mask_selection_rate", "noise_density"):
        if not 0.0 < getattr(args, name) < 1.0:
            raise ValueError(f"Argument `--{name}` must be in (0, 1). "
                             f"Received: --{name}={getattr(args, name)}")
    if args.mean_noise_span_length < 1:
        raise ValueError("Argument `--mean_noise_span_length` must be at "
                         "least 1. Received: --mean_noise_span_length="
                         f"{args.mean_noise_span_length}")
    if not 0.0 <= args.valid_fraction < 1.0:
        raise ValueError("Argument `--valid_fraction` must be in [0, 1). "
                         f"Received: --valid_fraction={args.valid_fraction}")
    if args.valid_fraction == 0 and not args.valid_file:
        raise ValueError("Argument `--valid_fraction`=0 holds nothing out; "
                         "pass a --valid_file or a fraction such as 0.05 "
                         "(the held-out scores are the run's result).")
    if not 0.0 <= args.dropout < 1.0:
        raise ValueError("Argument `--dropout` must be in [0, 1). "
                         f"Received: --dropout={args.dropout}")
    if args.sequence_length < 8:
        raise ValueError("Argument `--sequence_length` must be at least 8 "
                         "(a window holds [CLS], [SEP] and the tokens). "
                         f"Received: --sequence_length={args.sequence_length}")
    if args.train_files:
        if args.dataset not in (data_lib.BUILTIN, data_lib.FILES):
            raise ValueError(
                f"Argument `--train_files` reads text files; don't pass "
                f"--dataset={args.dataset} with it.")
        args.dataset = data_lib.FILES
    elif args.dataset == data_lib.FILES:
        raise ValueError("Argument `--dataset=files` needs --train_files.")
    if args.model_dir is None:
        args.model_dir = os.path.join(
            "runs", "pretrain",
            f"{args.objective}-{args.dataset.replace('/', '_')}-"
            f"{args.synthesizer.replace('+', '_')}")


def load_corpus(args):
    """`{"train": lines, "valid": lines or None}` as the arguments ask."""
    if args.dataset == data_lib.BUILTIN:
        train = data_lib.builtin_texts()
    elif args.dataset == data_lib.FILES:
        train = data_lib.read_lines(
            data_lib.expand_patterns(args.train_files),
            "training file (--train_files)", args.tsv_column)
    else:
        train = data_lib.read_tfds(args.dataset, args.tfds_data_dir,
                                   args.max_train_examples)
    if args.max_train_examples:
        train = train[:args.max_train_examples]
    valid = None
    if args.valid_file:
        valid = data_lib.read_lines([args.valid_file],
                                    "held-out file (--valid_file)",
                                    args.tsv_column)
    return {"train": train, "valid": valid}


def run(args, log=print):
    """Runs the recipe for parsed `args`; returns the results dict."""
    wall_start = time.time()
    # The strategy first, before TensorFlow runs any op (multi-worker, TPU).
    corpus, run_dir, strategy = experiment.open_run(
        args, validate_args, lambda _: load_corpus(args), RUNTIME_FLAGS, log)
    log(f"Corpus ({args.dataset}): {len(corpus['train']):,} training "
        "documents" + (f", {len(corpus['valid']):,} held-out documents"
                       if corpus["valid"] else ""))

    from recipes.core import vocabulary
    from recipes.pretrain import objectives

    objective = objectives.get(args.objective)

    def prepare():  # the chief's vocabulary and backup, for every worker
        vocab = vocabulary.prepare_vocabulary(
            run_dir, lambda: corpus["train"], vocab_file=args.vocab_file,
            vocab_size=args.vocab_size, lowercase=args.lowercase, log=log,
            learn_options=objective.vocabulary_options(args),
            reserved_tokens=objective.reserved_tokens(args))
        return vocab, run_dir.resume()

    vocab, initial_epoch = workers.chief_first(strategy, prepare)
    tokenizer = objectives.make_tokenizer(vocab, args.lowercase)
    window = objective.window_length(args)
    start = time.time()
    train_docs = objectives.encode(tokenizer, corpus["train"])
    end_id = tokenizer.token_to_id("[SEP]")
    windows, lengths = data_lib.pack_windows(train_docs, window, end_id)
    if corpus["valid"]:
        train = (windows, lengths)
        valid = data_lib.pack_windows(
            objectives.encode(tokenizer, corpus["valid"]), window, end_id)
    else:
        train, valid = data_lib.hold_out(windows, lengths,
                                         args.valid_fraction, args.seed)
    tokens = int(lengths.sum())
    log(f"Packed {tokens:,} tokens (vocabulary {len(vocab):,}, "
        f"{objectives.count_unknown(tokenizer, train_docs):,} unknown) into "
        f"{len(windows):,} windows of {window} tokens in "
        f"{time.time() - start:.1f}s: {len(train[0]):,} for training, "
        f"{len(valid[0]):,} held out (the last window padded with "
        f"{window - int(lengths[-1])} tokens; none dropped).")
    one_pass = -(-len(train[0]) // args.batch_size)
    steps_per_epoch = args.steps_per_epoch or one_pass
    steps_per_execution = flags.steps_per_execution(
        args.steps_per_execution, args.strategy, steps_per_epoch)
    train_ds = objective.train_dataset(tokenizer, train, args,
                                       steps_per_epoch, initial_epoch)
    valid_ds = objective.heldout_dataset(tokenizer, valid, args)

    def build():
        model = objective.build_model(tokenizer, args)
        objectives.compile_model(model, args, steps_per_epoch * args.epochs,
                                 steps_per_execution)
        return model

    def describe(parameters):
        return (f"Model: {objective.describe(args)}: {parameters:,} "
                f"trainable parameters; {steps_per_epoch} steps per epoch "
                f"({steps_per_epoch / one_pass:.2f} passes over the "
                f"training windows), {args.epochs} epochs.")

    def evaluate(model, run):
        speed = timing.training_speed(
            run["steps_per_second"], args.batch_size * args.sequence_length,
            "window positions", "steps/s x batch_size x sequence_length "
            "(window positions, padding included)", log)
        heldout = objectives.score(model, valid_ds)
        log(f"Held-out ({heldout['predicted_tokens']:,} predicted tokens): "
            f"loss {heldout['loss']:.4f}, accuracy "
            f"{heldout['accuracy']:.4f}.")
        return {
            "objective": args.objective,
            "dataset": args.dataset,
            "synthesizer": args.synthesizer,
            "heldout": heldout,
            "vocabulary_size": len(vocab),
            "corpus_tokens": tokens,
            "windows": {"train": len(train[0]), "heldout": len(valid[0]),
                        "length": window},
            **speed,
        }

    def export(model):  # on the chief
        path = run_dir.path("preset")
        serving.save_preset(path, model)
        log(f"Saved a keras-hub preset to {path} (fine-tune with "
            f"{objective.fine_tune_hint(path)})")
        return {"preset": path}

    return experiment.train_and_evaluate(
        args, run_dir, strategy, build, train_ds, steps_per_epoch, evaluate,
        export=export, describe=describe,
        # Scored by a callback, not `fit`'s validation: eagerly on every
        # worker, exactly (a distributed evaluation splits the last,
        # smaller held-out batch unevenly over the workers).
        extra_callbacks=[objectives.HeldOutScores(valid_ds)],
        fit_context=training.without_preprocessor,
        wall_start=wall_start, log=log)


def main(argv=None):
    """Command-line entry point; returns the exit status (2 on bad input,
    with one line `python -m recipes.pretrain: error: ...`)."""
    return runtime.run_main(build_parser(), run, PROG, argv,
                            validate=validate_args,
                            input_paths=("vocab_file", "valid_file"))
