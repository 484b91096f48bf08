"""Regenerates the built-in corpus (`--dataset=builtin`):
`python make_builtin.py`.

Small synthetic plays in Tiny Shakespeare's layout (a speaker's name and a
colon on one line, the speech on the next lines, a blank line between
speeches), generated from a seeded grammar, so that they are ours to ship:
`train.txt.gz` (about 300 KB of text), `valid.txt` and `test.txt` (about
15 KB each, other seeds). A character model learns the names, the layout
and the frequent words in a minute on two CPU cores.
"""

import gzip
import os
import random

SPEAKERS = ["ROMEO", "JULIET", "NURSE", "MERCUTIO", "FRIAR LAURENCE",
            "CAPULET", "LADY CAPULET", "BENVOLIO", "TYBALT", "PRINCE",
            "FIRST CITIZEN", "SECOND CITIZEN", "PAGE"]
SUBJECTS = ["my lord", "the night", "fair Verona", "this sword", "the moon",
            "your father", "my heart", "the friar", "a rose", "thy name",
            "the prince", "our house", "sweet love", "the morning"]
VERBS = ["doth call", "shall break", "will keep", "hath seen", "must find",
         "doth bear", "shall know", "will love", "hath lost", "must leave"]
OBJECTS = ["the light of day", "a gentle word", "the bitter end",
           "my poor soul", "thy true face", "the quarrel", "a cup of wine",
           "the city gates", "no more of this", "the stars above", "a letter",
           "her hand"]
OPENERS = ["O", "Alas,", "Nay,", "Peace,", "Good morrow,", "Hark,", "Come,",
           "Farewell,", "Ay,", "Why,"]
ADDRESSES = ["sir", "madam", "good friend", "cousin", "my love", "gentlemen",
             "thou villain", "sweet nurse", "holy father"]
ENDINGS = [".", "!", "?", ";", ","]


def sentence(rng):
    parts = []
    if rng.random() < 0.4:
        parts.append(f"{rng.choice(OPENERS)} {rng.choice(ADDRESSES)},")
    parts.append(f"{rng.choice(SUBJECTS)} {rng.choice(VERBS)} "
                 f"{rng.choice(OBJECTS)}")
    text = " ".join(parts)
    return text[0].upper() + text[1:] + rng.choice(ENDINGS[:3])


def speech(rng):
    lines = [f"{rng.choice(SPEAKERS)}:"]
    for _ in range(rng.randint(1, 4)):
        line = sentence(rng)
        if rng.random() < 0.5:
            line += " " + sentence(rng)
        lines.append(line)
    return "\n".join(lines) + "\n\n"


def play(seed, size):
    rng = random.Random(seed)
    parts, total = [], 0
    while total < size:
        parts.append(speech(rng))
        total += len(parts[-1])
    return "".join(parts)


def main():
    folder = os.path.join(os.path.dirname(os.path.abspath(__file__)),
                          "builtin")
    os.makedirs(folder, exist_ok=True)
    with gzip.GzipFile(os.path.join(folder, "train.txt.gz"), "wb",
                       mtime=0) as f:
        f.write(play(0, 300_000).encode("utf-8"))
    for seed, split in ((1, "valid"), (2, "test")):
        with open(os.path.join(folder, f"{split}.txt"), "w",
                  encoding="utf-8") as f:
            f.write(play(seed, 15_000))


if __name__ == "__main__":
    main()
