"""`python -m recipes.dialogue.chitchat`: the Chit-Chat Challenge corpus
as PersonaChat-format files for `python -m recipes.dialogue --persona=none`.

The corpus (BYU's Perception, Control and Cognition lab, MIT licence) is
7,168 English conversations between two people, shipped as one JSON file
by the `chitchat-dataset` package (`pip install chitchat-dataset`), or
read from `--json`. A conversation is a list of messages, each one or
more consecutive utterances of one sender; a message's utterances are
joined by a space (tabs and line breaks in them become spaces).

Each conversation becomes one dialogue without persona: the first
sender's messages are the partner's utterances, the second sender's the
responses, one `N utterance<TAB>response` line for each pair of
messages. A last message without a reply has no response to learn and is
not written; a conversation with no complete pair (3,150 of the corpus
have one sender only), or with an empty message, is not written either.
The log and `chitchat.json` count both. Nothing is random: the corpus's
order (its JSON) decides the split of the dialogues written, the last
`--test_dialogues` are the test split, the `--valid_dialogues` before
them the validation split, the rest training.

Writes `<output_dir>/{train,valid,test}_none_original.txt` and
`<output_dir>/chitchat.json` (the counts).

Example:

    pip install chitchat-dataset
    python -m recipes.dialogue.chitchat --output_dir=chitchat
    python -m recipes.dialogue --dataset=files --data_dir=chitchat \\
        --persona=none --lowercase --synthesizer=dense
"""

import json
import os
import sys

from recipes import cli
from recipes.core import flags

PROG = "python -m recipes.dialogue.chitchat"
SPLITS = ("train", "valid", "test")


def _message(utterances):
    return " ".join(" ".join(u["text"].split()) for u in utterances).strip()


def dialogue_lines(conversation):
    """The PersonaChat lines of one conversation (`{"messages": [[{"text":
    ...}, ...], ...]}`) and the number of messages left unanswered;
    `([], n)` when it has no complete pair or an empty message."""
    messages = [_message(m) for m in conversation["messages"]]
    if not all(messages):
        return [], len(messages)
    pairs = len(messages) // 2
    lines = [f"{i + 1} {messages[2 * i]}\t{messages[2 * i + 1]}"
             for i in range(pairs)]
    return lines, len(messages) - 2 * pairs


def convert(corpus, output_dir, valid_dialogues=300, test_dialogues=300,
            log=print):
    """Writes `corpus` (`{id: conversation}`, the package's JSON) into
    `output_dir` (see the module docstring); returns the counts written
    to `chitchat.json`."""
    dialogues, skipped, unanswered = [], 0, 0
    for conversation in corpus.values():
        lines, left = dialogue_lines(conversation)
        if lines:
            dialogues.append(lines)
            unanswered += left
        else:
            skipped += 1
    train = len(dialogues) - valid_dialogues - test_dialogues
    if train < 1:
        raise ValueError(
            f"The corpus gives {len(dialogues)} dialogues: too few for "
            f"--valid_dialogues={valid_dialogues} and "
            f"--test_dialogues={test_dialogues} and a training split of at "
            "least one.")
    log(f"{len(corpus):,} conversations -> {len(dialogues):,} dialogues; "
        f"{skipped:,} conversations not written (no reply or an empty "
        f"message), {unanswered:,} last messages without a reply not "
        "written.")
    summary = {"conversations": len(corpus), "dialogues": len(dialogues),
               "conversations_not_written": skipped,
               "unanswered_last_messages": unanswered, "splits": {}}
    bounds = {"train": (0, train),
              "valid": (train, train + valid_dialogues),
              "test": (train + valid_dialogues, len(dialogues))}
    os.makedirs(output_dir, exist_ok=True)
    for split in SPLITS:
        start, end = bounds[split]
        path = os.path.join(output_dir, f"{split}_none_original.txt")
        chosen = dialogues[start:end]
        with open(path, "w", encoding="utf-8") as f:
            f.write("".join(line + "\n" for lines in chosen
                            for line in lines))
        responses = sum(len(lines) for lines in chosen)
        summary["splits"][split] = {"file": path, "dialogues": len(chosen),
                                    "responses": responses}
        log(f"{split}: {len(chosen):,} dialogues, {responses:,} responses "
            f"in {path}.")
    with open(os.path.join(output_dir, "chitchat.json"), "w",
              encoding="utf-8") as f:
        json.dump(summary, f, indent=2)
    return summary


def _corpus(json_path):
    if json_path is None:
        try:
            import chitchat_dataset
        except ImportError:
            raise ValueError(
                "The corpus is read from the chitchat-dataset package (pip "
                "install chitchat-dataset) or from --json; the package is "
                "not installed and --json was not given.") from None
        json_path = chitchat_dataset.Dataset().path
    with open(json_path, encoding="utf-8") as f:
        corpus = json.load(f)
    if not isinstance(corpus, dict) or not all(
            isinstance(c, dict) and "messages" in c for c in corpus.values()):
        raise ValueError(f"--json={json_path}: expected the corpus's JSON, "
                         "an object of conversations with `messages`.")
    return corpus


def build_parser():
    parser = cli.ArgumentParser(
        prog=PROG,
        description="Write the Chit-Chat Challenge corpus (the "
        "chitchat-dataset package, or --json) as PersonaChat-format files "
        "(train/valid/test_none_original.txt) for python -m "
        "recipes.dialogue --dataset=files --persona=none.")
    parser.add_argument("--output_dir", required=True,
                        help="Where the three files and chitchat.json are "
                        "written.")
    parser.add_argument("--json", default=None,
                        help="The corpus's dataset.json (default: the one "
                        "the chitchat-dataset package ships).")
    parser.add_argument("--valid_dialogues", type=flags.positive_int,
                        default=300, help="Dialogues in the validation split.")
    parser.add_argument("--test_dialogues", type=flags.positive_int,
                        default=300, help="Dialogues in the test split.")
    return parser


def main(argv=None):
    args = build_parser().parse_args(argv)
    return cli.run_tool(PROG, lambda: convert(
        _corpus(args.json), args.output_dir, args.valid_dialogues,
        args.test_dialogues))


if __name__ == "__main__":
    sys.exit(main())
