"""`python -m recipes.dialogue`: train a Synthesizer encoder-decoder on
(persona + dialogue history -> response), then respond and score
(BLEU-1/4, ROUGE-L).

The summarization recipe's pattern: the encoder-decoder recipes' model,
training, decoding and export (`recipes.core.seq2seq_run.run_seq2seq`)
with dialogue data and metrics.

Examples:

    # The built-in synthetic chats, offline, minutes on 2 CPU cores:
    python -m recipes.dialogue --dataset=builtin --synthesizer=dense

    # PersonaChat / ConvAI2 as released (train_self_original.txt, ...):
    python -m recipes.dialogue --data_dir=personachat --persona=self \\
        --persona_file_kind=original --max_history=3 --synthesizer=dense
"""

import os

from recipes import cli
from recipes.core import flags
from recipes.core import presets
from recipes.core import runtime
from recipes.core import seq2seq
from recipes.core import seq2seq_run
from recipes.dialogue import data as data_lib
from recipes.dialogue import metrics

PROG = "python -m recipes.dialogue"


def build_parser():
    parser = cli.ArgumentParser(
        prog=PROG,
        description="Train an encoder-decoder Transformer of "
        "SynthesizerEncoder/SynthesizerDecoder blocks on PersonaChat-style "
        "dialogues (persona + history -> response), then respond to the "
        "validation and test turns (greedy and beam search) and score the "
        "responses (BLEU-1/4, ROUGE-L).",
        formatter_class=cli.HelpFormatter, conflict_handler="resolve")
    group = parser.add_argument_group("data")
    group.add_argument("--dataset", choices=(data_lib.BUILTIN, "files"),
                       default=None,
                       help="'builtin' (small synthetic chats shipped with "
                       "the package; the default) or 'files' (the default "
                       "with --data_dir).")
    group.add_argument("--data_dir", default=None,
                       help="A folder of PersonaChat's released text files, "
                       "<split>_<persona>_<kind>.txt (.gz read "
                       "transparently; local or gs://): train and valid, "
                       "test if present.")
    group.add_argument("--persona", choices=data_lib.PERSONAS,
                       default="self",
                       help="Which files: the responder's persona (self), "
                       "the partner's (other) or none.")
    group.add_argument("--persona_file_kind", choices=data_lib.FILE_KINDS,
                       default="original",
                       help="PersonaChat's original personas or the "
                       "revised (rephrased) ones.")
    group.add_argument("--max_history", type=flags.positive_int, default=3,
                       help="Turns of history in the source (the last "
                       "ones, the partner's utterance last).")
    seq2seq.add_length_flags(group, "source", "response", 128, 32)
    seq2seq.add_seq2seq_flags(
        parser, "runs/dialogue/<dataset>-<variant>",
        "sources responded to together", "BLEU and ROUGE keep it")
    presets.defer_defaults(parser, seq2seq.GENERATION_MODEL_DEFAULTS)
    return parser


def validate_args(args, check_options=True):
    """Canonicalises `args` in place; ValueError on bad values."""
    seq2seq.validate_lengths(args, PROG, check_options)
    if args.data_dir:
        if args.dataset == data_lib.BUILTIN:
            raise ValueError("--dataset=builtin reads the data shipped with "
                             "the package; don't pass --data_dir with it.")
        args.dataset = "files"
    elif args.dataset == "files":
        raise ValueError("Argument `--data_dir` is required with "
                         "--dataset=files.")
    args.dataset = args.dataset or data_lib.BUILTIN
    if args.dataset == data_lib.BUILTIN and (
            args.persona, args.persona_file_kind) != ("self", "original"):
        raise ValueError("--dataset=builtin has self_original files only.")
    if args.model_dir is None:
        args.model_dir = os.path.join(
            "runs", "dialogue",
            f"{args.dataset}-{args.synthesizer.replace('+', '_')}")


def load_corpus(args):
    """`{split: Parallel}` of sources (persona + history) and responses."""
    files = (data_lib.split_files(args.data_dir, args.persona,
                                  args.persona_file_kind)
             if args.dataset == "files" else
             data_lib.split_files(data_lib.builtin_dir()))
    return data_lib.load(files, args.max_history, args.persona != "none")


# The SavedModel's signature: `respond(source=...)` -> `response`, the
# source built as `data.examples` builds it.
ENDPOINT = seq2seq.Endpoint(
    "respond", "source", "response",
    "persona: i like to ski . i have two dogs . "
    "history: hi , how are you ? | good , and you ? | i just got back "
    "from the mountains .")


def dialogue_task():
    """The `seq2seq.Task`: BLEU-1/4 and ROUGE-L of greedy decoding and beam
    search; results.json `not_computed` says why METEOR/CIDEr are null."""
    return seq2seq.generation_task(
        ("source", "response"), metrics.score, metrics.describe, "scores",
        "responses", ENDPOINT, {"not_computed": metrics.not_computed()})


def run(args, log=print):
    """Runs the recipe for parsed `args`; returns the results dict."""
    return seq2seq_run.run(args, PROG, validate_args, load_corpus,
                           lambda *_: dialogue_task(), log)


def main(argv=None):
    """Command-line entry point; returns the exit status (2 on bad input)."""
    return runtime.run_main(build_parser(), run, PROG, argv,
                            validate=validate_args,
                            input_paths=["vocab_file", "tgt_vocab_file",
                                         "data_dir"])
