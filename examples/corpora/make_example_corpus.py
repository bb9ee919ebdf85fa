"""Write Gym's example corpus, `example_corpus.txt` beside this script: sentences drawn
from a small grammar written for the project, one a line, so that a new site can train a
model on the phenomena of the example suites, minimal pairs and probing task in a couple
of minutes (docs/training.md, The example corpus).

The grammar has subject-verb agreement (local, across a prepositional phrase with an
attractor noun, across an object relative clause), negative polarity items (`ever` and
`any` only under `no`, `never` or `not`, never after `no` inside a relative clause alone),
determiner-noun agreement (this/that with singulars, these/those with plurals),
transitive verbs with their objects and intransitive verbs without, and subordinate
clauses that end with a comma before the main clause.

No sentence of the example benchmarks is written: each is compared with them after the
corpus check's normalisation (suites.corpora.overlap) and drawn again if it is one, so
that the check of the example corpus against the examples finds nothing. The same seed
writes the same file:

    .venv/bin/python examples/corpora/make_example_corpus.py [--lines 5000] [--seed 46]
"""

from __future__ import annotations

import argparse
import csv
import json
import random
import sys
from collections.abc import Callable, Iterator
from pathlib import Path

HERE = Path(__file__).resolve().parent
EXAMPLES = HERE.parent
sys.path.insert(0, str(EXAMPLES.parent))

from suites.corpora.overlap import normalised  # noqa: E402 - after the path is set

OUT = HERE / "example_corpus.txt"

# The words are those of everyday English that the example benchmarks use too (a model
# cannot show agreement on a noun it never saw), in sentences of the grammar's own.
# Nouns as (singular, plural).
PEOPLE = [
    ("teacher", "teachers"), ("doctor", "doctors"), ("pilot", "pilots"),
    ("mechanic", "mechanics"), ("author", "authors"), ("editor", "editors"),
    ("student", "students"), ("senator", "senators"), ("chef", "chefs"),
    ("critic", "critics"), ("voter", "voters"), ("guard", "guards"),
    ("lawyer", "lawyers"), ("farmer", "farmers"), ("nurse", "nurses"),
    ("painter", "painters"), ("child", "children"), ("boy", "boys"), ("girl", "girls"),
    ("neighbor", "neighbors"), ("officer", "officers"), ("singer", "singers"),
    ("baker", "bakers"), ("dog", "dogs"), ("cat", "cats"), ("friend", "friends"),
    ("baby", "babies"), ("bird", "birds"), ("manager", "managers"), ("driver", "drivers"),
    ("woman", "women"), ("man", "men"), ("writer", "writers"), ("worker", "workers"),
    ("judge", "judges"), ("coach", "coaches"), ("thief", "thieves"), ("mayor", "mayors"),
    ("hunter", "hunters"), ("maid", "maids"), ("gardener", "gardeners"),
    ("referee", "referees"), ("sister", "sisters"), ("company", "companies"),
    ("family", "families"), ("player", "players"), ("visitor", "visitors"),
]  # fmt: skip
THINGS = [
    ("key", "keys"), ("cabinet", "cabinets"), ("book", "books"), ("letter", "letters"),
    ("car", "cars"), ("table", "tables"), ("box", "boxes"), ("bottle", "bottles"),
    ("cake", "cakes"), ("song", "songs"), ("picture", "pictures"), ("chair", "chairs"),
    ("window", "windows"), ("bike", "bikes"), ("map", "maps"), ("lamp", "lamps"),
    ("wall", "walls"), ("tree", "trees"), ("door", "doors"), ("city", "cities"),
    ("shirt", "shirts"), ("question", "questions"), ("movie", "movies"),
    ("contract", "contracts"), ("house", "houses"), ("story", "stories"),
    ("report", "reports"), ("apple", "apples"), ("school", "schools"), ("noise", "noises"),
    ("painting", "paintings"), ("sofa", "sofas"), ("tractor", "tractors"),
    ("bridge", "bridges"), ("river", "rivers"), ("bag", "bags"), ("spoon", "spoons"),
    ("watch", "watches"), ("ship", "ships"), ("lesson", "lessons"), ("rose", "roses"),
    ("article", "articles"), ("answer", "answers"), ("farm", "farms"),
]  # fmt: skip
PLACES = [
    "in the classroom", "in the kitchen", "near the window", "at the station",
    "in the garden", "on the bus", "at the market", "behind the house", "next door",
    "upstairs", "outside", "at home", "in the city", "by the river",
]  # fmt: skip
STATES = [
    "tired", "hungry", "happy", "sure of it", "very busy", "late again", "quite calm",
    "pleased with the news", "ready for the trip", "afraid of the storm", "very kind",
    "asleep", "famous", "too expensive", "late for the bus", "older than it looks",
]  # fmt: skip
TIMES = [
    "after the walk", "after the meeting", "before dinner", "last summer", "last week",
    "yesterday", "after lunch", "on Sunday",
]  # fmt: skip
# For the present tense.
HABITS = ["every day", "in the morning", "at night", "in the evening", "on Sundays"]
PREPOSITIONS = [
    "near", "beside", "behind", "with", "next to", "across from", "above", "from", "in",
]  # fmt: skip
# Present-tense verbs as (third person singular, plural).
INTRANSITIVE = [
    ("laughs", "laugh"), ("smiles", "smile"), ("sleeps", "sleep"), ("waits", "wait"),
    ("sings", "sing"), ("works", "work"), ("runs", "run"), ("rests", "rest"),
    ("cries", "cry"), ("agrees", "agree"),
]  # fmt: skip
TRANSITIVE = [
    ("likes", "like"), ("admires", "admire"), ("trusts", "trust"), ("visits", "visit"),
    ("praises", "praise"), ("helps", "help"), ("knows", "know"), ("follows", "follow"),
    ("needs", "need"), ("makes", "make"), ("owns", "own"), ("grows", "grow"),
    ("eats", "eat"), ("writes", "write"), ("wants", "want"), ("finds", "find"),
]  # fmt: skip
# Past tense: verbs that take a thing or a person as their object, and verbs that take none.
PAST_TAKING_THINGS = [
    "devoured", "bought", "read", "wrote", "sold", "washed", "painted", "found", "fixed",
    "played", "opened", "moved", "carried", "needed", "wanted", "examined", "grabbed",
    "described", "stole", "brought", "signed", "made", "stirred", "revised", "cleaned",
    "explained", "watered", "closed", "built", "planted", "watched",
]  # fmt: skip
PAST_TAKING_PEOPLE = [
    "hired", "praised", "thanked", "blamed", "caught", "warned", "visited", "helped",
    "washed", "examined", "called", "followed",
]  # fmt: skip
PAST_INTRANSITIVE = [
    "slept", "laughed", "smiled", "arrived", "waited", "left", "paused", "rested",
    "sneezed", "shouted", "failed", "fell", "cried", "agreed", "yawned", "sighed",
    "escaped", "danced", "complained", "hesitated", "disappeared",
]  # fmt: skip
PARTICIPLES = [
    "finished the work on time", "kept a promise", "cooked for a king", "seen the sea",
    "visited the city", "read the letter", "fixed the car", "left the village",
    "won a prize", "missed the bus", "told a lie", "lost a game",
]  # fmt: skip
PRONOUNS = ["She", "He", "We", "They", "I", "You"]
SUBORDINATORS = ["As", "While", "When", "After", "Before", "Because", "Although", "Though"]


