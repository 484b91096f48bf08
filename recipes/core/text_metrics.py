"""ROUGE-1/2/L F-measure in pure Python (summarization, dialogue).

ROUGE as `rouge-score` (Google's, which `keras_hub.metrics.RougeN/RougeL`
wrap) computes it without stemming: text lowercased, every run of
characters other than `a-z0-9` a separator; per text the F-measure of
the n-gram (or longest common subsequence) overlap with its reference;
the corpus score is the mean over texts, in percent.
"""

import collections
import re

_NON_ALNUM = re.compile(r"[^a-z0-9]+")


def tokenize(text):
    return _NON_ALNUM.sub(" ", text.lower()).split()


def _f_measure(overlap, hypothesis_count, reference_count):
    if not overlap:
        return 0.0
    precision = overlap / hypothesis_count
    recall = overlap / reference_count
    return 2 * precision * recall / (precision + recall)


def rouge_n(hypothesis, reference, n):
    """ROUGE-N F-measure of one summary (0 to 1)."""
    def grams(tokens):
        return collections.Counter(
            tuple(tokens[i:i + n]) for i in range(len(tokens) - n + 1))

    hyp, ref = grams(tokenize(hypothesis)), grams(tokenize(reference))
    overlap = sum((hyp & ref).values())
    return _f_measure(overlap, sum(hyp.values()), sum(ref.values()))


def rouge_l(hypothesis, reference):
    """ROUGE-L F-measure (longest common subsequence) of one summary."""
    hyp, ref = tokenize(hypothesis), tokenize(reference)
    previous = [0] * (len(ref) + 1)
    for token in hyp:
        row = [0]
        for j, other in enumerate(ref):
            row.append(previous[j] + 1 if token == other
                       else max(previous[j + 1], row[j]))
        previous = row
    return _f_measure(previous[-1], len(hyp), len(ref))


def rouge(hypotheses, references):
    """`{"rouge1", "rouge2", "rougeL"}`: mean F-measures in percent."""
    if len(hypotheses) != len(references) or not references:
        raise ValueError(f"Expected as many summaries as references (at "
                         f"least one); received {len(hypotheses)} and "
                         f"{len(references)}.")
    pairs = list(zip(hypotheses, references))
    return {name: 100 * sum(score(h, r) for h, r in pairs) / len(pairs)
            for name, score in (("rouge1", lambda h, r: rouge_n(h, r, 1)),
                                ("rouge2", lambda h, r: rouge_n(h, r, 2)),
                                ("rougeL", rouge_l))}
