"""Throughput of the metrics on this machine: `python -m mmsum.scoring.bench [--pairs N]`.

Uses the offline models (tiny CLIP, MiniLM with 6 layers) on synthetic news-like pairs; prints
pairs/s for ROUGE (ours vs rouge_score), BERT-S with a cold and a warm document cache, CLIP-S,
and CLIPBERTScore in an SCST-shaped call (B documents x (K + 1) summaries).
"""

from __future__ import annotations

import argparse
import json
import random
import time

import torch

WORDS = (
    "the government said on monday that officials in paris had announced new jobs for workers in the "
    "energy sector while scientists found water on the moon and the market fell as investors worried"
).split()


def _text(rng: random.Random, n: int) -> str:
    sents = []
    while n > 0:
        k = min(n, rng.randint(8, 20))
        sents.append(" ".join(rng.choice(WORDS) for _ in range(k)).capitalize() + ".")
        n -= k
    return " ".join(sents)


def _rate(fn, n: int, repeat: int = 1) -> float:
    best = float("inf")
    for _ in range(repeat):
        t = time.perf_counter()
        fn()
        best = min(best, time.perf_counter() - t)
    return n / best


def main(argv: list[str] | None = None) -> dict[str, float]:
    p = argparse.ArgumentParser()
    p.add_argument("--pairs", type=int, default=256)
    p.add_argument("--doc-words", type=int, default=400)
    p.add_argument("--k", type=int, default=4)
    args = p.parse_args(argv)
    torch.set_num_threads(max(1, torch.get_num_threads()))
    rng = random.Random(0)
    docs = [_text(rng, args.doc_words) for _ in range(args.pairs // (args.k + 1))]
    docs = [d for d in docs for _ in range(args.k + 1)]
    summaries = [_text(rng, 50) for _ in docs]
    refs = [_text(rng, 50) for _ in docs]
    n = len(docs)
    out: dict[str, float] = {"pairs": n, "threads": torch.get_num_threads()}

    from rouge_score import rouge_scorer

    from mmsum.scoring.rougescore import rouge, tokenize

    for key in ("rouge2", "rougeL", "rougeLsum"):
        ref_scorer = rouge_scorer.RougeScorer([key], use_stemmer=True)
        out[f"{key}_rouge_score_pairs_s"] = _rate(
            lambda k=key, s=ref_scorer: [s.score(r, c) for c, r in zip(summaries, refs)], n
        )
        tokenize.cache_clear()
        out[f"{key}_ours_cold_pairs_s"] = _rate(lambda k=key: rouge(summaries, refs, [k]), n)
        # SCST-shaped: references already seen, summaries new (words seen, texts not).
        fresh = [s + " again" for s in summaries]
        out[f"{key}_ours_new_summaries_pairs_s"] = _rate(lambda k=key, f=fresh: rouge(f, refs, [k]), n)

    from mmsum.models.tiny import ensure_tiny_clip
    from mmsum.scoring import BertScorer, ClipBertScore, ClipScorer

    bert = BertScorer("minilm", num_layers=6, batch_size=64, device="cpu")
    bert.score(summaries[:4], docs[:4])  # warm-up (lazy init)
    bert.cache.clear()
    out["bert_s_no_cache_pairs_s"] = _rate(lambda: bert.score(summaries, docs, cache_references=False), n)
    bert.cache.clear()
    out["bert_s_cold_cache_pairs_s"] = _rate(lambda: bert.score(summaries, docs), n)
    out["bert_s_warm_cache_pairs_s"] = _rate(lambda: bert.score(summaries, docs), n, repeat=2)

    clip = ClipScorer("mmsum-tiny-rn", str(ensure_tiny_clip()), device="cpu")
    feats = torch.randn(n, 5, clip.feature_dim)
    mask = torch.ones(n, 5, dtype=torch.bool)
    out["clip_s_pairs_s"] = _rate(lambda: clip.clip_s(feats, mask, summaries), n)
    cbs = ClipBertScore(clip, bert)
    bert.cache.clear()
    clip._text_cache.clear()
    out["clipbertscore_cold_pairs_s"] = _rate(lambda: cbs(feats, mask, summaries, docs), n)
    fresh = [s + " Again." for s in summaries]  # new summaries, documents already cached
    out["clipbertscore_warm_docs_pairs_s"] = _rate(lambda: cbs(feats, mask, fresh, docs), n)
    print(json.dumps({k: round(v, 1) for k, v in out.items()}, indent=2))
    return out


if __name__ == "__main__":
    main()
