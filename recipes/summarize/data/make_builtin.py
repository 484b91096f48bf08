"""Regenerates the built-in task (`--dataset=builtin`): `python make_builtin.py`.

Short synthetic "news" documents, one a line as `document<TAB>summary`
(`train.tsv.gz`, `valid.tsv`, `test.tsv`). Each document holds one key
sentence (a match, a storm, a company's results, ...) at a random place
among background sentences that mention other names; the summary is an
abstractive one-sentence headline of the key sentence: finding it and
rewriting it beats copying the lead sentences.
"""

import gzip
import os
import random

CITIES = ["Lyon", "Porto", "Leeds", "Turin", "Ghent", "Bergen", "Cork",
          "Graz", "Malmo", "Basel", "Split", "Krakow", "Seville", "Utrecht"]
TEAMS = ["United", "Rovers", "Athletic", "City", "Wanderers", "Albion",
         "Rangers", "Dynamo", "Sporting", "Olympic"]
COMPANIES = ["Norvex", "Altura", "Bramco", "Kestrel", "Lumina", "Vantor",
             "Orbis", "Pellam", "Sandor", "Tessaro"]
PEOPLE = ["Anna Berg", "Tom Hale", "Maria Costa", "Jan Novak", "Lena Roth",
          "Paul Adler", "Sara Lind", "Marc Dubois", "Eva Marsh", "Omar Reyes"]
ANIMALS = ["frog", "beetle", "orchid", "lizard", "moth", "snail", "fern"]
THINGS = ["housing", "transport", "parks", "school", "water", "cycling"]
DAYS = ["Monday", "Tuesday", "Wednesday", "Thursday", "Friday", "Saturday",
        "Sunday"]
NUMBERS = ["two", "three", "four", "five", "six", "seven", "eight", "nine"]


def event(rng):
    """(key sentence, summary) of one news event."""
    city, day = rng.choice(CITIES), rng.choice(DAYS)
    kind = rng.randrange(6)
    if kind == 0:
        home, away = rng.sample(TEAMS, 2)
        a, b = sorted(rng.sample(range(6), 2), reverse=True)
        return (f"{city} {home} beat {away} {a} to {b} at home on {day} "
                "evening in front of a full stadium.",
                f"{home} beat {away} in {city}.")
    if kind == 1:
        n = rng.choice(NUMBERS)
        return (f"A heavy storm hit {city} on {day}, and {n} schools were "
                "closed as strong winds brought down trees.",
                f"Storm closes {n} schools in {city}.")
    if kind == 2:
        company, n = rng.choice(COMPANIES), rng.choice(NUMBERS)
        verb, noun = rng.choice([("rose", "rise"), ("fell", "fall")])
        return (f"The {city} firm {company} said on {day} that its yearly "
                f"profits {verb} by {n} percent.",
                f"{company} profits {noun} {n} percent.")
    if kind == 3:
        person, thing = rng.choice(PEOPLE), rng.choice(THINGS)
        return (f"The mayor of {city}, {person}, announced a new {thing} "
                f"plan for the city on {day}.",
                f"{city} mayor {person} announces {thing} plan.")
    if kind == 4:
        animal = rng.choice(ANIMALS)
        return (f"Scientists at the university of {city} said on {day} that "
                f"they had found a new species of {animal}.",
                f"New {animal} species found in {city}.")
    person = rng.choice(PEOPLE)
    return (f"The singer {person} cancelled a concert in {city} on {day} "
            "because of illness.",
            f"{person} cancels {city} concert.")


def background(rng):
    """A sentence of no news."""
    person, city = rng.choice(PEOPLE), rng.choice(CITIES)
    return rng.choice([
        f"{person} said the situation was being watched closely.",
        "Officials did not comment further on the matter.",
        "More details are expected to be published later this week.",
        f"Many people in {city} shared the news online.",
        f"{city} has a population of about {rng.choice(NUMBERS)} hundred "
        "thousand people.",
        f"It was the first such event since {rng.randrange(1990, 2020)}.",
        f"Local reporter {person} said residents were surprised.",
        f"The weather in {city} is expected to stay mild.",
        "A spokesperson promised an update in the coming days.",
    ])


def document(rng):
    key, summary = event(rng)
    sentences = [background(rng) for _ in range(rng.randint(3, 6))]
    sentences.insert(rng.randint(0, len(sentences)), key)
    return " ".join(sentences), summary


def main(root=os.path.join(os.path.dirname(__file__), "builtin")):
    rng = random.Random(43)
    os.makedirs(root, exist_ok=True)
    for split, count in (("train", 1200), ("valid", 100), ("test", 100)):
        text = "".join("\t".join(document(rng)) + "\n" for _ in range(count))
        if split == "train":
            with gzip.GzipFile(os.path.join(root, "train.tsv.gz"), "wb",
                               mtime=0) as f:
                f.write(text.encode("utf-8"))
        else:
            with open(os.path.join(root, f"{split}.tsv"), "w",
                      encoding="utf-8") as f:
                f.write(text)


if __name__ == "__main__":
    main()
