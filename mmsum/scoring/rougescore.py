"""ROUGE with per-example numbers identical to `rouge_score.RougeScorer(keys, use_stemmer=True)`.

Exactness: tokenisation is rouge_score's own (lower-case, non-alphanumerics to spaces, whitespace
split, Porter stem of words longer than 3 characters, drop non-[a-z0-9] tokens); we only cache
it. ROUGE-N uses the same Counter clipping and the same `max(count, 1)` denominators; ROUGE-L
uses a bit-parallel LCS *length* (the length is unique, so any correct algorithm agrees);
ROUGE-Lsum needs the *particular* LCS that rouge_score's backtrack picks (the union of LCS
token positions depends on tie-breaking), so it replays the same DP table and backtrack.
All arithmetic is the same Python float arithmetic in the same order, so results are bit-equal.

Speed: SCST scores the same references over and over and the same words in every summary, so the
tokenisation of whole texts and the stem of every word are LRU-cached.
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Sequence
from functools import lru_cache

import torch

DEFAULT_KEYS: tuple[str, ...] = ("rouge1", "rouge2", "rougeL", "rougeLsum")

# The exact patterns of rouge_score.tokenize (0.1.2).
_NON_ALPHANUM_RE = re.compile(r"[^a-z0-9]+")
_VALID_TOKEN_RE = re.compile(r"^[a-z0-9]+$")
_ROUGE_N_RE = re.compile(r"rouge([0-9])$")


@lru_cache(maxsize=1)
def _porter():
    from nltk.stem import porter

    return porter.PorterStemmer()


@lru_cache(maxsize=200_000)
def _stem_token(word: str) -> str:
    """Stem (words longer than 3 characters) and rouge_score's final validity check, per word type.

    Returns "" for a token rouge_score would drop. Cached: a corpus has few distinct words.
    """
    stemmed = _porter().stem(word) if len(word) > 3 else word
    return stemmed if _VALID_TOKEN_RE.match(stemmed) else ""


@lru_cache(maxsize=50_000)
def tokenize(text: str, use_stemmer: bool = True) -> tuple[str, ...]:
    """rouge_score's DefaultTokenizer, cached (returns a tuple so it is safely shareable).

    After the substitution only [a-z0-9 ] remain, so str.split() equals rouge_score's
    whitespace-regex split up to the empty strings that its validity check drops anyway.
    """
    words = _NON_ALPHANUM_RE.sub(" ", text.lower()).split()
    if use_stemmer:
        return tuple(t for t in map(_stem_token, words) if t)
    return tuple(w for w in words if _VALID_TOKEN_RE.match(w))


def _fmeasure(precision: float, recall: float) -> float:
    return 2 * precision * recall / (precision + recall) if precision + recall > 0 else 0.0


@lru_cache(maxsize=50_000)
def _ngrams(tokens: tuple[str, ...], n: int) -> Counter:
    return Counter(zip(*(tokens[i:] for i in range(n))))


def rouge_n(target: tuple[str, ...], prediction: tuple[str, ...], n: int) -> tuple[float, float, float]:
    """(precision, recall, f) of ROUGE-N on token tuples."""
    t, p = _ngrams(target, n), _ngrams(prediction, n)
    overlap = sum((t & p).values())
    precision = overlap / max(max(len(prediction) - n + 1, 0), 1)
    recall = overlap / max(max(len(target) - n + 1, 0), 1)
    return precision, recall, _fmeasure(precision, recall)


def lcs_length(a: Sequence[str], b: Sequence[str]) -> int:
    """Length of the longest common subsequence, bit-parallel (Hyyrö 2004): O(len(b)) big-int ops."""
    if not a or not b:
        return 0
    masks: dict[str, int] = {}
    for i, tok in enumerate(a):
        masks[tok] = masks.get(tok, 0) | (1 << i)
    full = (1 << len(a)) - 1
    v = full
    for tok in b:
        u = v & masks.get(tok, 0)
        v = ((v + u) | (v - u)) & full
    return len(a) - bin(v).count("1")


def rouge_l(target: tuple[str, ...], prediction: tuple[str, ...]) -> tuple[float, float, float]:
    if not target or not prediction:
        return 0, 0, 0
    lcs = lcs_length(target, prediction)
    precision = lcs / len(prediction)
    recall = lcs / len(target)
    return precision, recall, _fmeasure(precision, recall)


def _lcs_indices(ref: tuple[str, ...], can: tuple[str, ...]) -> list[int]:
    """rouge_score's `lcs_ind`: the same DP table and the same backtrack tie-breaking."""
    rows, cols = len(ref), len(can)
    table = [[0] * (cols + 1) for _ in range(rows + 1)]
    for i in range(1, rows + 1):
        r, prev, cur = ref[i - 1], table[i - 1], table[i]
        for j in range(1, cols + 1):
            cur[j] = prev[j - 1] + 1 if r == can[j - 1] else max(prev[j], cur[j - 1])
    i, j, out = rows, cols, []
    while i > 0 and j > 0:
        if ref[i - 1] == can[j - 1]:
            out.append(i - 1)
            i -= 1
            j -= 1
        elif table[i][j - 1] > table[i - 1][j]:
            j -= 1
        else:
            i -= 1
    return out


