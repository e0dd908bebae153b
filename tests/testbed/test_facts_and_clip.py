"""Known facts carried into the prepared split; the demo-trained CLIP loads through the user path."""

from __future__ import annotations

import json

import pytest
import torch

from data_prep.demo_world import generate_demo_world, load_facts, scene_record
from mmsum.data.prepared import load_prepared
from mmsum.scoring.exact_facts import exact_facts


def test_facts_round_trip_into_the_prepared_split(demo_data_root):
    raw = demo_data_root / "demo" / "raw"
    facts = load_facts(raw)
    n_pictured = n_unpictured = 0
    for split in ("train", "validation", "test"):
        for rec in load_prepared(demo_data_root / "demo" / "prepared" / split):
            assert rec["scene"] == json.loads(json.dumps(scene_record(facts[rec["id"]])))
            scene = rec["scene"]
            assert [im["image_id"] for im in scene["images"]] == rec["image_ids"]
            kinds = [f["kind"] for f in scene["facts"]]
            n_pictured += sum(k in ("object", "photo") for k in kinds)
            n_unpictured += kinds.count("unpictured")
            # References state pictured facts only: exactly faithful to the images, by construction.
            r = exact_facts(rec["summary"], scene, rec["image_ids"])
            assert r.mentions and not r.image_hallucinated and r.document_precision == 1.0
            # ...while the document also states objects no image shows.
            unpictured = [f for f in scene["facts"] if f["kind"] == "unpictured"]
            assert unpictured and all(f["image_id"] is None for f in unpictured)
            doc = exact_facts(rec["document"], scene, rec["image_ids"])
            assert doc.image_hallucinated and doc.document_precision == 1.0
    assert n_pictured > n_unpictured > 0


def test_unpictured_objects_are_absent_from_every_image_and_the_key_fact_is_pictured(tmp_path):
    raw = generate_demo_world(tmp_path, n_train=6, n_valid=0, n_test=0)
    for scene in load_facts(raw).values():
        pictured = [f for f in scene["facts"] if f["image_id"] is not None]
        shown = {(o["color"], o["shape"]) for im in scene["images"] for o in im["objects"]}
        for f in scene["facts"]:
            if f["kind"] == "unpictured":
                assert (f["obj"]["color"], f["obj"]["shape"]) not in shown
        # (a reference whose person was swapped for an absent one loses its key fact id on purpose)
        assert pictured[0]["fact_id"] in scene["summary"][0]["fact_ids"] or scene["hallucinated"]


@pytest.mark.slow
def test_demo_clip_checkpoint_loads_through_the_user_path(model_cache, tmp_path):
    from data_prep.demo_clip import main
    from mmsum.scoring.clipscore import ClipScorer
    from mmsum.scoring.encoders import load_clip

    out = tmp_path / "demo_clip.pt"
    report = main([f"out={out}", "steps=3", "pool_size=32", "batch_size=8", "n_foil=9"])
    assert out.is_file() and report.steps == 3 and 0.0 <= report.foil_accuracy <= 1.0
    assert json.loads(out.with_name(out.name + ".report.json").read_text())["n_foil"] == 9
    clip = load_clip("mmsum-tiny-rn", str(out))  # what `clip=demo_trained` / prep / rewards call
    assert clip.name == "mmsum-tiny-rn/demo_clip.pt"
    saved = torch.load(out, map_location="cpu")
    assert torch.equal(clip.model.state_dict()["logit_scale"], saved["logit_scale"])
    scorer = ClipScorer("mmsum-tiny-rn", str(out), device="cpu")
    s = scorer.clip_s(torch.randn(1, 2, scorer.feature_dim), None, ["two red circles ."])
    assert s.shape == (1,) and torch.isfinite(s).all()
