"""`python -m recipes.translate`: train a Synthesizer encoder-decoder, then
translate and score.

Examples:

    # The built-in German-English task, offline, minutes on 2 CPU cores:
    python -m recipes.translate --src=de --tgt=en --dataset=builtin \\
        --synthesizer=random+vanilla

    # Parallel text files (Multi30k, IWSLT, WMT as distributed; .gz is fine):
    python -m recipes.translate --src=de --tgt=en --synthesizer=dense \\
        --train_src=multi30k/train.de.gz --train_tgt=multi30k/train.en.gz \\
        --valid_src=multi30k/val.de.gz --valid_tgt=multi30k/val.en.gz

    # WMT'14 En-De from tensorflow_datasets, base-sized, on a TPU:
    python -m recipes.translate --src=en --tgt=de --synthesizer=random \\
        --dataset=wmt14_translate --hidden_dim=512 --num_layers=6 \\
        --num_heads=8 --intermediate_dim=2048 --vocab_size=32000 \\
        --strategy=tpu --tpu=local --mixed_precision=bfloat16 --jit_compile
"""

import dataclasses
import os
import time

from recipes import cli
from recipes import serving
from recipes.core import data_files
from recipes.core import experiment
from recipes.core import flags
from recipes.core import model_flags
from recipes.core import presets
from recipes.core import run_directory
from recipes.core import storage
from recipes.core import runtime
from recipes.core import timing
from recipes.core import vocabulary
from recipes.core import workers
from recipes.translate import data as data_lib

PROG = "python -m recipes.translate"
# The architecture flags: a preset decides them (`presets.resolve_flags`);
# these are their defaults without one.
MODEL_DEFAULTS = {"synthesizer": "random+vanilla",
                  "cross_attention_synthesizer": "vanilla", "num_layers": 3,
                  "hidden_dim": 256, "num_heads": 4, "intermediate_dim": None,
                  "synthesizer_options": None, "max_length": 64,
                  "vocab_size": 8000, "lowercase": False,
                  "normalize_first": False}
PRESET_BACKBONES = ("SynthesizerSeq2SeqBackbone",)


def build_parser():
    parser = cli.ArgumentParser(
        prog=PROG,
        description="Train an encoder-decoder Transformer of "
        "SynthesizerEncoder/SynthesizerDecoder blocks, then translate the "
        "validation and test sets (greedy or beam search) and score them "
        "with sacrebleu (BLEU, chrF).",
        formatter_class=cli.HelpFormatter,
        conflict_handler="resolve",
    )
    group = parser.add_argument_group("languages and data")
    group.add_argument("--src", required=True,
                       help="Source language code (de, en, fr, ...).")
    group.add_argument("--tgt", required=True,
                       help="Target language code.")
    group.add_argument(
        "--dataset", default="wmt14_translate",
        help="A tensorflow_datasets translation set (wmt14_translate, "
        "wmt15_translate, ...; the config is the language pair; needs a "
        "download), or 'builtin': a small German-English task shipped with "
        "the package. Offline, use --dataset=builtin or parallel text "
        "files (--train_src/--train_tgt, which override --dataset).")
    data_files.add_tfds_data_dir_flag(group)
    for split in data_lib.SPLITS:
        for side in ("src", "tgt"):
            group.add_argument(
                f"--{split}_{side}", default=None,
                help=f"Parallel text file: {split} split, "
                f"{'source' if side == 'src' else 'target'} side (one "
                "sentence a line; .gz read transparently).")
    group.add_argument("--max_train_examples", type=flags.positive_int,
                       default=None,
                       help="Use only the first N training pairs "
                       "(default: all).")

    add_seq2seq_flags(
        parser, "runs/translate/<dataset>-<src>-<tgt>-<variant>",
        "sentences translated together", "(BLEU is always computed against "
        "the raw references)")
    group = parser.add_argument_group("model (translation)")
    group.add_argument("--max_length", type=flags.positive_int, default=64,
                       help="Longest source and target sequence in tokens "
                       "(the synthesizers' max_length); longer training "
                       "pairs are dropped (counted).")
    presets.defer_defaults(parser, MODEL_DEFAULTS)
    return parser


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
    "epochs", "time_budget_minutes",
}


