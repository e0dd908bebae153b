"""Meta-evaluation: loaders on small generated files in each format, stats, the CLI end to end."""

from __future__ import annotations

import csv
import json
import math

import numpy as np
import pytest

from mmsum.meta_eval.loaders import load_bison, load_foil, load_frank, load_mufame, load_wikihowfact
from mmsum.meta_eval.stats import bootstrap_ci, correlation, majority, ranking_accuracy, williams_test

DOCS = [
    "a red circle was seen near the station on monday .",
    "the mayor of paris opened a new bridge over the river .",
    "a blue square appeared in the sky above london .",
    "scientists found water on the surface of the moon .",
]


@pytest.fixture(scope="module")
def images(tmp_path_factory):
    from PIL import Image

    d = tmp_path_factory.mktemp("imgs")
    rng = np.random.default_rng(0)
    for i in range(4):
        Image.fromarray(rng.integers(0, 255, (32, 32, 3), dtype=np.uint8)).save(d / f"im{i}.png")
    return d


def write_mufame(path, n_docs=4, splits=("validation", "test")):
    rng = np.random.default_rng(1)
    cols = [
        "doc_id",
        "model",
        "document",
        "summary",
        "image",
        "doc_factuality",
        "img_factuality",
        "comb_factuality",
        "wid",
    ]
    for split in splits:
        with (path / f"{'val' if split == 'validation' else split}.csv").open("w", newline="") as f:
            w = csv.writer(f)
            w.writerow(cols)
            for d in range(n_docs):
                for model in ("bart", "clipbart", "t5"):
                    good = (d + len(model)) % 2
                    summary = DOCS[d] if good else DOCS[(d + 1) % 4]
                    for wid in ("w1", "w2", "w3"):
                        flip = rng.random() < 0.2 and wid == "w3"  # one worker sometimes disagrees
                        lab = str(int(good != flip))
                        w.writerow(
                            [
                                f"{split}{d}",
                                model,
                                DOCS[d],
                                summary,
                                f"im{d}.png",
                                lab,
                                lab,
                                "yes" if lab == "1" else "no",
                                wid,
                            ]
                        )


def test_mufame_majority_and_splits(tmp_path, images):
    write_mufame(tmp_path)
    b = load_mufame(tmp_path, image_dir=images)
    assert b.kind == "correlation" and len(b.items) == 2 * 4 * 3
    assert set(b.splits()) == {"validation", "test"}
    it = b.items[0]
    assert set(it.labels) == {"doc_factuality", "img_factuality", "comb_factuality"}
    assert it.pair.images[0].endswith("im0.png") and len(it.meta["workers"]) == 3
    good = [(x.meta["doc_id"], x.meta["model"], x.labels["comb_factuality"]) for x in b.items]
    assert all(lab == ((int(d[-1]) + len(m)) % 2) for d, m, lab in good)  # majority beats the 1 flip


def test_frank_with_benchmark_data(tmp_path):
    ann = [
        {"hash": "h1", "model_name": "m1", "Factuality": 1.0, "split": "valid"},
        {"hash": "h2", "model_name": "m1", "Factuality": 0.25},
    ]
    data = [
        {"hash": h, "model_name": "m1", "article": DOCS[i], "summary": DOCS[i][:20], "reference": "ref"}
        for i, h in enumerate(["h1", "h2"])
    ]
    (tmp_path / "human_annotations.json").write_text(json.dumps(ann))
    (tmp_path / "benchmark_data.json").write_text(json.dumps(data))
    b = load_frank(tmp_path)
    assert [it.labels["Factuality"] for it in b.items] == [1.0, 0.25]
    assert b.items[0].split == "validation" and b.items[1].split == "test"
    assert b.items[1].pair.document == DOCS[1] and b.items[0].pair.references == ("ref",)


def write_wikihowfact(path):
    rows = [
        {
            "id": f"g{g}",
            "document": DOCS[g],
            "image": f"im{g}.png",
            "candidates": [DOCS[(g + k) % 4] for k in range(4)],
            "label": 0,
        }
        for g in range(3)
    ]
    flat = [
        {
            "group_id": "f0",
            "document": DOCS[3],
            "image": "im3.png",
            "candidate": DOCS[k],
            "label": int(k == 3),
        }
        for k in range(4)
    ]
    (path / "similarity.jsonl").write_text("\n".join(json.dumps(r) for r in rows + flat) + "\n")


