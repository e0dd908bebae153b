"""Score a benchmark with metrics, compare with humans, fit the CLIPBERTScore combiners.

`run(MetaEvalConfig(...))` does the whole flow of Wan & Bansal (2022) Tables 1-2: per-example
metric scores; on correlation benchmarks Pearson / Spearman / Kendall with bootstrap intervals
per label and a Williams test for every ordered pair of metrics; on ranking benchmarks ranking
accuracy; when the benchmark has a validation split and both `clip` and `bert` were scored, the
CLIPBERTScore alpha (grid search), a LogisticCombiner and an MLPCombiner are fitted on validation
and reported on test. Writes scores.csv, results.json, table.md and bar.png into `out`.
"""

from __future__ import annotations

import csv
import json
import math
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from mmsum.meta_eval.loaders import Benchmark, Pair, load_benchmark
from mmsum.meta_eval.stats import CORRELATIONS, bootstrap_ci, correlation, ranking_accuracy, williams_test

MetricFn = Callable[[Sequence[Pair]], np.ndarray]
KNOWN_METRICS = ("clip", "bert", "clipbert", "bary", "rouge", "faith", "refclip")


@dataclass
class MetaEvalConfig:
    benchmark: str
    path: str
    metrics: list[str] = field(default_factory=lambda: ["clip", "bert", "clipbert"])
    out: str = "runs/meta_eval"
    image_dir: str | None = None
    captions: str | None = None  # BISON: COCO captions file
    setting: str = "random"  # WikiHowFact: random / category / similarity
    num_refs: int = 0  # FOIL: 0, 1 or 4 references
    alpha: float = 0.25
    n_boot: int = 1000
    seed: int = 0
    device: str | None = None
    batch_size: int = 32
    clip: dict[str, Any] = field(default_factory=lambda: {"model": "RN50x64", "pretrained": "openai"})
    bert: dict[str, Any] = field(default_factory=lambda: {"model": "roberta-large-mnli", "num_layers": 10})
    bary: dict[str, Any] = field(default_factory=lambda: {"model": "bert-base-uncased", "last_layers": 5})
    faith: dict[str, Any] = field(default_factory=dict)
    plot: bool = True


# -- metrics ------------------------------------------------------------------------------------
def _text_ref(p: Pair) -> str | None:
    """What a text metric compares the summary with: the document, else the first reference."""
    return p.document if p.document else (p.references[0] if p.references else None)


