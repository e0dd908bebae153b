"""One SCST step at paper scale on CPU: random-weight models of the real sizes, to show it fits.

BART-base (6+6 layers, d=768), the RN50x64 CLIP text tower (12 layers, width 1024, 77 tokens) and a
RoBERTa-large-sized encoder (24 layers, d=1024, truncated to BERT-S's 10 layers) with batch 2 and
MSMO lengths (512 source tokens, 128 summary tokens). No hub downloads here, so the tokenizers
are MiniLM's WordPiece (vocabulary 30,522 instead of BART's 50,265 — the only size difference),
and the RoBERTa-large stand-in is a BERT model of RoBERTa-large's dimensions.

    python scripts/bench/paper_scale.py            # or run_all.py --paper-scale
"""

from __future__ import annotations

import json
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

if __package__ in (None, ""):
    sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

import torch  # noqa: E402

from scripts.bench.common import Result, load_average, offline_env, peak_rss  # noqa: E402

RN50X64_TEXT_ONLY = {
    "embed_dim": 1024,
    # A token vision tower: image features are precomputed, only the text tower runs in SCST.
    "vision_cfg": {"image_size": 64, "layers": [1, 1, 1, 1], "width": 16, "patch_size": None},
    "text_cfg": {"context_length": 77, "vocab_size": 49408, "width": 1024, "heads": 16, "layers": 12},
}


def build_paper_models(root: Path) -> tuple[Any, Any, Any]:
    """(ClipBartModule with BART-base sizes, ClipScorer with the RN50x64 text tower, BertScorer)."""
    import open_clip
    from transformers import AutoTokenizer, BartConfig, BartForConditionalGeneration, BertConfig, BertModel

    from mmsum.models.tiny import minilm_dir
    from mmsum.scoring import BertScorer, ClipScorer
    from mmsum.scoring.encoders import LoadedClip, load_text_encoder
    from mmsum.training.module import ClipBartModule

    tok = AutoTokenizer.from_pretrained(minilm_dir())
    bart_dir = root / "bart-base-random"
    cfg = BartConfig(
        vocab_size=len(tok), d_model=768, encoder_layers=6, decoder_layers=6, encoder_attention_heads=12,
        decoder_attention_heads=12, encoder_ffn_dim=3072, decoder_ffn_dim=3072, max_position_embeddings=1024,
        pad_token_id=tok.pad_token_id, bos_token_id=tok.cls_token_id, eos_token_id=tok.sep_token_id,
        decoder_start_token_id=tok.cls_token_id, forced_eos_token_id=tok.sep_token_id,
    )  # fmt: skip
    torch.manual_seed(0)
    BartForConditionalGeneration(cfg).save_pretrained(bart_dir)
    tok.save_pretrained(bart_dir)
    module = ClipBartModule(str(bart_dir), visual_feat_dim=1024, max_images=10)
    module.tokenizer = tok

    cfg_dir = root / "open_clip"
    cfg_dir.mkdir()
    (cfg_dir / "mmsum-rn50x64-text.json").write_text(json.dumps(RN50X64_TEXT_ONLY))
    open_clip.add_model_config(cfg_dir)
    model = open_clip.create_model("mmsum-rn50x64-text", pretrained=None).eval()
    clip = ClipScorer(
        LoadedClip(model, None, open_clip.get_tokenizer("RN50x64"), "RN50x64/random"), device="cpu"
    )

    bert_dir = root / "roberta-large-size"
    bcfg = BertConfig(
        vocab_size=len(tok), hidden_size=1024, num_hidden_layers=24, num_attention_heads=16,
        intermediate_size=4096, max_position_embeddings=514,
    )  # fmt: skip
    BertModel(bcfg).save_pretrained(bert_dir)
    tok.save_pretrained(bert_dir)
    bert = BertScorer(load_text_encoder(str(bert_dir), 10, "cpu"), num_layers=10, device="cpu")
    return module, clip, bert


def run() -> Result:
    from mmsum.rewards import ClipBertScoreReward, RougeReward
    from mmsum.rewards.schedule import RewardSchedule, WeightedReward
    from mmsum.scoring import ClipBertScore
    from mmsum.training.scst import ScstSettings, scst_step
    from scripts.bench.bench_scst import build_batch

    mem: dict[str, float] = {}
    with tempfile.TemporaryDirectory() as tmp:
        module, clip, bert = build_paper_models(Path(tmp))
    module.train()
    batch = build_batch(module.tokenizer, 2, 512, tgt_len=128)
    batch["image_features"] = torch.randn(2, 10, 1024)
    batch["image_mask"] = torch.arange(10)[None] < torch.tensor([[4], [7]])
    batch["guidance_labels"] = torch.zeros(2, 10, dtype=torch.long)
    schedule = RewardSchedule(
        {
            "clipbertscore": WeightedReward(ClipBertScoreReward(scorer=ClipBertScore(clip, bert)), 2.0),
            "rouge2": WeightedReward(RougeReward("rouge2"), 1.0),
        }
    )
    settings = ScstSettings(num_samples=1, baseline="greedy", max_new_tokens=128)
    timings: dict[str, float] = {}
    with peak_rss(mem, "peak_rss_mib"):
        start = time.perf_counter()
        out = scst_step(module, batch, schedule, 0, settings, timings=timings)
        t = time.perf_counter()
        out.loss.backward()
        timings["backward"] = time.perf_counter() - t
        total = time.perf_counter() - start
    params = {
        "bart_params_m": round(sum(p.numel() for p in module.parameters()) / 1e6, 1),
        "clip_text_params_m": round(sum(p.numel() for n, p in clip.clip.model.named_parameters() if "visual" not in n) / 1e6, 1),
        "bert_params_m": round(sum(p.numel() for p in bert.encoder.model.parameters()) / 1e6, 1),
    }  # fmt: skip
    return Result(
        "paper_scale_scst_step_cpu", round(total, 2), None, "s/step", None, "fits in memory; time reported", True,
        extra={
            "breakdown_s": {k: round(v, 2) for k, v in timings.items()},
            "sample_len": out.metrics.get("train/sample_len"),
            "load_average": load_average(),
            "threads": torch.get_num_threads(),
            "setup": "batch 2, source 512, max 128 new tokens, K=1 + greedy, CLIPBERTScore step",
            **params,
            **mem,
        },
    )  # fmt: skip


if __name__ == "__main__":
    offline_env()
    torch.set_num_threads(int(sys.argv[1]) if len(sys.argv) > 1 else 1)
    print(json.dumps(run().to_dict(), indent=2))
