"""Export → HF folder → load with AutoModelForSeq2SeqLM in an interpreter that has no mmsum."""

from __future__ import annotations

import json
import re

import pytest
import torch
from safetensors import safe_open
from safetensors.torch import save_file

from mmsum.hub.card import PLACEHOLDER_REPO
from mmsum.training.module import ClipBartModule
from tests.hub.conftest import FEATURE_DIM, MAX_IMAGES, OPEN_CLIP_CONFIGS, run_without_mmsum

EXPECTED_FILES = {
    "README.md",
    "clip_bart.py",
    "config.json",
    "generation_config.json",
    "model.safetensors",
    "tokenizer.json",
    "tokenizer_config.json",
}


def test_folder_holds_safetensors_remote_code_tokenizer_and_card(exported):
    names = {p.name for p in exported.iterdir()}
    assert EXPECTED_FILES <= names
    assert not [n for n in names if n.endswith((".bin", ".pt", ".pth", ".ckpt", ".pkl"))]
    config = json.loads((exported / "config.json").read_text())
    assert config["auto_map"] == {
        "AutoConfig": "clip_bart.ClipBartConfig",
        "AutoModelForSeq2SeqLM": "clip_bart.ClipBartForConditionalGeneration",
    }
    assert config["model_type"] == "clip_bart"
    assert (config["visual_feat_dim"], config["max_images"]) == (FEATURE_DIM, MAX_IMAGES)
    assert config["clip_model"] == "mmsum-tiny-rn/open_clip_model.pt"
    assert config["tie_word_embeddings"] is True
    generation = json.loads((exported / "generation_config.json").read_text())
    assert generation["num_beams"] == 1 and generation["max_new_tokens"] == 8
    # Tied embeddings are stored once (declared tied, restored on load), never duplicated.
    with safe_open(exported / "model.safetensors", "pt") as f:
        keys = set(f.keys())
    assert "model.shared.weight" in keys
    assert not keys & {
        "lm_head.weight",
        "model.encoder.embed_tokens.weight",
        "model.decoder.embed_tokens.weight",
    }
    assert {"image_projection.weight", "image_slot_embedding.weight", "guidance_head.0.weight"} <= keys


def test_card_has_clip_recipe_and_results_metadata(exported):
    from huggingface_hub import ModelCard

    card = ModelCard.load(exported / "README.md")
    data = card.data.to_dict()
    assert data["language"] == "en" and data["license"] == "mit" and data["library_name"] == "transformers"
    assert data["datasets"] == ["demo"]
    results = {r.metric_type: r.metric_value for r in card.data.eval_results}
    assert results == {
        "rouge1": 0.4123,
        "rouge2": 0.2011,
        "rougeL": 0.3856,
        "clipbertscore": 0.8123,
        "entity_precision": 0.7,
        "image_precision": 0.55,
    }
    assert {r.dataset_split for r in card.data.eval_results} == {"test"}
    text = card.text
    assert "`mmsum-tiny-rn`" in text and "not** L2-normalised" in text
    assert "(1−α)·L_XE with α = 0.998" in text and "| SCST reward schedule | alternate |" in text
    assert "ClipBertScoreReward (alpha=0.25) | weight 2.0" in text
    assert "RougeReward (key=rouge2) | weight 1.0" in text
    assert "English only" in text and "CLIP's biases" in text and "BERT's biases" in text
    assert "## Intended use" in text


def _reference_inputs(tokenizer):
    torch.manual_seed(123)
    docs = [
        "anna smith arrived in paris on monday .",
        "ben jones saw a blue square in rome near the station .",
    ]
    source = tokenizer(docs, padding=True, return_tensors="pt")
    labels = tokenizer(["anna saw a red circle .", "ben saw a square ."], padding=True, return_tensors="pt")
    return {
        "input_ids": source["input_ids"],
        "attention_mask": source["attention_mask"],
        "image_features": torch.randn(2, 2, FEATURE_DIM),
        "image_mask": torch.tensor([[True, False], [True, True]]),
        "decoder_input_ids": labels["input_ids"],
    }


