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

import os

from recipes import cli
from recipes.core import data_files
from recipes.core import flags
from recipes.core import presets
from recipes.core import runtime
from recipes.core import seq2seq
from recipes.core import seq2seq_run
from recipes.translate import data as data_lib

PROG = "python -m recipes.translate"


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

    seq2seq.add_seq2seq_flags(
        parser, "runs/translate/<dataset>-<src>-<tgt>-<variant>",
        "sentences translated together", "(BLEU is always computed against "
        "the raw references)")
    group = parser.add_argument_group("model (translation)")
    group.add_argument("--max_length", type=flags.positive_int, default=64,
                       help="Longest source and target sequence in tokens "
                       "(the synthesizers' max_length); longer training "
                       "pairs are dropped (counted).")
    presets.defer_defaults(parser, seq2seq.MODEL_DEFAULTS)
    return parser


def validate_args(args, check_options=True):
    """Canonicalises `args` in place; ValueError on bad values.

    Pure Python, called before TensorFlow is imported, except the check of
    the synthesizer options' values (`check_options`), which imports Keras.
    Idempotent: `run` calls it again with that check.
    """
    data_lib.check_language_pair(args.src, args.tgt)
    seq2seq.validate_seq2seq_args(args, PROG, check_options)
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

    return seq2seq.Task(
        sides=(args.src, args.tgt), searches=lambda a: [a.beam_size],
        score=score, results=results,
        describe=lambda s: f"BLEU {s['bleu']:.2f}, chrF {s['chrf']:.2f}",
        output_file=lambda split, beam: f"hypotheses.{split}.{args.tgt}")


def run(args, log=print):
    """Runs the recipe for parsed `args`; returns the results dict."""
    return seq2seq_run.run(args, PROG, validate_args, load_corpus,
                           lambda *_: translation_task(args), log)


def main(argv=None):
    """Command-line entry point; returns the exit status (2 on bad input,
    with one line `python -m recipes.translate: error: ...`)."""
    paths = ["vocab_file", "tgt_vocab_file"] + [
        f"{split}_{side}" for split in data_lib.SPLITS
        for side in ("src", "tgt")]
    return runtime.run_main(build_parser(), run, PROG, argv,
                            validate=validate_args,
                            input_paths=paths)
