"""`python -m recipes.summarize`: train a Synthesizer encoder-decoder on
documents and their summaries, then summarize and score (ROUGE-1/2/L).

The encoder-decoder recipes' model, training, decoding and export
(`recipes.core.seq2seq_run.run_seq2seq`) with summarization's data,
lengths and metrics.

Examples:

    # The built-in synthetic news task, offline, minutes on 2 CPU cores:
    python -m recipes.summarize --dataset=builtin --synthesizer=dense+vanilla

    # `document<TAB>summary` files (.gz read transparently; gs:// too):
    python -m recipes.summarize --train_file=train.tsv.gz \\
        --valid_file=valid.tsv.gz --test_file=test.tsv.gz

    # CNN/DailyMail from tensorflow_datasets (needs a download):
    python -m recipes.summarize --dataset=cnn_dailymail \\
        --synthesizer=dense+vanilla --max_source_length=400 \\
        --max_target_length=100 --vocab_size=32000
"""

import os

from recipes import cli
from recipes.core import data_files
from recipes.core import presets
from recipes.core import runtime
from recipes.core import seq2seq
from recipes.core import seq2seq_run
from recipes.core import text_metrics
from recipes.summarize import data as data_lib
from recipes.summarize import metrics

PROG = "python -m recipes.summarize"


def build_parser():
    parser = cli.ArgumentParser(
        prog=PROG,
        description="Train an encoder-decoder Transformer of "
        "SynthesizerEncoder/SynthesizerDecoder blocks on documents and "
        "summaries, then summarize the validation and test sets (greedy "
        "and beam search) and score them (ROUGE-1/2/L F-measure, with the "
        "lead-3 baseline).",
        formatter_class=cli.HelpFormatter, conflict_handler="resolve")
    group = parser.add_argument_group("data")
    data_files.add_data_source_flags(
        group, data_lib.SPLITS, "cnn_dailymail",
        "cnn_dailymail (tensorflow_datasets, needs a download), 'builtin' "
        "(a small synthetic news task shipped with the package), or "
        "'files' (set by --train_file).",
        lambda split: f"The {split} split: `document<TAB>summary` lines "
        "(.gz read transparently; local or gs://).")
    seq2seq.add_length_flags(group, "document", "summary", 400, 100)
    seq2seq.add_seq2seq_flags(
        parser, "runs/summarize/<dataset>-<variant>",
        "documents summarized together", "ROUGE lowercases anyway")
    presets.defer_defaults(parser, seq2seq.GENERATION_MODEL_DEFAULTS)
    return parser


def validate_args(args, check_options=True):
    """Canonicalises `args` in place (as the translation recipe's);
    ValueError on bad values."""
    seq2seq.validate_lengths(args, PROG, check_options)
    if args.train_file:
        if args.dataset == data_lib.BUILTIN:
            raise ValueError("--dataset=builtin reads the data shipped with "
                             "the package; don't pass --train_file with it.")
        args.dataset = "files"
    elif args.valid_file or args.test_file or args.dataset == "files":
        raise ValueError("Argument `--train_file` is required with "
                         "`document<TAB>summary` files.")
    if args.model_dir is None:
        args.model_dir = os.path.join(
            "runs", "summarize",
            f"{args.dataset}-{args.synthesizer.replace('+', '_')}")


def load_corpus(args):
    """`{split: Parallel}` of documents and summaries."""
    if args.dataset == "files":
        return data_lib.load_files({split: getattr(args, f"{split}_file")
                                    for split in data_lib.SPLITS})
    if args.dataset == data_lib.BUILTIN:
        return data_lib.load_files(data_lib.builtin_files())
    return data_lib.load_tfds(args.dataset, args.tfds_data_dir)


# The SavedModel's signature: `summarize(document=...)` -> `summary`.
ENDPOINT = seq2seq.Endpoint(
    "summarize", "document", "summary",
    "A storm closed the coast road on Monday. Crews cleared it by noon. "
    "Officials said the road would stay open.")


def summarization_task(args, corpus, log=print):
    """The `seq2seq.Task`: ROUGE of greedy decoding and beam search, and
    the lead-3 baseline scored the same way."""
    lead3 = {}
    for split in ("valid", "test"):
        if split in corpus:
            # The pairs the model's summaries are scored on.
            pairs = corpus[split].head(args.max_decode_examples)
            lead3[split] = text_metrics.rouge(
                [metrics.lead(d) for d in pairs.src], pairs.tgt)
            log(f"{split}: lead-3 baseline {metrics.describe(lead3[split])}.")

    return seq2seq.generation_task(
        ("document", "summary"), text_metrics.rouge, metrics.describe,
        "rouge", "summaries", ENDPOINT, {"lead3": lead3})


def run(args, log=print):
    """Runs the recipe for parsed `args`; returns the results dict."""
    return seq2seq_run.run(args, PROG, validate_args, load_corpus,
                           summarization_task, log)


def main(argv=None):
    """Command-line entry point; returns the exit status (2 on bad input)."""
    paths = ["vocab_file", "tgt_vocab_file"] + [
        f"{split}_file" for split in data_lib.SPLITS]
    return runtime.run_main(build_parser(), run, PROG, argv,
                            validate=validate_args, input_paths=paths)
