"""Dialogue metrics: corpus BLEU-1 and BLEU-4 (sacrebleu), ROUGE-L
(`recipes.core.text_metrics`), METEOR when nltk has its WordNet corpus.

CIDEr is not computed: no well-kept package provides it (pycocoevalcap's
last release, 1.2, is from 2020); results.json holds `"cider": null`, and
`not_computed` the reasons.
"""

from sacrebleu.metrics import BLEU

from recipes.core import text_metrics

METEOR_MISSING = ("nltk's METEOR needs the WordNet corpus, a download "
                  "(python -c \"import nltk; nltk.download('wordnet')\")")
CIDER_MISSING = ("no well-kept package provides CIDEr (pycocoevalcap's last "
                 "release, 1.2, is from 2020)")


def bleu(hypotheses, references, order):
    """Corpus BLEU (sacrebleu's default 13a tokenization) with n-grams up to
    `order`, in percent."""
    return BLEU(max_ngram_order=order).corpus_score(
        hypotheses, [references]).score


def _meteor_score():
    """nltk's `meteor_score`, or None without nltk or its WordNet."""
    try:
        import nltk
        from nltk.translate.meteor_score import meteor_score

        nltk.data.find("corpora/wordnet")
    except (ImportError, LookupError):
        return None
    return meteor_score


def not_computed():
    """`{metric: why}` of the metrics left out here (results.json)."""
    return {"cider": CIDER_MISSING,
            **({} if _meteor_score() else {"meteor": METEOR_MISSING})}


def score(hypotheses, references):
    """`{"bleu1", "bleu4", "rougeL", "meteor", "cider"}` in percent; None
    for a metric not computed (`not_computed`)."""
    if len(hypotheses) != len(references) or not references:
        raise ValueError(f"Expected as many responses as references (at "
                         f"least one); received {len(hypotheses)} and "
                         f"{len(references)}.")
    tokenize, meteor = text_metrics.tokenize, _meteor_score()
    return {
        "bleu1": bleu(hypotheses, references, 1),
        "bleu4": bleu(hypotheses, references, 4),
        "rougeL": 100 * sum(map(text_metrics.rouge_l, hypotheses,
                                references)) / len(references),
        "meteor": meteor and 100 * sum(
            meteor([tokenize(r)], tokenize(h))
            for h, r in zip(hypotheses, references)) / len(references),
        "cider": None}


def describe(scores):
    """A log line's `BLEU-1/4 a/b ROUGE-L c` (and `METEOR d`)."""
    line = (f"BLEU-1/4 {scores['bleu1']:.2f}/{scores['bleu4']:.2f} "
            f"ROUGE-L {scores['rougeL']:.2f}")
    return line + (f" METEOR {scores['meteor']:.2f}"
                   if scores["meteor"] is not None else "")