def test_wikihowfact_both_line_shapes(tmp_path, images):
    write_wikihowfact(tmp_path)
    b = load_wikihowfact(tmp_path, setting="similarity", image_dir=images)
    assert len(b.groups) == 4 and all(len(g.candidates) == 4 for g in b.groups)
    assert [g.gold for g in b.groups] == [0, 0, 0, 3]
    with pytest.raises(ValueError):
        load_wikihowfact(tmp_path, setting="nope")


def write_foil(path):
    anns = []
    for img in (1, 2):
        for k in range(5):
            anns.append(
                {
                    "id": img * 10 + k,
                    "foil_id": -1,
                    "image_id": img,
                    "caption": f"a dog number {k} on grass",
                    "target_word": "",
                    "foil_word": "",
                    "foil": False,
                }
            )
        anns.append(
            {
                "id": img * 10,
                "foil_id": 100 + img,
                "image_id": img,
                "caption": "a cat number 0 on grass",
                "target_word": "dog",
                "foil_word": "cat",
                "foil": True,
            }
        )
    data = {
        "images": [{"id": 1, "file_name": "im1.png"}, {"id": 2, "file_name": "im2.png"}],
        "annotations": anns,
    }
    (path / "foil.json").write_text(json.dumps(data))
    return path / "foil.json"


@pytest.mark.parametrize("num_refs", [0, 1, 4])
def test_foil_pairs_and_references(tmp_path, images, num_refs):
    b = load_foil(write_foil(tmp_path), image_dir=images, num_refs=num_refs)
    assert len(b.groups) == 2
    g = b.groups[0]
    assert (
        g.gold == 0
        and g.candidates[0].summary.startswith("a dog")
        and g.candidates[1].summary.startswith("a cat")
    )
    assert len(g.candidates[0].references) == num_refs
    assert g.candidates[0].summary not in g.candidates[0].references  # never the paired caption
    assert g.candidates[0].images[0].endswith("im1.png")


def write_bison(path):
    data = [
        {
            "bison_id": i,
            "caption_id": 500 + i,
            "true_image_id": i,
            "image_candidates": [
                {"image_id": i, "image_filename": f"im{i}.png"},
                {"image_id": i + 1, "image_filename": f"im{i + 1}.png"},
            ],
        }
        for i in range(3)
    ]
    (path / "bison.json").write_text(json.dumps({"data": data}))
    (path / "captions.json").write_text(
        json.dumps(
            {"annotations": [{"id": 500 + i, "image_id": i, "caption": f"photo {i}"} for i in range(3)]}
        )
    )
    return path / "bison.json", path / "captions.json"


def test_bison(tmp_path, images):
    ann, caps = write_bison(tmp_path)
    b = load_bison(ann, caps, image_dir=images)
    assert len(b.groups) == 3 and b.groups[1].candidates[0].summary == "photo 1"
    assert [g.gold for g in b.groups] == [0, 0, 0] and b.groups[2].candidates[1].images[0].endswith("im3.png")


# -- stats --------------------------------------------------------------------------------------
def test_correlations_reference_vectors():
    x, y = [1, 2, 3, 4, 5], [2, 1, 4, 3, 5]
    assert correlation(x, y, "pearson") == pytest.approx(0.8)
    assert correlation(x, y, "spearman") == pytest.approx(0.8)
    assert correlation(x, y, "kendall") == pytest.approx(0.6)  # 8 concordant, 2 discordant of 10
    assert math.isnan(correlation([1, 1, 1], [1, 2, 3]))
    assert correlation([1, 2, float("nan"), 3], [1, 2, 9, 3]) == pytest.approx(1.0)  # NaN pairs dropped
    lo, hi = bootstrap_ci(
        np.arange(50), np.arange(50) + np.random.default_rng(0).normal(0, 5, 50), n_boot=200
    )
    assert lo < correlation(np.arange(50), np.arange(50)) and lo < hi <= 1