def _sentences(text: str, use_stemmer: bool) -> list[tuple[str, ...]]:
    # rouge_score (split_summaries=False): sentences are the non-empty newline-separated lines.
    return [tokenize(s, use_stemmer) for s in text.split("\n") if len(s)]


def rouge_lsum(
    target_text: str, prediction_text: str, use_stemmer: bool = True
) -> tuple[float, float, float]:
    ref_sents = _sentences(target_text, use_stemmer)
    can_sents = _sentences(prediction_text, use_stemmer)
    if not ref_sents or not can_sents:
        return 0, 0, 0
    m = sum(map(len, ref_sents))
    n = sum(map(len, can_sents))
    if not n or not m:
        return 0, 0, 0
    cnt_r: Counter = Counter()
    cnt_c: Counter = Counter()
    for s in ref_sents:
        cnt_r.update(s)
    for s in can_sents:
        cnt_c.update(s)
    hits = 0
    for r in ref_sents:
        union = sorted(set().union(*(_lcs_indices(r, c) for c in can_sents)))
        for tok in (r[i] for i in union):
            if cnt_c[tok] > 0 and cnt_r[tok] > 0:
                hits += 1
                cnt_c[tok] -= 1
                cnt_r[tok] -= 1
    recall = hits / m
    precision = hits / n
    return precision, recall, _fmeasure(precision, recall)


def _check_keys(keys: Sequence[str]) -> None:
    for k in keys:
        if k not in ("rougeL", "rougeLsum") and not _ROUGE_N_RE.match(k):
            raise ValueError(f"Invalid rouge type: {k!r} (expected rouge1..rouge9, rougeL, rougeLsum)")
        if _ROUGE_N_RE.match(k) and int(k[5:]) == 0:
            raise ValueError(f"rougen requires positive n: {k}")


def rouge_scores(
    prediction: str, reference: str, keys: Sequence[str] = DEFAULT_KEYS, use_stemmer: bool = True
) -> dict[str, tuple[float, float, float]]:
    """(precision, recall, f) per key for one pair, as `RougeScorer.score(reference, prediction)`."""
    _check_keys(keys)
    out: dict[str, tuple[float, float, float]] = {}
    pred_toks = ref_toks = ()
    if any(k != "rougeLsum" for k in keys):
        pred_toks, ref_toks = tokenize(prediction, use_stemmer), tokenize(reference, use_stemmer)
    for k in keys:
        if k == "rougeL":
            out[k] = rouge_l(ref_toks, pred_toks)
        elif k == "rougeLsum":
            out[k] = rouge_lsum(reference, prediction, use_stemmer)
        else:
            out[k] = rouge_n(ref_toks, pred_toks, int(k[5:]))
    return out


def rouge(
    predictions: Sequence[str],
    references: Sequence[str],
    keys: Sequence[str] = DEFAULT_KEYS,
    use_stemmer: bool = True,
    measure: str = "fmeasure",
) -> dict[str, torch.Tensor]:
    """Per-example ROUGE as float64 tensors in [0, 1] (`measure`: fmeasure | precision | recall).

    rougeLsum treats newlines as sentence boundaries, exactly like rouge_score; split summaries
    into lines first (e.g. with nltk.sent_tokenize) if you want the "summary-level" number.
    """
    if len(predictions) != len(references):
        raise ValueError(f"{len(predictions)} predictions but {len(references)} references")
    idx = {"precision": 0, "recall": 1, "fmeasure": 2}[measure]
    keys = tuple(keys)
    _check_keys(keys)
    cols: dict[str, list[float]] = {k: [] for k in keys}
    for pred, ref in zip(predictions, references):
        for k, s in rouge_scores(pred, ref, keys, use_stemmer).items():
            cols[k].append(s[idx])
    return {k: torch.tensor(v, dtype=torch.float64) for k, v in cols.items()}