class MetricSuite:
    """Builds each scorer once, on first use; every metric maps a list of Pairs to float64 [N]."""

    def __init__(self, cfg: MetaEvalConfig) -> None:
        self.cfg = cfg
        self._clip = self._bert = self._bary = self._faith = None
        self._image_cache: dict[str, Any] = {}

    # scorers
    def clip_scorer(self):
        if self._clip is None:
            from mmsum.scoring.clipscore import ClipScorer

            c = self.cfg.clip
            self._clip = ClipScorer(c.get("model", "RN50x64"), c.get("pretrained", "openai"), self.cfg.device)
        return self._clip

    def bert_scorer(self):
        if self._bert is None:
            from mmsum.scoring.bertscore import BertScorer

            b = self.cfg.bert
            self._bert = BertScorer(
                b.get("model", "roberta-large-mnli"), b.get("num_layers", 10), device=self.cfg.device
            )
        return self._bert

    def bary_scorer(self):
        if self._bary is None:
            from mmsum.scoring.baryscore import BaryScorer

            opts = {k: v for k, v in self.cfg.bary.items() if k != "model"}
            self._bary = BaryScorer(
                self.cfg.bary.get("model", "bert-base-uncased"), device=self.cfg.device, **opts
            )
        return self._bary

    def faith_scorer(self):
        if self._faith is None:
            from mmsum.scoring.faithscore import FaithScorer

            # Without its own `faith.clip`, FaithScore verifies with the harness's CLIP.
            self._faith = FaithScorer.from_config(self.cfg.faith, self.cfg.device, self.clip_scorer())
        return self._faith

    def image_features(self, pairs: Sequence[Pair]):
        """[N, M, D] CLIP image features and [N, M] mask, each distinct image encoded once."""
        import torch
        from PIL import Image

        scorer = self.clip_scorer()
        todo = [p for p in dict.fromkeys(i for pr in pairs for i in pr.images) if p not in self._image_cache]
        for start in range(0, len(todo), self.cfg.batch_size):
            chunk = todo[start : start + self.cfg.batch_size]
            ims = [Image.open(p).convert("RGB") for p in chunk]
            for p, f in zip(chunk, scorer.encode_images(ims).cpu()):
                self._image_cache[p] = f
        m = max([len(p.images) for p in pairs] + [1])
        feats = torch.zeros(len(pairs), m, scorer.feature_dim)
        mask = torch.zeros(len(pairs), m, dtype=torch.bool)
        for i, pr in enumerate(pairs):
            for j, im in enumerate(pr.images):
                feats[i, j], mask[i, j] = self._image_cache[im], True
        return feats, mask

    # metrics
    def score(self, name: str, pairs: Sequence[Pair]) -> np.ndarray:
        fn = getattr(self, f"m_{name}", None)
        if fn is None:
            raise ValueError(f"unknown metric {name!r}; expected one of {KNOWN_METRICS}")
        return np.asarray(fn(pairs), dtype=np.float64)

    def _text_metric(self, pairs: Sequence[Pair], fn: Callable[[list[str], list[str]], Any]) -> np.ndarray:
        out = np.full(len(pairs), np.nan)
        idx = [i for i, p in enumerate(pairs) if _text_ref(p) is not None]
        if idx:
            vals = fn([pairs[i].summary for i in idx], [_text_ref(pairs[i]) for i in idx])
            out[idx] = np.asarray(vals, dtype=np.float64)
        return out

    def m_bert(self, pairs: Sequence[Pair]) -> np.ndarray:
        return self._text_metric(pairs, lambda s, d: self.bert_scorer().score(s, d)[0].numpy())

    def m_bary(self, pairs: Sequence[Pair]) -> np.ndarray:
        return self._text_metric(pairs, lambda s, d: self.bary_scorer().similarity(s, d).numpy())

    def m_rouge(self, pairs: Sequence[Pair]) -> np.ndarray:
        from mmsum.scoring.rougescore import rouge

        return self._text_metric(pairs, lambda s, d: rouge(s, d, ["rougeL"])["rougeL"].numpy())

    def m_clip(self, pairs: Sequence[Pair]) -> np.ndarray:
        feats, mask = self.image_features(pairs)
        return self.clip_scorer().clip_s(feats, mask, [p.summary for p in pairs]).numpy()

    def m_refclip(self, pairs: Sequence[Pair]) -> np.ndarray:
        feats, mask = self.image_features(pairs)
        refs = [list(p.references) for p in pairs]
        if not any(refs):  # 0-reference setting: RefCLIP-S is CLIP-S
            return self.m_clip(pairs)
        return self.clip_scorer().ref_clip_s(feats, mask, [p.summary for p in pairs], refs).numpy()

    def m_clipbert(self, pairs: Sequence[Pair]) -> np.ndarray:
        clip, bert = self.m_clip(pairs), self.m_bert(pairs)
        a = self.cfg.alpha
        # No image: BERT-S alone (ClipBertScore's default); no text reference: CLIP-S alone.
        return np.where(np.isnan(clip), bert, np.where(np.isnan(bert), clip, a * clip + (1 - a) * bert))

    def m_faith(self, pairs: Sequence[Pair]) -> np.ndarray:
        res = self.faith_scorer().score([p.summary for p in pairs], [list(p.images) for p in pairs])
        return np.asarray([r.score for r in res], dtype=np.float64)


# -- evaluation ----------------------------------------------------------------------------------
def correlation_report(
    human: np.ndarray, scores: dict[str, np.ndarray], n_boot: int, seed: int
) -> dict[str, dict[str, Any]]:
    """{metric: {pearson, pearson_ci, spearman, ..., n}} against one human label."""
    out = {}
    for m, s in scores.items():
        row: dict[str, Any] = {"n": int(np.sum(np.isfinite(s) & np.isfinite(human)))}
        for kind in CORRELATIONS:
            row[kind] = correlation(s, human, kind)
            row[f"{kind}_ci"] = list(bootstrap_ci(s, human, kind, n_boot, seed=seed))
        out[m] = row
    return out


def williams_report(human: np.ndarray, scores: dict[str, np.ndarray]) -> list[dict[str, Any]]:
    """Williams test (Pearson) that metric A correlates better with humans than metric B."""
    rows = []
    names = list(scores)
    for a in names:
        for b in names:
            if a == b:
                continue
            ok = np.isfinite(human) & np.isfinite(scores[a]) & np.isfinite(scores[b])
            if ok.sum() <= 3:
                continue
            h, sa, sb = human[ok], scores[a][ok], scores[b][ok]
            r12, r13, r23 = correlation(sa, h), correlation(sb, h), correlation(sa, sb)
            if not all(map(math.isfinite, (r12, r13, r23))):
                continue
            t, p = williams_test(r12, r13, r23, int(ok.sum()))
            rows.append({"a": a, "b": b, "r_a": r12, "r_b": r13, "r_ab": r23, "t": t, "p": p})
    return rows


