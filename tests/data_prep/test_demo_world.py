"""The demo world: layout, determinism, the scene records, and the deliberate hallucinations."""

from __future__ import annotations

import filecmp
import json
from pathlib import Path

from data_prep.common import ParseStats
from data_prep.demo_world import FACTS_FILE, RELEVANT_FILE, generate_demo_world, load_facts
from data_prep.msmo import iter_msmo


def test_layout_and_byte_identical_reruns(tmp_path):
    a = generate_demo_world(tmp_path / "a", seed=3, n_train=20, n_valid=5, n_test=5)
    b = generate_demo_world(tmp_path / "b", seed=3, n_train=20, n_valid=5, n_test=5)
    files = sorted(p.relative_to(a) for p in a.rglob("*") if p.is_file())
    assert files == sorted(p.relative_to(b) for p in b.rglob("*") if p.is_file())
    assert all(filecmp.cmp(a / f, b / f, shallow=False) for f in files)
    assert len(list((a / "data1" / "article").glob("*.txt"))) == 20
    assert len(list((a / "test_data" / "article").glob("*.txt"))) == 5
    c = generate_demo_world(tmp_path / "c", seed=4, n_train=20, n_valid=5, n_test=5)
    assert sorted(p.name for p in (c / "data1" / "article").iterdir()) != sorted(
        p.name for p in (a / "data1" / "article").iterdir()
    )


def test_scene_records_match_the_parsed_articles(tmp_path):
    raw = generate_demo_world(tmp_path, n_train=60, n_valid=5, n_test=10)
    facts = load_facts(raw)
    assert len(facts) == 75 and (raw / FACTS_FILE).is_file()
    stats = ParseStats()
    examples = list(iter_msmo(raw, "train", stats)) + list(iter_msmo(raw, "test", stats))
    relevant = json.loads((raw / RELEVANT_FILE).read_text())
    n_words = []
    for ex in examples:
        f = facts[ex.id]
        assert ex.image_ids == [im["image_id"] for im in f["images"]] and 1 <= len(ex.image_ids) <= 4
        assert ex.captions == [im["caption"] for im in f["images"]]
        assert ex.extra["summary_sentences"] == [s["text"] for s in f["summary"]]
        assert 1 <= len(f["summary"]) <= 3  # 1-2 sentences, plus the hallucinated one in some
        n_words.append(len(ex.document.split()))
        if f["split"] == "test":
            assert ex.relevant_images == f["relevant_images"] == [str(k) for k in relevant[ex.id]]
        for im in f["images"]:
            assert im["objects"] and all({"color", "shape", "count"} <= set(o) for o in im["objects"])
            assert (
                Path(raw / "data1" / "img" / f"{ex.id}_{im['image_id']}.jpg").is_file()
                or f["split"] != "train"
            )
        fact_ids = {x["fact_id"] for x in f["facts"]}
        for s in f["summary"] + f["body"]:
            assert set(s["fact_ids"]) <= fact_ids
        hall = [e for s in f["summary"] for e in s["hallucinated_entities"]]
        assert bool(hall) == f["hallucinated"]
        for e in hall:
            assert e not in ex.document
        for e in {f["person"], f["city"]}:
            assert e in ex.document
    assert min(n_words) >= 40 and max(n_words) <= 160
    share = sum(f["hallucinated"] for f in facts.values()) / len(facts)
    assert 0.03 <= share <= 0.35
