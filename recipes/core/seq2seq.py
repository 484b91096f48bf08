"""What the encoder-decoder recipes share (translation, summarization,
dialogue), before TensorFlow: their flags (`add_seq2seq_flags`, and
`add_length_flags` of the text-to-text ones), the checks of those flags
(`validate_seq2seq_args`, `validate_lengths`) and the `Task` a recipe gives
`recipes.core.seq2seq_run.run_seq2seq` (`generation_task`: a text-to-text
recipe's).

Pure Python, no Keras or TensorFlow at import.
"""

import dataclasses

from recipes.core import flags
from recipes.core import model_flags
from recipes.core import presets
from recipes.core import run_directory

# The architecture flags: a preset decides them (`presets.resolve_flags`);
# these are their defaults without one.
MODEL_DEFAULTS = {"synthesizer": "random+vanilla",
                  "cross_attention_synthesizer": "vanilla", "num_layers": 3,
                  "hidden_dim": 256, "num_heads": 4, "intermediate_dim": None,
                  "synthesizer_options": None, "max_length": 64,
                  "vocab_size": 8000, "lowercase": False,
                  "normalize_first": False}
PRESET_BACKBONES = ("SynthesizerSeq2SeqBackbone",)
# The text-to-text recipes' (summarization, dialogue): their lengths
# are `--max_source_length` and `--max_target_length`.
GENERATION_MODEL_DEFAULTS = {key: value for key, value in
                             MODEL_DEFAULTS.items() if key != "max_length"}


def add_seq2seq_flags(parser, model_dir_default, decode_help, case_help):
    """The flags every encoder-decoder recipe shares (translation,
    summarization): model, training, decoding and outputs, fine-tuning."""
    group = parser.add_argument_group("model")
    model_flags.add_model_flags(
        group, num_layers=3, hidden_dim=256,
        layers_help="Blocks in the encoder and in the decoder.",
        synthesizer_help="Self-attention variant of every block (causal in "
        "the decoder)")
    group.add_argument("--cross_attention_synthesizer", default="vanilla",
                       help="Variant of the decoder's cross-attention "
                       "(vanilla in the paper).")
    group.add_argument("--label_smoothing", type=float, default=0.1,
                       help="Label smoothing of the cross-entropy.")
    group.add_argument("--normalize_first", action="store_true",
                       help="Pre-LN blocks (without it: post-LN, as in the "
                       "paper).")
    group.add_argument("--vocab", choices=("shared", "separate"),
                       default="shared",
                       help="One WordPiece vocabulary for both languages "
                       "(embeddings shared too) or one per language.")
    group.add_argument("--tgt_vocab_file", default=None,
                       help="Target vocabulary with --vocab=separate "
                       "(--vocab_file is then the source vocabulary); "
                       "learned when not given.")
    group.add_argument("--lowercase", action="store_true",
                       help="Lowercase text in the tokenizer (by default "
                       f"case is kept; {case_help}).")

    flags.add_common_flags(
        parser, default_batch_size=64, default_epochs=10,
        default_learning_rate=1e-3,
        model_dir_default=model_dir_default)
    # Three shared flags mean something else here: added again with their
    # help (the parser's conflict_handler="resolve" replaces the shared
    # ones).
    group = parser.add_argument_group("training (translation)")
    group.add_argument("--learning_rate", type=float, default=1e-3,
                       help="Peak learning rate of the Transformer schedule "
                       "(linear warmup, then inverse square root decay); "
                       "Adam(0.9, 0.98, 1e-9).")
    group.add_argument("--weight_decay", type=float, default=0.0,
                       help="AdamW weight decay (0: Adam, as in the paper).")
    group.add_argument("--warmup_fraction", type=float, default=0.1,
                       help="Warmup as a fraction of all training steps, "
                       "unless --warmup_steps is given.")
    group.add_argument("--warmup_steps", type=flags.positive_int, default=None,
                       help="Warmup steps (the paper: 4000). Default: "
                       "--warmup_fraction of all training steps.")
    flags.add_time_budget_flag(group)

    group = parser.add_argument_group("decoding and outputs")
    group.add_argument("--beam_size", type=flags.positive_int, default=4,
                       help="1 for greedy decoding.")
    group.add_argument("--length_penalty", type=float, default=0.6,
                       help="Beam search's alpha (>= 0): scores are log p / "
                       "((5 + length) / 6) ** alpha.")
    group.add_argument("--decode_batch_size", type=flags.positive_int,
                       default=64,
                       help=decode_help.capitalize() + ".")
    group.add_argument("--max_decode_examples", type=flags.positive_int,
                       default=None,
                       help="Decode and score only the first N pairs of "
                       "each evaluated split (default: all); the log and "
                       "results.json `decoded_pairs` say how many of how "
                       "many. The validation loss still uses every pair.")
    flags.add_output_switches(group)
    group = parser.add_argument_group("fine-tuning")
    group.add_argument(
        "--preset", default=None,
        help="Fine-tune from a keras-hub preset folder holding a "
        "SynthesizerSeq2SeqBackbone (recipes.pretrain "
        "--objective=span_corruption's <model_dir>/preset, or a "
        "SynthesizerSeq2SeqLM preset): its weights, shared WordPiece "
        "vocabulary and architecture (a model flag that contradicts it is "
        "an error). The lengths may be shorter than the preset's.")