def fit_alpha(clip: np.ndarray, bert: np.ndarray, human: np.ndarray, grid: int = 21) -> float:
    """The alpha of alpha*CLIP-S + (1-alpha)*BERT-S with the best validation Pearson (ties: smallest)."""
    best, best_r = 0.0, -np.inf
    for a in np.linspace(0, 1, grid):
        r = correlation(a * clip + (1 - a) * bert, human)
        if math.isfinite(r) and r > best_r + 1e-12:
            best, best_r = float(a), r
    return best


def combiner_report(
    val: dict[str, np.ndarray], test: dict[str, np.ndarray], human_val: np.ndarray, human_test: np.ndarray
) -> tuple[dict[str, np.ndarray], dict[str, Any]]:
    """Fit alpha / logistic / MLP on validation (clip, bert) and return their test scores."""
    from mmsum.scoring.combiners import LogisticCombiner, MLPCombiner

    Xv = np.stack([val["clip"], val["bert"]], 1)
    Xt = np.stack([test["clip"], test["bert"]], 1)
    okv = np.all(np.isfinite(Xv), 1) & np.isfinite(human_val)
    okt = np.all(np.isfinite(Xt), 1)
    alpha = fit_alpha(Xv[okv, 0], Xv[okv, 1], human_val[okv])
    out = {"clipbert_fit_alpha": alpha * Xt[:, 0] + (1 - alpha) * Xt[:, 1]}
    info: dict[str, Any] = {"alpha": alpha}
    y = (human_val[okv] >= 0.5).astype(int)  # combiners are classifiers of "factual"
    for name, cls in (("logistic", LogisticCombiner), ("mlp", MLPCombiner)):
        pred = np.full(len(Xt), np.nan)
        if len(set(y.tolist())) == 2:
            model = cls().fit(Xv[okv], y)
            pred[okt] = model.predict(Xt[okt])
        else:
            info[f"{name}_skipped"] = "validation labels have one class"
        out[f"clipbert_{name}"] = pred
    return out, info


def run(cfg: MetaEvalConfig) -> dict[str, Any]:
    bench = load_benchmark(
        cfg.benchmark,
        cfg.path,
        image_dir=cfg.image_dir,
        captions=cfg.captions,
        setting=cfg.setting,
        num_refs=cfg.num_refs,
    )
    suite = MetricSuite(cfg)
    out = Path(cfg.out)
    out.mkdir(parents=True, exist_ok=True)
    if bench.kind == "correlation":
        results = _run_correlation(bench, suite, cfg, out)
    else:
        results = _run_ranking(bench, suite, cfg, out)
    results["config"] = asdict(cfg)
    (out / "results.json").write_text(json.dumps(results, indent=2, default=_json_default))
    (out / "table.md").write_text(format_table(results))
    if cfg.plot:
        bar_plot(results, out / "bar.png")
    return results


def _json_default(o: Any) -> Any:
    if isinstance(o, (np.floating, np.integer)):
        return o.item()
    raise TypeError(type(o).__name__)


def _run_correlation(bench: Benchmark, suite: MetricSuite, cfg: MetaEvalConfig, out: Path) -> dict[str, Any]:
    pairs = [it.pair for it in bench.items]
    scores = {m: suite.score(m, pairs) for m in cfg.metrics}
    splits = np.array([it.split for it in bench.items])
    has_val = "validation" in splits and "test" in splits
    eval_mask = splits == "test" if has_val else np.ones(len(pairs), bool)
    results: dict[str, Any] = {"benchmark": bench.name, "kind": "correlation", "n_items": len(pairs)}
    results["eval_split"] = "test" if has_val else "all"
    combined = dict(scores)
    per_label = {}
    for label in bench.labels:
        human = np.array([it.labels.get(label, np.nan) for it in bench.items])
        test_scores = {m: s[eval_mask] for m, s in scores.items()}
        if has_val and "clip" in scores and "bert" in scores:
            val_mask = splits == "validation"
            fitted, info = combiner_report(
                {k: scores[k][val_mask] for k in ("clip", "bert")},
                {k: scores[k][eval_mask] for k in ("clip", "bert")},
                human[val_mask],
                human[eval_mask],
            )
            test_scores.update(fitted)
            for k, v in fitted.items():
                full = np.full(len(pairs), np.nan)
                full[eval_mask] = v
                combined[f"{k}[{label}]"] = full
        else:
            info = {}
        per_label[label] = {
            "correlations": correlation_report(human[eval_mask], test_scores, cfg.n_boot, cfg.seed),
            "williams": williams_report(human[eval_mask], {m: test_scores[m] for m in scores}),
            "combiners": info,
        }
    results["labels"] = per_label
    with (out / "scores.csv").open("w", newline="", encoding="utf-8") as f:
        w = csv.writer(f)
        w.writerow(["id", "split", *bench.labels, *combined])
        for i, it in enumerate(bench.items):
            w.writerow(
                [
                    it.id,
                    it.split,
                    *(it.labels.get(k) for k in bench.labels),
                    *(combined[m][i] for m in combined),
                ]
            )
    return results