def _subject(rng: random.Random) -> tuple[str, bool]:
    """A person (singular or plural) and whether it is plural."""
    plural = rng.random() < 0.5
    return PEOPLE[rng.randrange(len(PEOPLE))][plural], plural


def _agree(pair: tuple[str, str], plural: bool) -> str:
    return pair[1] if plural else pair[0]


def local_agreement(rng: random.Random) -> str:
    noun, plural = _subject(rng)
    verb = rng.choice([("is", "are"), ("was", "were")])
    rest = rng.choice(
        [rng.choice(PLACES), rng.choice(STATES), f"{rng.choice(STATES)} {rng.choice(TIMES)}"]
    )
    chosen = rng.random()
    if chosen < 0.2:
        verb, rest = ("has", "have"), f"a {rng.choice(THINGS)[0]} {rng.choice(PLACES)}"
    elif chosen < 0.5:
        verb, rest = rng.choice(TRANSITIVE), f"the {rng.choice(THINGS)[rng.random() < 0.5]}"
    elif chosen < 0.65:
        verb, rest = rng.choice(INTRANSITIVE), rng.choice(PLACES + HABITS)
    return f"The {noun} {_agree(verb, plural)} {rest}."


def attractor_agreement(rng: random.Random) -> str:
    """Subject, a prepositional phrase with a noun of either number, the verb."""
    noun, plural = _subject(rng)
    other = rng.choice(PEOPLE + THINGS)[rng.random() < 0.5]
    if rng.random() < 0.6:
        verb = rng.choice([("is", "are"), ("was", "were"), ("has been", "have been")])
        rest = rng.choice(STATES + PLACES)
    else:
        verb = rng.choice(INTRANSITIVE + TRANSITIVE)
        rest = rng.choice(HABITS) if verb in INTRANSITIVE else f"the {rng.choice(THINGS)[0]}"
    return f"The {noun} {rng.choice(PREPOSITIONS)} the {other} {_agree(verb, plural)} {rest}."


def relative_agreement(rng: random.Random) -> str:
    """An object relative clause whose subject has another number than the head."""
    noun, plural = _subject(rng)
    inner, inner_plural = _subject(rng)
    inner_verb = _agree(rng.choice(TRANSITIVE), inner_plural)
    if rng.random() < 0.5:
        main = _agree(rng.choice(INTRANSITIVE), plural)
    else:
        main = f"{_agree(('is', 'are'), plural)} {rng.choice(STATES)}"
    return f"The {noun} that the {inner} {inner_verb} {main}."


