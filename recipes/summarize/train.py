"""`python -m recipes.summarize`: train a Synthesizer encoder-decoder on
documents and their summaries, then summarize and score (ROUGE-1/2/L).

The translation recipe's model, training, decoding and export
(`recipes.translate.train.run_seq2seq`) with summarization's data, lengths
and metrics.

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
import time

from recipes import cli
from recipes.core import data_files
from recipes.core import experiment
from recipes.core import flags
from recipes.core import presets
from recipes.core import runtime
from recipes.summarize import data as data_lib
from recipes.summarize import metrics
from recipes.translate import train as seq2seq

PROG = "python -m recipes.summarize"
MODEL_DEFAULTS = {key: value for key, value in seq2seq.MODEL_DEFAULTS.items()
                  if key != "max_length"}


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
    add_length_flags(group, "document", "summary", 400, 100)
    seq2seq.add_seq2seq_flags(
        parser, "runs/summarize/<dataset>-<variant>",
        "documents summarized together", "ROUGE lowercases anyway")
    presets.defer_defaults(parser, MODEL_DEFAULTS)
    return parser


def add_length_flags(group, source, target, source_default,
                     target_default):
    """`--max_train_examples`, `--max_source_length` and
    `--max_target_length` (of a text-to-text recipe: summarization,
    dialogue); `source` and `target` name the sides in the help."""
    group.add_argument("--max_train_examples", type=flags.positive_int,
                       default=None, help="Use only the first N training "
                       f"{source}s (default: all).")
    group.add_argument(
        "--max_source_length", type=flags.positive_int,
        default=source_default,
        help=f"Longest {source} in tokens with [CLS] and [SEP]; longer "
        "ones are cut (counted per split in the log and results.json).")
    group.add_argument(
        "--max_target_length", type=flags.positive_int,
        default=target_default,
        help=f"Longest {target} in tokens with [CLS] (training {target}s "
        "longer are cut, counted), and the longest generated.")


def validate_lengths(args, check_options=True):
    """The length checks of `add_length_flags`, `args.max_length` set, then
    the encoder-decoder checks (`validate_seq2seq_args`)."""
    for flag in ("max_source_length", "max_target_length"):
        if getattr(args, flag) < 3:
            raise ValueError(f"Argument `--{flag}` must be at least 3. "
                             f"Received: --{flag}={getattr(args, flag)}")
    # The model's max_length (position embeddings, synthesizers).
    args.max_length = max(args.max_source_length, args.max_target_length)
    seq2seq.validate_seq2seq_args(args, check_options)


def validate_args(args, check_options=True):
    """Canonicalises `args` in place (as the translation recipe's);
    ValueError on bad values."""
    validate_lengths(args, check_options)
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


def summarization_task(args, corpus, log=print):
    """The `seq2seq.Task`: ROUGE of greedy decoding and beam search, and
    the lead-3 baseline scored the same way."""
    lead3 = {}
    for split in ("valid", "test"):
        if split in corpus:
            pairs = corpus[split]
            lead3[split] = metrics.rouge(
                [metrics.lead(d) for d in pairs.src], pairs.tgt)
            log(f"{split}: lead-3 baseline {metrics.describe(lead3[split])}.")

    return generation_task(("document", "summary"), metrics.rouge,
                           metrics.describe, "rouge", "summaries",
                           {"lead3": lead3})


def search_name(beam_size):
    return "greedy" if beam_size == 1 else f"beam{beam_size}"


def generation_task(sides, score, describe, scores_key, outputs_key,
                    extra=None):
    """The `seq2seq.Task` of a text-to-text recipe (summarization,
    dialogue): greedy decoding and beam search (`--beam_size` > 1), long
    sources cut; results.json `scores_key` `{search: {split: scores}}`,
    `decoding`, `outputs_key` (the output files
    `<outputs_key>.<split>.<search>.txt`) and the `extra` entries."""
    def results(outputs):
        def per_search(entry):
            return {search_name(beam): {
                split: o[entry] for split, o in splits.items()
                if o[entry] or entry != "file"}  # files: those written
                    for beam, splits in outputs.items()}

        return {scores_key: per_search("scores"), **(extra or {}),
                "decoding": per_search("decoding"),
                outputs_key: per_search("file")}

    return seq2seq.Task(
        sides=sides, searches=lambda a: sorted({1, a.beam_size}),
        score=score, describe=describe, results=results,
        output_file=lambda split, beam: (
            f"{outputs_key}.{split}.{search_name(beam)}.txt"),
        cut=True, length_flag="max_source_length")


def run_generation(args, validate, load, make_task, log=print):
    """Opens the run (`validate(args, check_options)`, `load(args)` the
    corpus) and runs `seq2seq.run_seq2seq` with `make_task(args, corpus,
    log)`; returns the results dict."""
    wall_start = time.time()
    corpus, run_dir, strategy = experiment.open_run(
        args, validate, lambda _: load(args), seq2seq.RUNTIME_FLAGS, log)
    return seq2seq.run_seq2seq(args, corpus, run_dir, strategy,
                               make_task(args, corpus, log), wall_start, log)


def run(args, log=print):
    """Runs the recipe for parsed `args`; returns the results dict."""
    return run_generation(args, validate_args, load_corpus,
                          summarization_task, log)


def main(argv=None):
    """Command-line entry point; returns the exit status (2 on bad input)."""
    paths = ["vocab_file", "tgt_vocab_file"] + [
        f"{split}_file" for split in data_lib.SPLITS]
    return runtime.run_main(build_parser(), run, PROG, argv,
                            validate=validate_args, input_paths=paths)
