"""Regenerates the built-in dialogues (`--dataset=builtin`):
`python make_builtin.py`.

Short synthetic chats in PersonaChat's released text format
(`train_self_original.txt.gz`, `valid_self_original.txt`,
`test_self_original.txt`): a persona of four of five facts (job, pet,
city, food, hobby), then turns where the partner asks about a fact or
states one of theirs; the response answers from the persona (or says the
fact is missing) and depends on both the persona and the last utterance.
"""

import gzip
import os
import random

JOBS = ["teacher", "nurse", "baker", "pilot", "farmer", "lawyer", "chef",
        "painter", "mechanic", "librarian"]
PETS = ["dog", "cat", "parrot", "rabbit", "turtle", "hamster"]
NAMES = ["max", "bella", "coco", "luna", "rocky", "daisy", "oscar", "milo"]
CITIES = ["ohio", "texas", "boston", "denver", "seattle", "miami", "chicago",
          "portland"]
FOODS = ["pizza", "sushi", "tacos", "pasta", "burgers", "salad", "curry"]
HOBBIES = ["hiking", "swimming", "chess", "knitting", "gardening", "fishing",
           "dancing", "reading"]
FACTS = ("job", "pet", "city", "food", "hobby")


def persona(rng):
    """`{fact: value}` of four facts, and their persona sentences."""
    facts = dict(zip(FACTS, (rng.choice(JOBS),
                             (rng.choice(PETS), rng.choice(NAMES)),
                             rng.choice(CITIES), rng.choice(FOODS),
                             rng.choice(HOBBIES))))
    del facts[rng.choice(FACTS)]
    sentences = {"job": lambda v: f"i work as a {v} .",
                 "pet": lambda v: f"i have a {v[0]} named {v[1]} .",
                 "city": lambda v: f"i live in {v} .",
                 "food": lambda v: f"i love eating {v} .",
                 "hobby": lambda v: f"i enjoy {v} on weekends ."}
    return facts, [sentences[k](facts[k]) for k in FACTS if k in facts]


def question(fact, value):
    """(the partner's question about `fact`, the answer given `value`)."""
    if fact == "job":
        return ("what do you do for a living ?",
                f"i am a {value} ." if value else "i do not work right now .")
    if fact == "pet":
        return ("do you have any pets ?",
                f"yes , a {value[0]} called {value[1]} ." if value
                else "no , i do not have any pets .")
    if fact == "city":
        return ("where are you from ?",
                f"i am from {value} ." if value else "i move around a lot .")
    if fact == "food":
        return ("what is your favorite food ?",
                f"{value} , i could eat it every day ." if value
                else "i am not picky about food .")
    return ("what do you do for fun ?",
            f"mostly {value} ." if value else "i mostly stay home .")


def statement(rng, fact, value):
    """(the partner's statement of a fact of theirs, the answer)."""
    if fact == "pet":
        pet = rng.choice(PETS)
        said = f"i just got a {pet} ."
        if not value:
            return said, f"a {pet} ? i wish i had a pet ."
        return said, (f"me too ! my {pet} is {value[1]} ." if pet == value[0]
                      else f"cute ! i have a {value[0]} .")
    if fact == "city":
        city = rng.choice(CITIES)
        said = f"i live in {city} ."
        if not value:
            return said, f"i have never been to {city} ."
        return said, (f"no way , i live in {city} too !" if city == value
                      else f"nice , i live in {value} .")
    food = rng.choice(FOODS)
    said = f"i had {food} for dinner ."
    if not value:
        return said, f"{food} sounds good ."
    return said, (f"{food} is my favorite !" if food == value
                  else f"i would rather have {value} .")


def dialogue(rng):
    """The lines of one dialogue (numbered from 1)."""
    facts, sentences = persona(rng)
    lines = [f"your persona: {s}" for s in sentences]
    greeting = rng.choice(["hi !", "hello , how are you ?", "hey there ."])
    turns = [(greeting, rng.choice(["hi , i am good , you ?",
                                    "hello ! doing well ."]))]
    for fact in rng.sample(FACTS, rng.randint(3, 5)):
        if rng.random() < 0.3:
            said = rng.choice(("pet", "city", "food"))
            turns.append(statement(rng, said, facts.get(said)))
        else:
            turns.append(question(fact, facts.get(fact)))
    lines += [f"{utterance}\t{response}" for utterance, response in turns]
    return [f"{n} {line}" for n, line in enumerate(lines, 1)]


def main(root=os.path.join(os.path.dirname(__file__), "builtin")):
    rng = random.Random(43)
    os.makedirs(root, exist_ok=True)
    for split, count in (("train", 500), ("valid", 60), ("test", 60)):
        text = "".join(line + "\n" for _ in range(count)
                       for line in dialogue(rng))
        name = os.path.join(root, f"{split}_self_original.txt")
        if split == "train":
            with gzip.GzipFile(name + ".gz", "wb", mtime=0) as f:
                f.write(text.encode("utf-8"))
        else:
            with open(name, "w", encoding="utf-8") as f:
                f.write(text)


if __name__ == "__main__":
    main()