def test_williams_reference_values():
    assert williams_test(0.5, 0.5, 0.3, 50) == pytest.approx((0.0, 0.5))
    # Hand-computed: K = 1-.36-.16-.25+2*.6*.4*.5 = .47; denom = 2*.47*99/97 + (.25)*(.125) = .99061...
    t, p = williams_test(0.6, 0.4, 0.5, 100)
    assert t == pytest.approx(0.2 * math.sqrt(99 * 1.5) / math.sqrt(2 * 0.47 * 99 / 97 + 0.25 * 0.125))
    assert 0 < p < 0.05 and williams_test(0.4, 0.6, 0.5, 100)[1] > 0.95


def test_ranking_accuracy_and_majority():
    assert ranking_accuracy([[3, 1], [1, 3], [2, 2], [float("nan"), 0]], [0, 0, 0, 0]) == pytest.approx(
        (1 + 0 + 0.5 + 0) / 4
    )
    assert majority([1, 1, 0]) == 1 and majority([0, 1]) == 0.5


# -- end to end -------------------------------------------------------------------------------------
OFFLINE = [
    "clip.model=mmsum-tiny-rn",
    "bert.model=minilm",
    "bert.num_layers=6",
    "bary.model=minilm",
    "n_boot=50",
]


@pytest.mark.slow
def test_cli_mufame_end_to_end(tmp_path, images, tiny_clip_path):
    from mmsum.cli.meta_eval import main

    write_mufame(tmp_path)
    out = tmp_path / "out"
    res = main(
        [
            "benchmark=mufame",
            f"path={tmp_path}",
            f"image_dir={images}",
            "metrics=[clip,bert,clipbert,bary,faith]",
            f"out={out}",
            f"clip.pretrained={tiny_clip_path}",
            *OFFLINE,
        ]
    )
    assert {p.name for p in out.iterdir()} >= {"scores.csv", "results.json", "table.md", "bar.png"}
    rep = res["labels"]["comb_factuality"]
    assert set(rep["correlations"]) >= {
        "clip",
        "bert",
        "clipbert",
        "bary",
        "clipbert_fit_alpha",
        "clipbert_logistic",
        "clipbert_mlp",
    }
    # The good summaries *are* their documents, so BERT-S must correlate strongly.
    assert rep["correlations"]["bert"]["pearson"] > 0.5 and rep["correlations"]["bert"]["n"] == 12
    assert 0 <= rep["combiners"]["alpha"] <= 1 and rep["williams"]
    rows = list(csv.DictReader((out / "scores.csv").open()))
    assert len(rows) == 24 and "bary" in rows[0]


@pytest.mark.slow
@pytest.mark.parametrize("bench", ["wikihowfact", "foil", "bison"])
def test_cli_ranking_end_to_end(tmp_path, images, tiny_clip_path, bench):
    from mmsum.cli.meta_eval import main

    args = {
        "wikihowfact": ["setting=similarity", f"path={tmp_path}"],
        "foil": ["num_refs=1", f"path={tmp_path / 'foil.json'}"],
        "bison": [f"path={tmp_path / 'bison.json'}", f"captions={tmp_path / 'captions.json'}"],
    }[bench]
    {"wikihowfact": write_wikihowfact, "foil": write_foil, "bison": write_bison}[bench](tmp_path)
    metrics = "metrics=[clip,bert]" if bench == "wikihowfact" else "metrics=[clip,refclip]"
    res = main(
        [
            f"benchmark={bench}",
            *args,
            f"image_dir={images}",
            metrics,
            f"out={tmp_path / 'out'}",
            f"clip.pretrained={tiny_clip_path}",
            *OFFLINE,
        ]
    )
    for r in res["ranking"].values():
        assert 0 <= r["accuracy"] <= 1
    if bench == "wikihowfact":  # the gold candidate is the document itself
        assert res["ranking"]["bert"]["accuracy"] == 1.0


def test_cli_rejects_missing_and_unknown(tmp_path):
    from mmsum.cli.meta_eval import parse_config

    with pytest.raises(SystemExit):
        parse_config(["benchmark=mufame"])
    from omegaconf.errors import ConfigKeyError

    with pytest.raises(ConfigKeyError):
        parse_config(["benchmark=mufame", "path=x", "nonsense=1"])
    cfg = parse_config(["benchmark=foil", "path=x", "metrics=[clip,bert]", "clip.model=tiny"])
    assert cfg.metrics == ["clip", "bert"] and cfg.clip["model"] == "tiny"
