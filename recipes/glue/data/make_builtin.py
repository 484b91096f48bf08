"""Regenerates the built-in task (`--task=builtin`): `python make_builtin.py`.

A small synthetic sentiment task in GLUE's SST-2 layout. Labels need more
than a bag of words: `not` flips a clause, and in `A but B` the clause
after `but` decides.
"""

import os
import random

SUBJECTS = ["the film", "this movie", "the plot", "the acting", "the story",
            "the cast", "the ending", "the script", "the music", "the show",
            "the director 's work", "the dialogue", "the pacing", "the humor"]
VERBS = ["is", "was", "seems", "felt", "looks", "remains"]
ADVERBS = ["", "", "very", "really", "quite", "truly", "rather", "so"]
POSITIVE = ["good", "great", "wonderful", "funny", "moving", "brilliant",
            "charming", "clever", "delightful", "gripping", "smart", "fresh",
            "beautiful", "touching", "enjoyable"]
NEGATIVE = ["bad", "dull", "boring", "awful", "silly", "tedious", "weak",
            "clumsy", "predictable", "flat", "bland", "messy", "painful",
            "forgettable", "lifeless"]
OPENERS = ["", "", "", "honestly ,", "overall ,", "i think", "in the end ,",
           "to be fair ,"]


def clause(rng):
    positive = rng.random() < 0.5
    negated = rng.random() < 0.35
    adjective = rng.choice(POSITIVE if positive else NEGATIVE)
    words = [rng.choice(SUBJECTS), rng.choice(VERBS)]
    if negated:
        words.append("not")
    adverb = rng.choice(ADVERBS)
    if adverb:
        words.append(adverb)
    words.append(adjective)
    return " ".join(words), int(positive != negated)


def example(rng):
    text, label = clause(rng)
    if rng.random() < 0.35:
        second, label = clause(rng)
        text = f"{text} but {second}"
    opener = rng.choice(OPENERS)
    return (f"{opener} {text} ." if opener else f"{text} ."), label


def main(folder=os.path.join(os.path.dirname(__file__), "builtin"), seed=0):
    rng = random.Random(seed)
    os.makedirs(folder, exist_ok=True)
    seen = set()
    splits = {"train": 2400, "dev": 300, "test": 300}
    for split, size in splits.items():
        rows = []
        while len(rows) < size:
            text, label = example(rng)
            if text in seen:
                continue
            seen.add(text)
            rows.append((text, label))
        path = os.path.join(folder, f"{split}.tsv")
        with open(path, "w", encoding="utf-8", newline="") as f:
            if split == "test":
                f.write("index\tsentence\n")
                for i, (text, _) in enumerate(rows):
                    f.write(f"{i}\t{text}\n")
            else:
                f.write("sentence\tlabel\n")
                for text, label in rows:
                    f.write(f"{text}\t{label}\n")


if __name__ == "__main__":
    main()