@pytest.fixture(scope="module")
def isolated_run(exported, trained_run, tmp_path_factory):
    """One fresh interpreter without mmsum (imports are the slow part) does both jobs:

    loads the export with AutoModelForSeq2SeqLM and saves its logits + greedy generation for fixed
    inputs, then executes the card's usage snippet verbatim (repo placeholder → the export dir).
    Returns (the reference module's outputs, the subprocess result, its work dir).
    """
    from transformers import AutoTokenizer

    work = tmp_path_factory.mktemp("isolated")
    best = next((trained_run / "checkpoints").glob("best*.ckpt"))
    module = ClipBartModule.load_from_checkpoint(best, map_location="cpu", weights_only=True).eval()
    inputs = _reference_inputs(AutoTokenizer.from_pretrained(exported))
    with torch.no_grad():
        reference = {
            "logits": module.model(**inputs).logits,
            "generated": module.model.generate(
                **{k: v for k, v in inputs.items() if k != "decoder_input_ids"},
                num_beams=1,
                do_sample=False,
                max_new_tokens=10,
            ),
        }
    save_file({k: v.contiguous() for k, v in inputs.items()}, work / "inputs.safetensors")

    snippets = re.findall(r"```python\n(.*?)```", (exported / "README.md").read_text(), flags=re.S)
    assert len(snippets) == 1 and snippets[0].count(json.dumps(PLACEHOLDER_REPO)) == 1
    snippet = snippets[0].replace(json.dumps(PLACEHOLDER_REPO), json.dumps(str(exported)))
    (work / "snippet.py").write_text(snippet)

    script = f"""
import torch
from safetensors.torch import load_file, save_file
from transformers import AutoModelForSeq2SeqLM
model = AutoModelForSeq2SeqLM.from_pretrained({str(exported)!r}, trust_remote_code=True).eval()
assert type(model).__module__.startswith("transformers_modules"), type(model).__module__
assert model.lm_head.weight.data_ptr() == model.model.shared.weight.data_ptr()
inputs = load_file("inputs.safetensors")
with torch.no_grad():
    logits = model(**inputs).logits
    gen = model.generate(**{{k: v for k, v in inputs.items() if k != "decoder_input_ids"}},
                         num_beams=1, do_sample=False, max_new_tokens=10)
save_file({{"logits": logits.contiguous(), "generated": gen.contiguous()}}, "outputs.safetensors")
print("round trip ok", type(model).__name__)

# The tiny CLIP is a custom open_clip config; a user of RN50x64/openai needs no such line.
import open_clip
open_clip.add_model_config({str(OPEN_CLIP_CONFIGS)!r})
print("--- snippet ---")
exec(compile(open("snippet.py").read(), "snippet.py", "exec"), {{"__name__": "__main__"}})
"""
    return reference, run_without_mmsum(script, work), work


def test_round_trip_without_mmsum_gives_identical_logits_and_greedy_generation(isolated_run):
    from safetensors.torch import load_file

    reference, result, work = isolated_run
    assert "round trip ok ClipBartForConditionalGeneration" in result.stdout, result.stderr[-3000:]
    outputs = load_file(work / "outputs.safetensors")
    assert torch.equal(outputs["logits"], reference["logits"])
    assert torch.equal(outputs["generated"], reference["generated"])
    assert reference["generated"].shape[1] > 2  # it really decoded something


def test_card_usage_snippet_runs_without_mmsum(isolated_run):
    _, result, _ = isolated_run
    assert result.returncode == 0, result.stderr[-3000:]
    lines = result.stdout.split("--- snippet ---", 1)[1].strip().splitlines()
    probabilities = json.loads(lines[-1])
    assert len(probabilities) == 2 and all(0.0 <= p <= 1.0 for p in probabilities)


@pytest.mark.parametrize("which", ["best", "last"])
def test_run_dir_picks_best_or_last(trained_run, which):
    from mmsum.hub import resolve_checkpoint

    path = resolve_checkpoint(trained_run, which)
    assert path.name.startswith("best-step") if which == "best" else path.name == "last.ckpt"
