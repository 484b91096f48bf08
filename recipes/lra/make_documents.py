"""`python -m recipes.lra.make_documents`: long "reviews" for
`--dataset=files` from GLUE's SST-2 sentences.

SST-2's sentences are read in their files' order (`train.tsv` for the
training documents, `dev.tsv` for the test documents: the dev split's
sentences are never in a training document). Each sentence goes to its
label's open document (sentences joined by a space); a document is written
as soon as it holds `--min_bytes` UTF-8 bytes or more, so it holds
`--min_bytes` to `--min_bytes` + one sentence. What stays in the open
documents at the end of a file (under `--min_bytes`) is not written; the
log and `documents.json` say how many sentences and bytes that is, per
split. Nothing is random: the same files give the same documents.

Writes `<output_dir>/train.tsv`, `<output_dir>/test.tsv` (`label<TAB>text`
a line, as `--dataset=files` reads) and `<output_dir>/documents.json`
(the counts).

Example:

    python -m recipes.lra.make_documents \\
        --glue_dir=glue_data/SST-2 --output_dir=runs/lra/sst2-documents
    python -m recipes.lra --task=text --dataset=files \\
        --train_file=runs/lra/sst2-documents/train.tsv \\
        --test_file=runs/lra/sst2-documents/test.tsv --max_length=1024
"""

import json
import os
import sys

from recipes import cli
from recipes.core import flags
from recipes.glue import tasks as glue_tasks
from recipes.glue import tsv as glue_tsv

PROG = "python -m recipes.lra.make_documents"
SPLITS = (("train", "train.tsv"), ("test", "dev.tsv"))


def documents(rows, min_bytes):
    """Joins consecutive sentences of one label into documents.

    Args:
        rows: `(label, sentence)` pairs in order.
        min_bytes: int, a document is closed once its UTF-8 text holds this
            many bytes or more.

    Returns:
        `(documents, left_over)`: `documents` the `(label, text)` pairs in
        the order they were closed; `left_over` a dict label -> the
        sentences of that label's unfinished document (under `min_bytes`).

    Raises:
        ValueError: `min_bytes` is not a positive integer.
    """
    if isinstance(min_bytes, bool) or not isinstance(min_bytes, int) or (
            min_bytes < 1):
        raise ValueError("Argument `min_bytes` must be a positive integer. "
                         f"Received: min_bytes={min_bytes!r}")
    open_documents, closed = {}, []
    for label, sentence in rows:
        sentences = open_documents.setdefault(label, [])
        sentences.append(sentence)
        text = " ".join(sentences)
        if len(text.encode("utf-8")) >= min_bytes:
            closed.append((label, text))
            open_documents[label] = []
    return closed, {label: sentences for label, sentences
                    in sorted(open_documents.items()) if sentences}


def make_documents(glue_dir, output_dir, min_bytes=1000, log=print):
    """Writes the documents of SST-2 in `glue_dir` into `output_dir` (see
    the module docstring); returns the counts written to
    `documents.json`."""
    task = glue_tasks.get_task("sst2")
    os.makedirs(output_dir, exist_ok=True)
    summary = {"glue_dir": glue_dir, "min_bytes": min_bytes, "splits": {}}
    for split, name in SPLITS:
        data = glue_tsv.read_tsv(os.path.join(glue_dir, name), task)
        rows = [(str(label), texts[0])
                for texts, label in zip(data.texts, data.labels)]
        docs, left_over = documents(rows, min_bytes)
        path = os.path.join(output_dir, f"{split}.tsv")
        with open(path, "w", encoding="utf-8") as f:
            for label, text in docs:
                f.write(f"{label}\t{text}\n")
        sizes = [len(text.encode("utf-8")) for _, text in docs]
        left = sum(len(s) for s in left_over.values())
        counts = {
            "source": name, "sentences": len(rows),
            "documents": len(docs),
            "documents_per_label": {
                label: sum(1 for l, _ in docs if l == label)
                for label in sorted({l for l, _ in docs})},
            "bytes": {"min": min(sizes, default=0),
                      "max": max(sizes, default=0),
                      "mean": round(sum(sizes) / max(len(sizes), 1), 1)},
            "sentences_left_over": left,
            "bytes_left_over": sum(
                len(" ".join(s).encode("utf-8"))
                for s in left_over.values()),
        }
        summary["splits"][split] = counts
        log(f"{split}: {len(rows):,} sentences of {name} -> "
            f"{len(docs):,} documents of {counts['bytes']['min']:,} to "
            f"{counts['bytes']['max']:,} bytes (mean "
            f"{counts['bytes']['mean']:,}) in {path}; {left} sentences "
            f"({counts['bytes_left_over']:,} bytes) left over in the "
            "unfinished documents, not written.")
    with open(os.path.join(output_dir, "documents.json"), "w",
              encoding="utf-8") as f:
        json.dump(summary, f, indent=2)
    return summary


def build_parser():
    parser = cli.ArgumentParser(
        prog=PROG,
        description="Join GLUE SST-2's sentences of one label, in order, "
        "into documents of at least --min_bytes bytes (train.tsv -> "
        "train.tsv, dev.tsv -> test.tsv, label<TAB>text) for python -m "
        "recipes.lra --task=text --dataset=files.")
    parser.add_argument("--glue_dir", required=True,
                        help="GLUE's SST-2 folder (train.tsv, dev.tsv).")
    parser.add_argument("--output_dir", required=True,
                        help="Where train.tsv, test.tsv and "
                        "documents.json are written.")
    parser.add_argument("--min_bytes", type=flags.positive_int, default=1000,
                        help="A document is closed once it holds this many "
                        "UTF-8 bytes.")
    return parser


def main(argv=None):
    args = build_parser().parse_args(argv)
    return cli.run_tool(PROG, lambda: make_documents(
        args.glue_dir, args.output_dir, args.min_bytes))


if __name__ == "__main__":
    sys.exit(main())
