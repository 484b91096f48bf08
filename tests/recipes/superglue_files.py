"""Small files in SuperGLUE's released JSONL layout, for each of the
recipe's SuperGLUE tasks (test helper)."""

import json
import os

# Per task: (folder, {file: [example, ...]}), with the release's field
# names and label forms: JSON true/false (BoolQ, WiC, WSC), strings (CB,
# RTE), 0/1 (COPA); WSC's spans under `target`; test files without labels.
SUPERGLUE_FILES = {
    "boolq": ("BoolQ", {
        "train.jsonl": [
            {"question": "do iran and afghanistan speak the same language",
             "passage": "Persian language -- Persian is a language.",
             "idx": 0, "label": True},
            {"question": "is elder scrolls online the same as skyrim",
             "passage": "As with other games in The Elder Scrolls series.",
             "idx": 1, "label": False},
        ],
        "val.jsonl": [
            {"question": "does ethanol take more energy make that produces",
             "passage": "Ethanol fuel -- All biomass goes through steps.",
             "idx": 0, "label": False},
        ],
        "test.jsonl": [
            {"question": "is the lake of the ozarks man made",
             "passage": "Lake of the Ozarks is a reservoir.", "idx": 0},
        ],
    }),
    "cb": ("CB", {
        "train.jsonl": [
            {"premise": "It was a complex language.",
             "hypothesis": "the language was peeled down", "idx": 0,
             "label": "contradiction"},
            {"premise": "He said that he was coming.",
             "hypothesis": "he was coming", "idx": 1, "label": "entailment"},
            {"premise": "Maybe she knew it.", "hypothesis": "she knew it",
             "idx": 2, "label": "neutral"},
        ],
        "val.jsonl": [
            {"premise": "Valence was helping.",
             "hypothesis": "Valence was helping", "idx": 0,
             "label": "entailment"},
        ],
        "test.jsonl": [
            {"premise": "Mary is a high school student.",
             "hypothesis": "Mary is a student", "idx": 0},
        ],
    }),
    "copa": ("COPA", {
        "train.jsonl": [
            {"premise": "My body cast a shadow over the grass.",
             "choice1": "The sun was rising.",
             "choice2": "The grass was cut.", "question": "cause",
             "idx": 0, "label": 0},
            {"premise": "The woman tolerated her friend's difficult "
             "behavior.", "choice1": "The woman knew her friend was going "
             "through a hard time.", "choice2": "The woman felt that her "
             "friend took advantage of her kindness.", "question": "cause",
             "idx": 1, "label": 0},
            {"premise": "The women met for coffee.",
             "choice1": "The cafe reopened in a new location.",
             "choice2": "They wanted to catch up with each other.",
             "question": "effect", "idx": 2, "label": 1},
        ],
        "val.jsonl": [
            {"premise": "The man turned on the faucet.",
             "choice1": "The toilet filled with water.",
             "choice2": "Water flowed from the spout.",
             "question": "effect", "idx": 0, "label": 1},
        ],
        "test.jsonl": [
            {"premise": "The item was packaged in bubble wrap.",
             "choice1": "It was fragile.", "choice2": "It was small.",
             "question": "cause", "idx": 0},
        ],
    }),
    "superglue_rte": ("RTE", {
        "train.jsonl": [
            {"premise": "No Weapons of Mass Destruction Found in Iraq Yet.",
             "hypothesis": "Weapons of Mass Destruction Found in Iraq.",
             "idx": 0, "label": "not_entailment"},
            {"premise": "A place of sorrow, after Pope John Paul II died.",
             "hypothesis": "Pope John Paul II died.", "idx": 1,
             "label": "entailment"},
        ],
        "val.jsonl": [
            {"premise": "Dana Reeve died of lung cancer.",
             "hypothesis": "Christopher Reeve had an accident.", "idx": 0,
             "label": "not_entailment"},
        ],
        "test.jsonl": [
            {"premise": "Mangla was an island.",
             "hypothesis": "Mangla is an island.", "idx": 0},
        ],
    }),
    "wic": ("WiC", {
        "train.jsonl": [
            {"word": "place", "sentence1": "Do you want to come over to my "
             "place later?", "sentence2": "A political system with no place "
             "for the less prominent groups.", "idx": 0, "label": False,
             "start1": 31, "start2": 27, "end1": 36, "end2": 32,
             "version": 1.1},
            {"word": "summer", "sentence1": "We like to summer in the "
             "Mediterranean.", "sentence2": "We summered in Kashmir.",
             "idx": 1, "label": True, "start1": 11, "start2": 3,
             "end1": 17, "end2": 11, "version": 1.1},
        ],
        "val.jsonl": [
            {"word": "board", "sentence1": "Room and board.",
             "sentence2": "He nailed boards across the windows.", "idx": 0,
             "label": False, "start1": 9, "start2": 10, "end1": 14,
             "end2": 16, "version": 1.1},
        ],
        "test.jsonl": [
            {"word": "defeat", "sentence1": "It was a narrow defeat.",
             "sentence2": "The army's only defeat.", "idx": 0, "start1": 16,
             "start2": 16, "end1": 22, "end2": 22, "version": 1.1},
        ],
    }),
    "wsc": ("WSC", {
        "train.jsonl": [
            {"text": "Mark told Pete many lies about himself, which Pete "
             "included in his book. He should have been more skeptical.",
             "target": {"span2_index": 13, "span1_index": 0,
                        "span1_text": "Mark", "span2_text": "He"},
             "idx": 0, "label": False},
            {"text": "The mothers of Arthur and Celeste have come to the "
             "town to fetch them.",
             "target": {"span2_index": 12, "span1_index": 0,
                        "span1_text": "The mothers", "span2_text": "them"},
             "idx": 1, "label": False},
        ],
        "val.jsonl": [
            {"text": "The trophy doesn't fit into the brown suitcase "
             "because it is too large.",
             "target": {"span2_index": 8, "span1_index": 0,
                        "span1_text": "The trophy", "span2_text": "it"},
             "idx": 0, "label": True},
        ],
        "test.jsonl": [
            {"text": "The dog chased the cat, which ran up a tree. It "
             "waited at the bottom.",
             "target": {"span2_index": 10, "span1_index": 0,
                        "span1_text": "The dog", "span2_text": "It"},
             "idx": 0},
        ],
    }),
}


def jsonl_text(examples):
    return "".join(json.dumps(e) + "\n" for e in examples)


def write_superglue_task(root, task_name, files=None):
    """Writes `task_name`'s files under `root/<folder>/`; returns that
    folder. `files` replaces `{file: examples}` of the table."""
    folder, table = SUPERGLUE_FILES[task_name]
    path = os.path.join(str(root), folder)
    os.makedirs(path, exist_ok=True)
    for name, examples in (files or table).items():
        with open(os.path.join(path, name), "w", encoding="utf-8") as f:
            f.write(jsonl_text(examples))
    return path
