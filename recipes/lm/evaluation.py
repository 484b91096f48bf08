"""Encoding of the splits, evaluation on every token, samples and the
attention plot of a trained run."""

import numpy as np

from recipes.lm import data as data_lib
from recipes.lm import model as model_lib
from recipes.lm import tokenizers


def encode_splits(tokenizer, corpus, args):
    """`{split: dict}`: token counts, training rows, evaluation windows and
    the characters the scored tokens spell (for bits per character; char
    and byte tokenizers only)."""
    by_characters = args.tokenizer in ("char", "byte")
    length = args.sequence_length
    encoded = {}
    for split, text in corpus.items():
        if args.cut == "stream":
            ids = tokenizers.encode_stream(tokenizer, text)
            if len(ids) < 2:
                raise data_lib.DataError(
                    f"The {split} split has {len(ids)} token(s); a language "
                    "model needs at least 2.")
            windows, weights = data_lib.eval_windows(
                ids, length, args.eval_stride)
            entry = {"stream": ids, "tokens": int(len(ids)),
                     "unknown": tokenizers.count_unknown(tokenizer, ids),
                     # Every token but the first is scored; for char and
                     # byte streams they spell all characters but the first.
                     "characters": len(text) - 1 if by_characters else None}
        else:
            docs = data_lib.documents(text)
            if not docs:
                raise data_lib.DataError(f"The {split} split has no "
                                         "non-empty line.")
            ids = tokenizers.encode_documents(tokenizer, docs)
            windows, weights = data_lib.sentence_examples(
                ids, length, tokenizer.token_to_id("[CLS]"),
                tokenizer.token_to_id("[SEP]"))
            flat = np.concatenate(ids) if ids else np.zeros(0, "int32")
            entry = {"windows": (windows, weights),
                     "tokens": int(len(flat)),
                     "unknown": tokenizers.count_unknown(tokenizer, flat),
                     # The end token of each line stands for its newline.
                     "characters": (sum(len(d) + 1 for d in docs)
                                    if by_characters else None)}
        entry["eval"] = (windows, weights)
        encoded[split] = entry
    return encoded


def method(args):
    """How evaluation windows are laid out (for results.json)."""
    if args.cut == "sentence":
        return ("one line per example ([CLS] line [SEP], padded; longer "
                "lines in consecutive pieces): every token and each line's "
                "end token scored once")
    if args.eval_stride and args.eval_stride < args.sequence_length:
        return (f"sliding windows of {args.sequence_length} tokens every "
                f"{args.eval_stride} tokens: every token but the first "
                "scored once, with at least "
                f"{args.sequence_length - args.eval_stride} tokens of "
                "context after the first window")
    return (f"non-overlapping windows of {args.sequence_length} tokens: "
            "every token but the first scored once")


def evaluate_and_sample(lm, encoded, corpus, args, run_dir, log=print):
    """Scores valid and test, samples from the prompts, plots the attention;
    returns the results to merge into results.json."""
    results = {"evaluation": {"method": method(args)}}
    for split in ("valid", "test"):
        if split not in encoded:
            continue
        entry = encoded[split]
        windows, weights = entry["eval"]
        total, scored = model_lib.evaluate(lm, windows, weights,
                                           args.eval_batch_size)
        expected = int(round(float(weights.sum())))
        if scored != expected:
            raise RuntimeError(f"{split}: scored {scored} tokens, expected "
                               f"{expected}.")
        summary = model_lib.summarize(total, scored, entry["characters"])
        results["evaluation"][split] = summary
        bpc = summary.get("bits_per_character")
        log(f"{split}: loss {summary['loss']:.4f} nats/token, perplexity "
            f"{summary['perplexity']:.2f}" + (
                f", {bpc:.4f} bits/character" if bpc else "")
            + f" ({scored:,} tokens scored).")
    texts, stats = model_lib.generate(lm, list(args.prompts),
                                      args.max_new_tokens)
    if stats["capped_by_context"]:
        log(f"Samples end at the model's context of "
            f"{stats['max_length']} tokens (prompt included), before "
            f"--max_new_tokens={args.max_new_tokens} new tokens.")
    results["samples"] = [{"prompt": p, "text": t}
                          for p, t in zip(args.prompts, texts)]
    results["generation"] = dict(stats, sampler=args.sampler,
                                 temperature=args.temperature)
    log(f"Samples ({args.sampler}, temperature {args.temperature}, "
        f"{stats['tokens_per_second']:.0f} generated tokens/s):")
    for text in texts:
        log("---\n" + text)
    log("---")
    if args.attention_plot and run_dir.is_chief:
        source = encoded.get("valid") or encoded["train"]
        window = source["eval"][0][0][:-1]
        length = int(np.count_nonzero(window)) or len(window)
        scores = model_lib.attention_scores(lm, window[None, :length])
        results["attention_plot"] = model_lib.plot_attention(
            scores, run_dir.path("attention.png"),
            f"{args.synthesizer}: self-attention of every layer and head, "
            f"first {'validation' if 'valid' in encoded else 'training'} "
            "window")
        log(f"Attention maps: {results['attention_plot']}")
    return results


__all__ = ["encode_splits", "evaluate_and_sample", "method"]