def npi_sentence(rng: random.Random) -> str:
    """`ever` and `any` under a licensor; their plain counterparts without one."""
    noun, plural = _subject(rng)
    have = _agree(("has", "have"), plural)
    done = rng.choice(PARTICIPLES)
    inner, _ = _subject(rng)
    verb = rng.choice(PAST_TAKING_THINGS)
    things = rng.choice(THINGS)[1]
    return rng.choice(
        [
            f"No {noun} {have} ever {done}.",
            f"No {noun} that the {inner} {rng.choice(['praised', 'trusted', 'admired'])} {have} ever {done}.",
            f"The {noun} {have} never {done}.",
            f"The {noun} did not ever say a word.",
            f"The {noun} {have} {done}.",
            f"The {noun} that no {inner} {rng.choice(['praised', 'trusted', 'admired'])} {have} {done}.",
            f"No {noun} {verb} any {things}.",
            f"The {noun} did not find any {things}.",
            f"The {noun} {verb} some {things}.",
        ]
    )


def determiner_agreement(rng: random.Random) -> str:
    singular, plural = rng.choice(THINGS)
    verb = rng.choice([*PAST_TAKING_THINGS, "liked", "saw", "kept", "remember", "love"])
    if rng.random() < 0.5:
        phrase = f"{rng.choice(['this', 'that'])} {singular}"
    else:
        phrase = f"{rng.choice(['these', 'those'])} {plural}"
    return f"{rng.choice(PRONOUNS)} {verb} {phrase} {rng.choice(TIMES)}."


def _object(rng: random.Random) -> tuple[str, str]:
    """A past-tense verb that takes an object, and an object it takes."""
    if rng.random() < 0.7:
        return rng.choice(PAST_TAKING_THINGS), rng.choice(THINGS)[rng.random() < 0.3]
    return rng.choice(PAST_TAKING_PEOPLE), rng.choice(PEOPLE)[rng.random() < 0.3]


def transitivity(rng: random.Random) -> str:
    noun, _ = _subject(rng)
    if rng.random() < 0.6:
        verb, thing = _object(rng)
        plural = thing.endswith("s") or thing in ("children", "women", "men")
        owner = rng.choice(["the", "my", "her", "his"] if plural else ["the", "a", "my", "her"])
        return f"The {noun} {verb} {owner} {thing}."
    return f"The {noun} {rng.choice(PAST_INTRANSITIVE)}."


def subordinate_clause(rng: random.Random) -> str:
    """A subordinate clause, then a comma and the main clause: a transitive verb in it
    has its object, an intransitive one none."""
    first, _ = _subject(rng)
    second = rng.choice(PEOPLE + THINGS)[rng.random() < 0.3]
    chosen = rng.random()
    if chosen < 0.45:
        clause = "the {} {} the {}".format(first, *_object(rng))
    elif chosen < 0.6:  # a verb that may take an object, here without one
        clause = f"the {first} {_object(rng)[0]}"
    else:
        clause = f"the {first} {rng.choice(PAST_INTRANSITIVE)}"
    main = f"the {second} {rng.choice(PAST_INTRANSITIVE)} {rng.choice(PLACES + TIMES)}"
    return f"{rng.choice(SUBORDINATORS)} {clause}, {main}."


# Each kind of sentence and its share of the corpus.
GRAMMAR: list[tuple[Callable[[random.Random], str], int]] = [
    (local_agreement, 3),
    (attractor_agreement, 3),
    (relative_agreement, 2),
    (npi_sentence, 3),
    (determiner_agreement, 2),
    (transitivity, 2),
    (subordinate_clause, 2),
]


def example_sentences() -> set[str]:
    """Every sentence of the example suites, minimal-pair set and probing task,
    normalised as the corpus check normalises them."""
    found: set[str] = set()
    for path in sorted(EXAMPLES.glob("*.json")):
        for item in json.loads(path.read_text())["items"]:
            for condition in item["conditions"]:
                found.add(" ".join(r["content"] for r in condition["regions"]))
    for path in sorted((EXAMPLES / "minimal_pairs").glob("*.tsv")):
        with path.open(newline="") as handle:
            found.update(row["sentence"] for row in csv.DictReader(handle, delimiter="\t"))
    for path in sorted((EXAMPLES / "probing").glob("*.txt")):
        found.update(line.split("\t")[2] for line in path.read_text().splitlines() if line)
    return {normalised(s) for s in found}


def sentences(lines: int, seed: int) -> Iterator[str]:
    rng = random.Random(seed)
    kinds = [kind for kind, share in GRAMMAR for _ in range(share)]
    avoid = example_sentences()
    for _ in range(lines):
        while normalised(sentence := rng.choice(kinds)(rng)) in avoid:
            pass
        yield sentence[0].upper() + sentence[1:]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--lines", type=int, default=5000)
    parser.add_argument("--seed", type=int, default=46)
    parser.add_argument("--out", type=Path, default=OUT)
    args = parser.parse_args()
    text = "".join(f"{s}\n" for s in sentences(args.lines, args.seed))
    args.out.write_text(text, encoding="utf-8")
    print(f"wrote {args.lines} sentences, {len(text.encode()):,} bytes, to {args.out}")


if __name__ == "__main__":
    main()