def _run_ranking(bench: Benchmark, suite: MetricSuite, cfg: MetaEvalConfig, out: Path) -> dict[str, Any]:
    flat = [(g, j, p) for g in bench.groups for j, p in enumerate(g.candidates)]
    pairs = [p for _, _, p in flat]
    results: dict[str, Any] = {"benchmark": bench.name, "kind": "ranking", "n_groups": len(bench.groups)}
    scores = {m: suite.score(m, pairs) for m in cfg.metrics}
    acc = {}
    for m, s in scores.items():
        grouped, k = [], 0
        for g in bench.groups:
            grouped.append(s[k : k + len(g.candidates)])
            k += len(g.candidates)
        acc[m] = {"accuracy": ranking_accuracy(grouped, [g.gold for g in bench.groups]), "n": len(grouped)}
    results["ranking"] = acc
    with (out / "scores.csv").open("w", newline="", encoding="utf-8") as f:
        w = csv.writer(f)
        w.writerow(["group_id", "candidate", "gold", "split", *scores])
        for i, (g, j, _) in enumerate(flat):
            w.writerow([g.id, j, int(j == g.gold), g.split, *(scores[m][i] for m in scores)])
    return results


# -- reporting -----------------------------------------------------------------------------------
def _fmt(x: Any) -> str:
    return "nan" if x is None or (isinstance(x, float) and math.isnan(x)) else f"{x:.3f}"


def format_table(results: dict[str, Any]) -> str:
    """A Markdown table: metric x (label: Pearson [CI], Spearman, Kendall) or ranking accuracy."""
    lines = [f"# {results['benchmark']}", ""]
    if results["kind"] == "ranking":
        lines += ["| metric | accuracy | n |", "|---|---|---|"]
        for m, r in results["ranking"].items():
            lines.append(f"| {m} | {_fmt(r['accuracy'])} | {r['n']} |")
        return "\n".join(lines) + "\n"
    for label, rep in results["labels"].items():
        lines += [
            f"## {label} ({results['eval_split']})",
            "",
            "| metric | Pearson [95% CI] | Spearman | Kendall | n |",
        ]
        lines.append("|---|---|---|---|---|")
        for m, r in rep["correlations"].items():
            lo, hi = r["pearson_ci"]
            lines.append(
                f"| {m} | {_fmt(r['pearson'])} [{_fmt(lo)}, {_fmt(hi)}] | {_fmt(r['spearman'])} | {_fmt(r['kendall'])} | {r['n']} |"
            )
        if rep["combiners"]:
            lines.append(f"\nfitted on validation: {json.dumps(rep['combiners'])}")
        lines.append("")
    return "\n".join(lines) + "\n"


def bar_plot(results: dict[str, Any], path: Path) -> Path:
    """Bar plot of Pearson per metric and label (correlation) or accuracy per metric (ranking)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(7, 3.5))
    if results["kind"] == "ranking":
        names = list(results["ranking"])
        ax.bar(names, [results["ranking"][m]["accuracy"] for m in names])
        ax.set_ylabel("ranking accuracy")
    else:
        labels = list(results["labels"])
        metrics = list(next(iter(results["labels"].values()))["correlations"]) if labels else []
        width = 0.8 / max(len(labels), 1)
        for k, label in enumerate(labels):
            vals = [
                results["labels"][label]["correlations"].get(m, {}).get("pearson", np.nan) for m in metrics
            ]
            ax.bar(np.arange(len(metrics)) + k * width, np.nan_to_num(vals), width, label=label)
        ax.set_xticks(
            np.arange(len(metrics)) + width * (len(labels) - 1) / 2, metrics, rotation=30, ha="right"
        )
        ax.set_ylabel("Pearson r")
        ax.legend(fontsize=7)
    ax.set_title(results["benchmark"])
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    plt.close(fig)
    return path
