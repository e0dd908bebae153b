"""Deterministic news-like documents and summaries for the benchmarks (no downloads).

Documents are a few hundred words drawn from templated sentences that name people, places and
organisations; reference summaries restate some document sentences and sometimes name an entity
the document never mentions (what the entity filter must catch); "sampled" summaries are noisy
copies of document spans, the way an SCST policy's samples look early in training.
"""

from __future__ import annotations

import random
from dataclasses import dataclass

PEOPLE = [
    "Barack Obama", "Angela Merkel", "Theresa May", "Emmanuel Macron", "Jacinda Ardern", "John Smith",
    "Maria Garcia", "David Cameron", "Hillary Clinton", "Vladimir Putin", "Shinzo Abe", "Justin Trudeau",
    "Narendra Modi", "Xi Jinping", "Boris Johnson", "Nicola Sturgeon", "Kofi Annan", "Serena Williams",
]  # fmt: skip
PLACES = [
    "London", "Paris", "Berlin", "New York", "Tokyo", "Sydney", "Chicago", "Madrid", "Rome", "Moscow",
    "Beijing", "Toronto", "Dublin", "Edinburgh", "Texas", "California", "Brazil", "India", "Kenya",
]  # fmt: skip
ORGS = [
    "the United Nations", "Google", "the BBC", "NASA", "the European Union", "Microsoft", "Reuters",
    "the World Health Organization", "Apple", "the Red Cross", "Amazon", "the Federal Reserve",
]  # fmt: skip
VERBS = ["said", "announced", "warned", "confirmed", "denied", "revealed", "claimed", "reported"]
NOUNS = [
    "jobs", "taxes", "schools", "hospitals", "energy prices", "the budget", "new rules", "the election",
    "trade talks", "climate targets", "the housing market", "rail services", "water supplies",
]  # fmt: skip
TEMPLATES = [
    "{p} {v} on Monday that {o} would spend more on {n} in {g}.",
    "Officials in {g} {v} that {n} had risen sharply this year.",
    "{o} {v} that {p} had met leaders from {g} to discuss {n}.",
    "The plan for {n} was {v2} by {p} during a visit to {g}.",
    "Critics said the changes to {n} would hurt families across {g}.",
    "A spokesman for {o} {v} the report on {n} was accurate.",
    "Thousands of people gathered in {g} to protest against {n}.",
    "{p} told reporters that {n} remained the top priority for {o}.",
]  # fmt: skip


@dataclass
class Pair:
    document: str
    reference: str  # sentences separated by spaces (the entity filter splits them)


def _sentence(rng: random.Random, entities: dict[str, list[str]]) -> str:
    return rng.choice(TEMPLATES).format(
        p=rng.choice(entities["p"]),
        g=rng.choice(entities["g"]),
        o=rng.choice(entities["o"]),
        n=rng.choice(NOUNS),
        v=rng.choice(VERBS),
        v2=rng.choice(["praised", "criticised", "welcomed", "rejected"]),
    )


def _capitalize(s: str) -> str:
    return s[:1].upper() + s[1:]


def make_pairs(n: int, doc_words: int = 400, seed: int = 0) -> list[Pair]:
    """`n` (document, reference) pairs; about a third of the reference sentences name an outside entity."""
    rng = random.Random(seed)
    out = []
    for _ in range(n):
        ents = {"p": rng.sample(PEOPLE, 3), "g": rng.sample(PLACES, 3), "o": rng.sample(ORGS, 2)}
        sents: list[str] = []
        while sum(len(s.split()) for s in sents) < doc_words:
            sents.append(_capitalize(_sentence(rng, ents)))
        ref = []
        for _ in range(rng.randint(2, 4)):
            if rng.random() < 0.35:  # an entity the document does not support
                outside = {
                    "p": [rng.choice([p for p in PEOPLE if p not in ents["p"]])],
                    "g": [rng.choice([g for g in PLACES if g not in ents["g"]])],
                    "o": ents["o"],
                }
                ref.append(_capitalize(_sentence(rng, outside)))
            else:
                ref.append(rng.choice(sents))
        out.append(Pair(" ".join(sents), " ".join(ref)))
    return out


def sample_summary(document: str, rng: random.Random, words: int = 45) -> str:
    """A policy-sample-like summary: a document span with a few words dropped or swapped."""
    toks = document.split()
    start = rng.randrange(max(1, len(toks) - words))
    span = toks[start : start + words]
    out = []
    for tok in span:
        r = rng.random()
        if r < 0.08:
            continue
        out.append(rng.choice(toks) if r < 0.16 else tok)
    return " ".join(out)