# Flags a run directory may be restarted with: decoding flags (a finished
# run can be decoded again with another beam size), and the length of
# training (`--epochs`, `--time_budget_minutes`: a run can be trained
# further; with a fixed `--warmup_steps` the schedule does not change).
RUNTIME_FLAGS = run_directory.RUNTIME_FLAGS | {
    "beam_size", "length_penalty", "decode_batch_size", "tgt_vocab_file",
    "max_decode_examples",
    "epochs", "time_budget_minutes",
}


def validate_seq2seq_args(args, prog, check_options=True):
    """The checks every encoder-decoder recipe shares (`args.max_length`
    set): the preset (`prog` names the recipe in its messages), the
    synthesizers and their options, the numbers."""
    preset = presets.apply_preset(
        args, prog, PRESET_BACKBONES, MODEL_DEFAULTS, length_flag="max_length",
        flags_to_config={
            flag: flag for flag in (
                "synthesizer", "cross_attention_synthesizer", "num_layers",
                "hidden_dim", "num_heads", "intermediate_dim",
                "synthesizer_options", "normalize_first")},
        flag_names={"lowercase": "--lowercase",
                    "normalize_first": "--normalize_first"})
    if preset is not None and args.vocab != "shared":
        raise ValueError(
            f"Argument `--vocab={args.vocab}`: the preset {args.preset} "
            "brings one vocabulary for both languages; use --vocab=shared.")
    if preset is not None and preset.backbone.get("encoder_vocabulary_size"):
        raise ValueError(
            f"Argument `--preset`: {args.preset} has a source vocabulary of "
            "its own (encoder_vocabulary_size); the recipe fine-tunes "
            "presets with one shared vocabulary.")
    args.synthesizer_options = model_flags.synthesizer_options(
        args, ("synthesizer", "cross_attention_synthesizer"),
        max_length=args.max_length,
        check_values=check_options)
    if args.max_length < 3:
        raise ValueError(f"Argument `--max_length` must be at least 3 "
                         f"([CLS], a token, [SEP]). Received: "
                         f"--max_length={args.max_length}")
    flags.check_hidden_dim(args.hidden_dim, args.num_heads)
    if args.length_penalty < 0:
        raise ValueError(f"Argument `--length_penalty` must be >= 0. "
                         f"Received: --length_penalty={args.length_penalty}")
    for name in ("dropout", "label_smoothing"):
        value = getattr(args, name)
        if not 0.0 <= value < 1.0:
            raise ValueError(f"Argument `--{name}` must be in [0, 1). "
                             f"Received: --{name}={value}")
    if args.tgt_vocab_file and args.vocab != "separate":
        raise ValueError("Argument `--tgt_vocab_file` needs "
                         "`--vocab=separate`.")


@dataclasses.dataclass(frozen=True)
class Endpoint:
    """The serving signature of a recipe's SavedModel.

    Attributes:
        signature: the signature's name (`reloaded.signatures[name]`).
        input_name: its string input, a `(batch,)` tensor of raw texts.
        output_name: its string output, `(batch,)`, detokenized.
        example: a raw input text for the usage example.
    """

    signature: str
    input_name: str
    output_name: str
    example: str

    @property
    def what(self):
        """How the log line describes the export."""
        return f"signature {self.signature!r}, strings in and out"


TRANSLATE = Endpoint("translate", "source", "translation",
                     "Ein kleiner Hund spielt im Park.")


@dataclasses.dataclass
class Task:
    """What an encoder-decoder recipe adds to `run_seq2seq`.

    Attributes:
        sides: the names of the source and target (logs, file names).
        searches: `(args) -> [beam_size]`, the searches each evaluated
            split is decoded with (1: greedy).
        score: `(hypotheses, references) -> dict` of metrics.
        describe: `(scores) -> str`, the metrics in a log line.
        results: `(outputs) -> dict`, the task's results.json entries from
            `{beam_size: {split: {"scores", "decoding", "file"}}}`.
        output_file: `(split, beam_size) -> str`, the name of a split's
            outputs in the run directory.
        cut: whether a training pair too long is cut (counted in
            results.json `cut`, with the sources cut per evaluated split)
            rather than dropped.
        length_flag: the flag of the source length (messages).
        endpoint: the SavedModel's signature, input and output names
            (an `Endpoint`; None: translation's, `TRANSLATE`).
    """

    sides: tuple
    searches: object
    score: object
    describe: object
    results: object
    output_file: object = None
    cut: bool = False
    length_flag: str = "max_length"
    endpoint: object = None


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


def validate_lengths(args, prog, check_options=True):
    """The length checks of `add_length_flags`, `args.max_length` set, then
    the encoder-decoder checks (`validate_seq2seq_args`)."""
    for flag in ("max_source_length", "max_target_length"):
        if getattr(args, flag) < 3:
            raise ValueError(f"Argument `--{flag}` must be at least 3. "
                             f"Received: --{flag}={getattr(args, flag)}")
    # The model's max_length (position embeddings, synthesizers).
    args.max_length = max(args.max_source_length, args.max_target_length)
    validate_seq2seq_args(args, prog, check_options)


def search_name(beam_size):
    return "greedy" if beam_size == 1 else f"beam{beam_size}"


def generation_task(sides, score, describe, scores_key, outputs_key,
                    endpoint, extra=None):
    """The `Task` of a text-to-text recipe (summarization,
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

    return Task(
        sides=sides, searches=lambda a: sorted({1, a.beam_size}),
        score=score, describe=describe, results=results,
        output_file=lambda split, beam: (
            f"{outputs_key}.{split}.{search_name(beam)}.txt"),
        cut=True, length_flag="max_source_length", endpoint=endpoint)
