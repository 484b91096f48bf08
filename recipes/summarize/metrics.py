"""Summarization's log line of ROUGE (`recipes.core.text_metrics.rouge`)
and the lead-3 baseline, in pure Python."""

import re

_SENTENCE_END = re.compile(r"(?<=[.!?])\s+")


def describe(scores):
    """A log line's `ROUGE-1/2/L a/b/c`."""
    return ("ROUGE-1/2/L " + "/".join(
        f"{scores[k]:.2f}" for k in ("rouge1", "rouge2", "rougeL")))


def lead(document, sentences=3):
    """The first `sentences` sentences of `document` (split after `.`, `!`
    or `?` followed by white space)."""
    return " ".join(_SENTENCE_END.split(document.strip())[:sentences])
