"""Dialogues in PersonaChat's released text format (ConvAI2's
`train_self_original.txt`, ...), read from `--data_dir` or the built-in
set, turned into (persona + history -> response) examples.

The format: every dialogue's lines are numbered from 1 (a new dialogue
starts where the number goes back to 1); first its persona lines
(`1 your persona: i like dogs.` or `partner's persona: ...`), then one
line a turn, `N utterance<TAB>response`, optionally followed by
`<TAB><reward><TAB>cand1|cand2|...` (the candidates are not used).

Pure Python; files are read through `recipes.core.parallel_data.read_lines`
(local or gs://, `.gz` by content).
"""

import dataclasses
import importlib.resources
import re

from recipes.core import parallel_data
from recipes.core import storage
from recipes.core.data_files import DataError

SPLITS = parallel_data.SPLITS
BUILTIN = parallel_data.BUILTIN
PERSONAS = ("self", "other", "none")
FILE_KINDS = ("original", "revised")
_LINE = re.compile(r"^(\d+) (.*)$")
_PERSONA = re.compile(r"^(your|partner's) persona: ?(.*)$")


@dataclasses.dataclass
class Dialogue:
    """One dialogue: its persona sentences and its turns, alternating
    (partner's utterance, response, partner's utterance, ...)."""

    persona: list
    turns: list


def read_dialogues(path, split="train"):
    """Reads a PersonaChat text file; returns a list of `Dialogue`.

    Raises:
        DataError: the file is missing, empty or not UTF-8, or a line is
            malformed (naming file, line and what was expected).
    """
    dialogues, previous = [], 0
    for number, line in enumerate(
            parallel_data.read_lines(path, f"{split} file"), 1):
        def bad(expected):
            return DataError(f"{path}, line {number}: expected {expected}; "
                             f"found {line[:80]!r}")

        match = _LINE.match(line)
        if not match:
            raise bad("`N text`: a line number, a space, then text")
        index, text = int(match.group(1)), match.group(2)
        if index == 1:
            dialogues.append(Dialogue([], []))
        elif index != previous + 1:
            raise bad(f"line number 1 (a new dialogue) or {previous + 1}")
        previous = index
        persona = _PERSONA.match(text)
        if persona and "\t" not in text:
            if dialogues[-1].turns:
                raise bad("a turn (`utterance<TAB>response`): persona "
                          "lines come before the dialogue's turns")
            dialogues[-1].persona.append(persona.group(2).strip())
            continue
        fields = text.split("\t")
        if len(fields) < 2 or not fields[0].strip() or not fields[1].strip():
            raise bad("`your persona: ...` or `utterance<TAB>response` "
                      "(both non-empty)")
        dialogues[-1].turns += [fields[0].strip(), fields[1].strip()]
    return dialogues


def examples(dialogues, max_history, persona=True, source=None):
    """One example a response: the source `persona: <sentences> history:
    <turn> | <turn> | ...` (the last `max_history` turns, the partner's
    utterance last; without `persona:` when `persona` is false or there
    are none), the target the response. Returns a `Parallel`."""
    sources, targets = [], []
    for dialogue in dialogues:
        head = (f"persona: {' '.join(dialogue.persona)} "
                if persona and dialogue.persona else "")
        for end in range(1, len(dialogue.turns), 2):
            history = dialogue.turns[max(0, end - max_history):end]
            sources.append(f"{head}history: {' | '.join(history)}")
            targets.append(dialogue.turns[end])
    return parallel_data.Parallel(sources, targets, source)


def _with_gz(path):
    return path + ".gz" if not storage.isfile(path) and storage.isfile(
        path + ".gz") else path


def split_files(data_dir, persona="self", kind="original"):
    """`{split: path}` of PersonaChat's files in `data_dir`
    (`<split>_<persona>_<kind>.txt`, or `.txt.gz`); train and valid
    required, test when present.

    Raises:
        DataError: a required file is missing (naming it).
    """
    if persona == "none" and kind != "original":
        raise ValueError("Argument `--persona_file_kind=revised`: "
                         "PersonaChat has no revised files without a "
                         "persona (none_original only).")
    files = {}
    for split in SPLITS:
        name = f"{split}_{persona}_{kind}.txt"
        path = _with_gz(storage.join(data_dir, name))
        if split != "test" and not storage.isfile(path):
            raise DataError(
                f"No {split} file in --data_dir={data_dir}: expected "
                f"{name} (or .gz; PersonaChat's released "
                f"format, --persona={persona}, --persona_file_kind={kind}).")
        if storage.isfile(path):
            files[split] = path
    return files


def builtin_dir():
    return str(importlib.resources.files("recipes.dialogue") / "data"
               / "builtin")


def load(files, max_history, persona=True):
    """`{split: path}` -> `{split: Parallel}` of examples."""
    return {split: examples(read_dialogues(path, split), max_history,
                            persona, path)
            for split, path in files.items()}