def validate_args(args, check_options=True):
    """Canonicalises `args` in place; ValueError on bad values.

    Pure Python, called before TensorFlow is imported, except the check of
    the synthesizer options' values (`check_options`), which imports Keras.
    Idempotent: `run` calls it again with that check.
    """
    data_lib.check_language_pair(args.src, args.tgt)
    validate_seq2seq_args(args, check_options)
    if args.train_src or args.train_tgt:
        if args.dataset == data_lib.BUILTIN:
            raise ValueError(
                "--dataset=builtin reads the data shipped with the package; "
                "don't pass --train_src/--train_tgt with it.")
        args.dataset = "files"
    elif any(getattr(args, f"{s}_{side}") for s in data_lib.SPLITS
             for side in ("src", "tgt")):
        raise ValueError("Arguments `--train_src` and `--train_tgt` are "
                         "required with parallel text files.")
    if args.model_dir is None:
        args.model_dir = os.path.join(
            "runs", "translate",
            f"{args.dataset}-{args.src}-{args.tgt}-"
            f"{args.synthesizer.replace('+', '_')}")


def validate_seq2seq_args(args, check_options=True):
    """The checks every encoder-decoder recipe shares (`args.max_length`
    set): the preset, the synthesizers and their options, the numbers."""
    preset = presets.apply_preset(
        args, PROG, PRESET_BACKBONES, MODEL_DEFAULTS, length_flag="max_length",
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
    flags.check_ema_momentum(args.ema_momentum)
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


def load_corpus(args):
    """`{split: data.Parallel}` as the arguments ask."""
    if args.dataset == "files":
        files = {split: (getattr(args, f"{split}_src"),
                         getattr(args, f"{split}_tgt"))
                 for split in data_lib.SPLITS}
        return data_lib.load_files(files)
    if args.dataset == data_lib.BUILTIN:
        return data_lib.load_files(data_lib.builtin_files(args.src, args.tgt))
    return data_lib.load_tfds(args.dataset, args.src, args.tgt,
                              args.tfds_data_dir)


def score(hypotheses, references):
    """Detokenized corpus BLEU and chrF (sacrebleu) against raw references."""
    import sacrebleu

    bleu = sacrebleu.BLEU()
    chrf = sacrebleu.CHRF()
    bleu_score = bleu.corpus_score(hypotheses, [references])
    chrf_score = chrf.corpus_score(hypotheses, [references])
    return {"bleu": bleu_score.score, "chrf": chrf_score.score,
            "bleu_details": str(bleu_score),
            "bleu_signature": str(bleu.get_signature()),
            "chrf_signature": str(chrf.get_signature())}


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
    """

    sides: tuple
    searches: object
    score: object
    describe: object
    results: object
    output_file: object = None
    cut: bool = False
    length_flag: str = "max_length"


def translation_task(args):
    """The translation `Task`: BLEU and chrF of the `--beam_size` search."""
    def results(outputs):
        outputs = outputs[args.beam_size]
        scores = {split: o["scores"] for split, o in outputs.items()}
        return {"src": args.src, "tgt": args.tgt, "scores": scores,
                "bleu": {split: s["bleu"] for split, s in scores.items()},
                "chrf": {split: s["chrf"] for split, s in scores.items()},
                "decoding": {split: o["decoding"]
                             for split, o in outputs.items()},
                "hypotheses": {split: o["file"] for split, o in
                               outputs.items() if o["file"]}}

    return Task(
        sides=(args.src, args.tgt), searches=lambda a: [a.beam_size],
        score=score, results=results,
        describe=lambda s: f"BLEU {s['bleu']:.2f}, chrF {s['chrf']:.2f}",
        output_file=lambda split, beam: f"hypotheses.{split}.{args.tgt}")


def run(args, log=print):
    """Runs the recipe for parsed `args`; returns the results dict."""
    wall_start = time.time()
    # The strategy first, before TensorFlow runs any op (multi-worker, TPU).
    corpus, run_dir, strategy = experiment.open_run(
        args, validate_args, lambda _: load_corpus(args), RUNTIME_FLAGS, log)
    return run_seq2seq(args, corpus, run_dir, strategy,
                       translation_task(args), wall_start, log)


def run_seq2seq(args, corpus, run_dir, strategy, task, wall_start, log=print):
    """Trains a `SynthesizerSeq2SeqLM` on `corpus` (`{split:
    data.Parallel}`), decodes and scores the valid and test splits as
    `task` says, exports; returns the results dict."""
    corpus["train"] = corpus["train"].head(args.max_train_examples)
    src_name, tgt_name = task.sides
    log(f"Data ({args.dataset}, {src_name}->{tgt_name}): " + ", ".join(
        f"{split} {len(pairs)} pairs" for split, pairs in corpus.items()))

    from recipes.translate import export as export_lib
    from recipes.translate import modeling

    train = corpus["train"]
    source_length = getattr(args, "max_source_length", args.max_length)
    target_length = getattr(args, "max_target_length", args.max_length)

    def prepare():  # the chief's vocabularies and backup, for every worker
        if args.vocab == "shared":
            src_vocab = tgt_vocab = vocabulary.prepare_vocabulary(
                run_dir, lambda: train.src + train.tgt,
                vocab_file=(presets.read_preset(
                    args.preset, PRESET_BACKBONES, PROG).vocabulary_path
                    if args.preset else args.vocab_file),
                vocab_size=args.vocab_size,
                lowercase=args.lowercase, log=log)
        else:
            src_vocab = vocabulary.prepare_vocabulary(
                run_dir, lambda: train.src, vocab_file=args.vocab_file,
                vocab_size=args.vocab_size, lowercase=args.lowercase,
                log=log, filename=f"vocab.{src_name}.txt")
            tgt_vocab = vocabulary.prepare_vocabulary(
                run_dir, lambda: train.tgt, vocab_file=args.tgt_vocab_file,
                vocab_size=args.vocab_size, lowercase=args.lowercase,
                log=log, filename=f"vocab.{tgt_name}.txt")
        return src_vocab, tgt_vocab, run_dir.resume()

    src_vocab, tgt_vocab, initial_epoch = workers.chief_first(
        strategy, prepare)
    preprocessor = modeling.make_preprocessor(
        src_vocab, tgt_vocab, source_length, args.lowercase,
        target_length=target_length,
        truncation="allow" if task.cut else "warn")  # (counted, logged)
    encoded = modeling.encode_corpus(preprocessor, train, cut=task.cut)
    if task.cut:
        log(f"Training pairs: {encoded['kept']} kept, {encoded['empty']} "
            f"dropped (an empty side); cut: {encoded['cut_source']} with a "
            f"{src_name} longer than --max_source_length={source_length} "
            f"tokens with [CLS] and [SEP], {encoded['cut_target']} with a "
            f"{tgt_name} longer than --max_target_length={target_length} "
            "with [CLS].")
    else:
        log(f"Training pairs: {encoded['kept']} kept, {encoded['dropped']} "
            f"dropped (a source longer than --max_length={args.max_length} "
            "tokens with [CLS] and [SEP], a target longer with [CLS], or an "
            f"empty side: {encoded['empty']}).")
    if encoded["kept"] < args.batch_size:
        raise ValueError(
            f"Argument `--batch_size`={args.batch_size} exceeds the "
            f"{encoded['kept']} usable training pairs.")
    static = flags.static_shapes(args)
    bucketed = flags.bucketed_shapes(args)
    train_ds = modeling.make_dataset(
        encoded, args.batch_size, shuffle=True, seed=args.seed,
        drop_remainder=True, static_shapes=static, epochs=args.epochs,
        initial_epoch=initial_epoch, bucketed=bucketed)
    valid_ds = None
    if "valid" in corpus:
        valid_encoded = modeling.encode_corpus(preprocessor, corpus["valid"],
                                               cut=task.cut)
        if valid_encoded["kept"]:
            valid_ds = modeling.make_dataset(
                valid_encoded, args.batch_size, static_shapes=static,
                bucketed=bucketed)
    steps_per_epoch = encoded["kept"] // args.batch_size
    steps_per_execution = flags.steps_per_execution(
        args.steps_per_execution, args.strategy, steps_per_epoch)
    total_steps = steps_per_epoch * args.epochs
    warmup_steps = args.warmup_steps or max(
        1, int(total_steps * args.warmup_fraction))
    def build():
        model = modeling.build_lm(
            src_vocab_size=len(src_vocab), tgt_vocab_size=len(tgt_vocab),
            max_length=args.max_length, synthesizer=args.synthesizer,
            cross_attention_synthesizer=args.cross_attention_synthesizer,
            hidden_dim=args.hidden_dim, num_layers=args.num_layers,
            num_heads=args.num_heads, intermediate_dim=args.intermediate_dim,
            dropout=args.dropout, shared=args.vocab == "shared",
            normalize_first=args.normalize_first,
            synthesizer_options=args.synthesizer_options,
            preset=args.preset)
        modeling.compile_lm(
            model, args.learning_rate, warmup_steps,
            label_smoothing=args.label_smoothing,
            weight_decay=args.weight_decay, jit_compile=flags.keras_jit_compile(args),
            ema_momentum=args.ema_momentum, beam_size=args.beam_size,
            length_penalty=args.length_penalty,
            steps_per_execution=steps_per_execution)
        return model

    def describe(parameters):
        return (f"Model: SynthesizerSeq2SeqLM, {args.num_layers}+"
                f"{args.num_layers} blocks, self-attention "
                f"{args.synthesizer!r}, cross-attention "
                f"{args.cross_attention_synthesizer!r}, width "
                f"{args.hidden_dim}, {args.num_heads} heads, max_length "
                f"{args.max_length}, vocabulary {len(src_vocab)}/"
                f"{len(tgt_vocab)} ({args.vocab}): {parameters:,} trainable "
                "parameters.")

    def evaluate(model, run):
        tokens_per_pair = (encoded["src_tokens"] + encoded["tgt_tokens"]
                           ) / max(1, encoded["kept"])
        speed = timing.training_speed(
            run["steps_per_second"], args.batch_size * tokens_per_pair,
            "source + target, padding excluded", "steps/s x batch_size x "
            "mean (source + target) tokens of the kept training pairs, "
            "padding excluded", log, about=True)

        # The preprocessor is attached now: `fit` was fed features.
        model.preprocessor = preprocessor
        outputs = {}
        for beam_size in task.searches(args):
            modeling.set_sampler(model, beam_size, args.length_penalty)
            search = "greedy" if beam_size == 1 else f"beam {beam_size}"
            outputs[beam_size] = {}
            for split in ("valid", "test"):
                if split not in corpus:
                    continue
                pairs = corpus[split]
                hypotheses, stats = modeling.translate(
                    model, pairs.src, batch_size=args.decode_batch_size,
                    log=log, length_flag=task.length_flag)
                stats["beam_size"] = beam_size
                scores = task.score(hypotheses, pairs.tgt)
                log(f"{split}: {task.describe(scores)} ({len(pairs)} "
                    f"{src_name}s, {search}, "
                    f"{stats['sentences_per_second']:.1f} {src_name}s/s).")
                path = None
                if run_dir.is_chief:
                    path = run_dir.path(task.output_file(split, beam_size))
                    storage.write_file(path, "".join(
                        line + "\n" for line in hypotheses))
                    log(f"Outputs: {path}")
                outputs[beam_size][split] = {
                    "scores": scores, "decoding": stats, "file": path}

        return {
            **task.results(outputs),
            "dataset": args.dataset,
            "synthesizer": args.synthesizer,
            "cross_attention_synthesizer": args.cross_attention_synthesizer,
            "vocabulary_size": {"src": len(src_vocab),
                                "tgt": len(tgt_vocab)},
            "train_pairs": encoded["kept"],
            "train_pairs_dropped": encoded["dropped"],
            **speed,
            "warmup_steps": warmup_steps,
            **({"cut": {"train": {"source": encoded["cut_source"],
                                  "target": encoded["cut_target"]},
                        **{split: {"source": o["decoding"]["truncated"]}
                           for split, o in outputs[beam_size].items()}}}
               if task.cut else {}),
        }
    saved_model = experiment.saved_model_export(
        args, run_dir, export_lib.export_saved_model, export_lib.export_usage,
        "signature 'translate', strings in and out", log)

    def export(model):  # on the chief, the preprocessor attached
        results = saved_model(model)
        if "keras_model" not in results:  # (saved in the export's stead)
            results["keras_model"] = serving.save_keras_model(
                run_dir.path("model.keras"), model)
            log(f"Saved the model to {results['keras_model']}")
        return results

    return experiment.train_and_evaluate(
        args, run_dir, strategy, build, train_ds, steps_per_epoch, evaluate,
        export=export, describe=describe,
        fit_options={"validation_data": valid_ds},
        wall_start=wall_start, log=log)


def main(argv=None):
    """Command-line entry point; returns the exit status (2 on bad input,
    with one line `python -m recipes.translate: error: ...`)."""
    paths = ["vocab_file", "tgt_vocab_file"] + [
        f"{split}_{side}" for split in data_lib.SPLITS
        for side in ("src", "tgt")]
    return runtime.run_main(build_parser(), run, PROG, argv,
                            validate=validate_args,
                            input_paths=paths)
