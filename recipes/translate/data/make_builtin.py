"""Regenerates the built-in task (`--dataset=builtin`): `python make_builtin.py`.

A small synthetic German-English parallel corpus in Multi30k's layout
(`train.de.gz`/`train.en.gz`, `valid.*`, `test.*`, one sentence per line,
line i of `.de` translating line i of `.en`). Translating it needs more than
a word-for-word table: German inflects articles, adjectives and verbs for
number, puts the verb second after a fronted place, and some words have
several translations depending on context.
"""

import gzip
import os
import random

# (German singular, German plural, gender, English singular, plural)
NOUNS = [
    ("Hund", "Hunde", "m", "dog", "dogs"),
    ("Katze", "Katzen", "f", "cat", "cats"),
    ("Mann", "Männer", "m", "man", "men"),
    ("Frau", "Frauen", "f", "woman", "women"),
    ("Kind", "Kinder", "n", "child", "children"),
    ("Junge", "Jungen", "m", "boy", "boys"),
    ("Mädchen", "Mädchen", "n", "girl", "girls"),
    ("Vogel", "Vögel", "m", "bird", "birds"),
    ("Pferd", "Pferde", "n", "horse", "horses"),
    ("Arbeiter", "Arbeiter", "m", "worker", "workers"),
    ("Radfahrer", "Radfahrer", "m", "cyclist", "cyclists"),
    ("Musikerin", "Musikerinnen", "f", "musician", "musicians"),
]
ADJECTIVES = [
    ("klein", "small"), ("groß", "big"), ("alt", "old"), ("jung", "young"),
    ("rot", "red"), ("schwarz", "black"), ("weiß", "white"),
    ("braun", "brown"), ("glücklich", "happy"), ("müde", "tired"),
]
# (German 3rd singular, 3rd plural, English singular, plural)
VERBS = [
    ("läuft", "laufen", "runs", "run"), ("spielt", "spielen", "plays", "play"),
    ("springt", "springen", "jumps", "jump"),
    ("schläft", "schlafen", "sleeps", "sleep"),
    ("sitzt", "sitzen", "sits", "sit"), ("wartet", "warten", "waits", "wait"),
    ("steht", "stehen", "stands", "stand"),
    ("singt", "singen", "sings", "sing"),
]
PLACES = [
    ("im Park", "in the park"), ("am Strand", "on the beach"),
    ("auf der Straße", "on the street"), ("im Wasser", "in the water"),
    ("im Schnee", "in the snow"), ("vor dem Haus", "in front of the house"),
    ("neben dem Auto", "next to the car"), ("unter einem Baum",
                                            "under a tree"),
]
TIMES = [("heute", "today"), ("am Abend", "in the evening"),
         ("im Sommer", "in the summer")]
NUMBERS = [("Zwei", "Two"), ("Drei", "Three"), ("Vier", "Four"),
           ("Viele", "Many")]
DEFINITE = {"m": "Der", "f": "Die", "n": "Das"}
INDEFINITE = {"m": "Ein", "f": "Eine", "n": "Ein"}


def inflect(adjective, ending):
    """`müde` + `e` is `müde`, `klein` + `er` is `kleiner`."""
    if adjective.endswith("e") and ending.startswith("e"):
        return adjective + ending[1:]
    return adjective + ending


def noun_phrase(rng):
    """Returns (German, English, plural) of a subject noun phrase."""
    de_sg, de_pl, gender, en_sg, en_pl = rng.choice(NOUNS)
    adjective = rng.choice(ADJECTIVES) if rng.random() < 0.6 else None
    kind = rng.choice(["definite", "indefinite", "number"])
    if kind == "number":
        number_de, number_en = rng.choice(NUMBERS)
        de = [number_de]
        en = [number_en]
        if adjective:
            de.append(inflect(adjective[0], "e"))
            en.append(adjective[1])
        return de + [de_pl], en + [en_pl], True
    if kind == "definite":
        de, en = [DEFINITE[gender]], ["The"]
        ending = "e"
    else:
        next_word = adjective[1] if adjective else en_sg
        de, en = [INDEFINITE[gender]], ["An" if next_word[0] in "aeiou"
                                        else "A"]
        ending = {"m": "er", "f": "e", "n": "es"}[gender]
    if adjective:
        de.append(inflect(adjective[0], ending))
        en.append(adjective[1])
    return de + [de_sg], en + [en_sg], False


def sentence(rng):
    de, en, plural = noun_phrase(rng)
    verb = rng.choice(VERBS)
    de_verb, en_verb = (verb[1], verb[3]) if plural else (verb[0], verb[2])
    place = rng.choice(PLACES) if rng.random() < 0.8 else None
    time = rng.choice(TIMES) if rng.random() < 0.25 else None
    if place and rng.random() < 0.3:
        # Fronted place: the German verb comes second, before the subject.
        subject = [de[0].lower()] + de[1:]
        german = [place[0][0].upper() + place[0][1:], de_verb] + subject
        if time:
            german.append(time[0])
        english = en + [en_verb, place[1]]
    else:
        german = de + [de_verb]
        if time:
            german.append(time[0])
        if place:
            german.append(place[0])
        english = en + [en_verb] + ([place[1]] if place else [])
    if time:
        english.append(time[1])
    if rng.random() < 0.15:
        # A second clause: "und lacht" / "and laughs".
        german.append("und lachen" if plural else "und lacht")
        english.append("and laugh" if plural else "and laughs")
    return " ".join(german) + ".", " ".join(english) + "."


def write(path, lines, compress):
    data = "".join(line + "\n" for line in lines).encode("utf-8")
    with open(path, "wb") as f:
        if compress:
            # mtime=0: the same bytes every time the script runs.
            with gzip.GzipFile(fileobj=f, mode="wb", mtime=0) as g:
                g.write(data)
        else:
            f.write(data)


def main():
    rng = random.Random(20200505)
    here = os.path.join(os.path.dirname(os.path.abspath(__file__)), "builtin")
    os.makedirs(here, exist_ok=True)
    seen = set()
    pairs = []
    while len(pairs) < 4400:
        pair = sentence(rng)
        if pair not in seen:
            seen.add(pair)
            pairs.append(pair)
    splits = {"train": pairs[:4000], "valid": pairs[4000:4200],
              "test": pairs[4200:]}
    for split, rows in splits.items():
        for i, language in enumerate(("de", "en")):
            compress = split == "train"
            name = f"{split}.{language}" + (".gz" if compress else "")
            write(os.path.join(here, name), [row[i] for row in rows],
                  compress)
    print({k: len(v) for k, v in splits.items()})


if __name__ == "__main__":
    main()
