"""The model card (`README.md`) of an exported CLIP-BART: metadata for the hub, text for people.

Everything here is read from the checkpoint's hyperparameters and, when the run dir is known,
its `config_resolved.yaml` (training recipe, CLIP) and `report.json` (evaluation results).
"""

from __future__ import annotations

import json
import math
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from huggingface_hub import EvalResult, ModelCard, ModelCardData

DATASET_NAMES = {
    "msmo": "MSMO (Zhu et al., 2018)",
    "mmss": "MMSS (Li et al., 2018)",
    "wikihow": "Multimodal WikiHow",
    "demo": "mmsum generated demo world",
}
METRIC_NAMES = {
    "rouge1": "ROUGE-1",
    "rouge2": "ROUGE-2",
    "rougeL": "ROUGE-L",
    "rougeLsum": "ROUGE-Lsum",
    "clipbertscore": "CLIPBERTScore",
    "clip_bert_score": "CLIPBERTScore",
    "clipscore": "CLIP-S",
    "clip_s": "CLIP-S",
    "bertscore": "BERT-S",
    "bert_s": "BERT-S",
    "image_precision": "IP (image precision)",
    "image_precision_all": "IP (all test examples)",
}
DECODING_KEYS = {
    "num_beams",
    "do_sample",
    "max_new_tokens",
    "max_length",
    "min_length",
    "no_repeat_ngram_size",
    "length_penalty",
    "early_stopping",
    "temperature",
    "top_k",
    "top_p",
    "repetition_penalty",
}
PLACEHOLDER_REPO = "path/to/this/folder-or-user/repo"


@dataclass
class ClipSettings:
    model_name: str
    pretrained: str | None  # open_clip tag, or the file name of a local checkpoint
    feature_dim: int
    pretrained_is_file: bool = False
    image_size: Any = None
    mean: Any = None
    std: Any = None


@dataclass
class ExportInfo:
    hparams: dict[str, Any]
    config: Any  # ClipBartConfig
    generation: dict[str, Any]
    report: dict[str, Any] | None
    run_config: dict[str, Any] | None
    clip: ClipSettings
    repo_id: str | None = None
    global_step: int | None = None
    checkpoint_name: str | None = None
    license: str | None = None
    datasets: list[str] | None = None


def read_run_config(path: Path) -> dict[str, Any] | None:
    """The run's resolved Hydra config as plain data (no custom YAML tags, so safe_load suffices)."""
    import yaml

    if not path.is_file():
        return None
    with open(path, encoding="utf-8") as f:
        data = yaml.safe_load(f)
    return data if isinstance(data, dict) else None


def _get(data: dict[str, Any] | None, dotted: str, default: Any = None) -> Any:
    for part in dotted.split("."):
        if not isinstance(data, dict) or part not in data:
            return default
        data = data[part]
    return data


def clip_settings(
    hparams: dict[str, Any],
    run_config: dict[str, Any] | None,
    model_name: str | None = None,
    pretrained: str | None = None,
) -> ClipSettings:
    """Which open_clip model + weights made the features (explicit arguments win over the run's record).

    A local checkpoint path from the run is reduced to its file name: the card is public and the
    path is only meaningful on the training machine.
    """
    recorded = hparams.get("clip_model") or ""
    rec_name, _, rec_tag = recorded.rpartition("/") if "/" in recorded else (recorded, "", None)
    name = model_name or _get(run_config, "clip.model_name") or rec_name or "unknown"
    is_file = False
    if pretrained is None:
        pretrained = _get(run_config, "clip.pretrained") or rec_tag
        if pretrained and (
            os.path.sep in str(pretrained) or str(pretrained).endswith((".pt", ".bin", ".safetensors"))
        ):
            pretrained, is_file = Path(pretrained).name, True
    else:
        is_file = os.path.sep in pretrained or Path(pretrained).is_file()
    settings = ClipSettings(name, pretrained, int(hparams["visual_feat_dim"]), is_file)
    try:  # best effort: the preprocessing numbers, when open_clip knows this model
        import open_clip

        from mmsum.models.tiny import register_open_clip_configs

        register_open_clip_configs()
        cfg = open_clip.get_model_config(name) or {}
        settings.image_size = (cfg.get("vision_cfg") or {}).get("image_size")
        pre = open_clip.get_pretrained_cfg(name, pretrained) if pretrained and not is_file else {}
        settings.mean = (pre or {}).get("mean") or list(open_clip.OPENAI_DATASET_MEAN)
        settings.std = (pre or {}).get("std") or list(open_clip.OPENAI_DATASET_STD)
    except Exception:  # pragma: no cover - card text degrades gracefully
        pass
    return settings


def dataset_key(info: ExportInfo) -> str | None:
    if info.datasets:
        return info.datasets[0]
    candidates = [
        str(_get(info.run_config, "data.data_dir", "")),
        str(_get(info.run_config, "task_name", "")),
    ]
    candidates += [str(t) for t in (_get(info.run_config, "tags") or [])]
    for text in candidates:
        for part in Path(text.lower()).parts + tuple(text.lower().split("_")):
            if part in DATASET_NAMES:
                return part
    return None


def _pretty_metric(key: str) -> str:
    return METRIC_NAMES.get(key) or key.replace("_", " ").replace("/", " ").strip().capitalize()


def evaluation_results(report: dict[str, Any] | None) -> tuple[str | None, dict[str, float]]:
    """(split, {metric: value}) from report.json: the test numbers, else the last validation ones."""
    if not report:
        return None, {}
    for section, split in (("test", "test"), ("final_val", "validation")):
        values = {}
        for key, value in (report.get(section) or {}).items():
            name = key.split("/", 1)[1] if "/" in key else key
            if "loss" in name or not isinstance(value, (int, float)) or not math.isfinite(float(value)):
                continue
            values[name] = float(value)
        if values:
            return split, values
    return None, {}


def training_recipe(info: ExportInfo) -> list[tuple[str, str]]:
    """(setting, value) rows: XE, image guidance, and SCST with its α, rewards and weights when used."""
    hp, cfg = info.hparams, info.run_config
    rows = [
        ("objective", "cross-entropy (XE) with label smoothing " + str(hp.get("label_smoothing", "?"))),
        ("image guidance", f"guidance-head cross-entropy, weight {hp.get('guidance_loss_weight', '?')}"),
        (
            "optimizer",
            f"AdamW, lr {hp.get('lr', '?')}, weight decay {hp.get('weight_decay', '?')}, "
            f"warmup {hp.get('warmup_steps', '?')} steps, linear decay",
        ),
    ]
    steps = _get(cfg, "trainer.max_steps")
    if steps is not None:
        rows.append(("optimizer steps", str(steps)))
    batch = _get(cfg, "global_batch_size") or _get(cfg, "data.batch_size")
    if batch is not None:
        rows.append(("batch size (global)", str(batch)))
    for key in ("max_source_len", "max_target_len", "max_images"):
        value = _get(cfg, f"data.{key}")
        if value is not None:
            rows.append((key.replace("_", " "), str(value)))
    guidance_method = _get(cfg, "guidance.method") or (
        "clip" if "clip_guidance" in str(_get(cfg, "data.data_dir", "")) else None
    )
    if guidance_method:
        rows.append(("guidance labels", guidance_method))
    # conf/scst/default.yaml: the `scst` node is read by SCSTCallback, which `callbacks=scst` adds.
    scst = _get(cfg, "scst")
    callbacks = _get(cfg, "callbacks")
    scst_on = isinstance(scst, dict) and (not isinstance(callbacks, dict) or "scst" in callbacks)
    if scst_on:
        alpha = next((scst[k] for k in ("rl_weight", "alpha") if k in scst), None)
        rows.append(("SCST", f"self-critical sequence training, L = α·L_RL + (1−α)·L_XE with α = {alpha}"))
        schedule = scst.get("schedule") or {}
        if schedule.get("kind"):
            rows.append(("SCST reward schedule", str(schedule["kind"])))
        for name, weight in _rewards(schedule.get("rewards") or scst.get("rewards")):
            rows.append((f"reward: {name}", f"weight {weight}"))
        for key in ("num_samples", "baseline", "start_step", "label_smoothing"):
            if key in scst:
                rows.append((f"SCST {key}", str(scst[key])))
    return rows


def _rewards(spec: Any) -> list[tuple[str, Any]]:
    """Reward names and weights from a reward config: one `_target_` dict, a list, or a {name: cfg} map."""
    if spec is None:
        return []
    if isinstance(spec, dict) and "_target_" in spec:
        return [(_reward_name(spec), spec.get("weight", 1.0))]
    items = spec.items() if isinstance(spec, dict) else enumerate(spec)
    out = []
    for key, value in items:
        if value is None:  # dropped from the schedule with `rewards.NAME=null`
            continue
        if isinstance(value, dict):
            spec = value.get("reward") if isinstance(value.get("reward"), dict) else value
            out.append((_reward_name(spec, str(key)), value.get("weight", 1.0)))
        else:  # {name: weight}
            out.append((str(key), value))
    return out


def _reward_name(spec: dict[str, Any], default: str = "reward") -> str:
    name = str(spec.get("name") or str(spec.get("_target_", default)).rsplit(".", 1)[-1])
    details = [f"{k}={spec[k]}" for k in ("key", "alpha", "clip_model", "bert_model") if k in spec]
    return f"{name} ({', '.join(details)})" if details else name


def usage_snippet(info: ExportInfo) -> str:
    """Python that loads the model, makes CLIP features for some images, and generates a summary."""
    clip, cfg = info.clip, info.config
    repo = info.repo_id or PLACEHOLDER_REPO
    max_source_len = _get(info.run_config, "data.max_source_len") or 512
    pretrained = json.dumps(clip.pretrained) if clip.pretrained else "None"
    file_note = "  # a local checkpoint file: point this at your copy" if clip.pretrained_is_file else ""
    return f"""import open_clip
import torch
from PIL import Image
from transformers import AutoModelForSeq2SeqLM, AutoTokenizer

repo = {json.dumps(repo)}
model = AutoModelForSeq2SeqLM.from_pretrained(repo, trust_remote_code=True).eval()
tokenizer = AutoTokenizer.from_pretrained(repo, trust_remote_code=True)  # config.json names remote code

# Image features must come from the CLIP that made the training features.
clip_model, _, preprocess = open_clip.create_model_and_transforms(
    {json.dumps(clip.model_name)}, pretrained={pretrained}{file_note}
)
clip_model.eval()

document = "Anna Smith arrived in Paris on Monday. The crowd saw a red circle near the station."
# The article's images in order, e.g. [Image.open(p).convert("RGB") for p in paths]; at most {cfg.max_images}.
images = [Image.new("RGB", (640, 480), (200, 40, 40)), Image.new("RGB", (640, 480), (40, 40, 200))]
with torch.no_grad():
    # Pooled CLIP image embeddings, not L2-normalised: [batch=1, n_images, {cfg.visual_feat_dim}].
    pixels = torch.stack([preprocess(image) for image in images[: {cfg.max_images}]])
    image_features = clip_model.encode_image(pixels).float().unsqueeze(0)

inputs = tokenizer(
    document, max_length={max_source_len}, truncation=True, return_token_type_ids=False, return_tensors="pt"
)
summary_ids = model.generate(**inputs, image_features=image_features)
print(tokenizer.decode(summary_ids[0], skip_special_tokens=True))
# Probability that each image is summary-worthy (the image-guidance head):
print(model.image_guidance(**inputs, image_features=image_features)[0, : len(images)].tolist())
"""


def _base_model_id(name: str) -> str | None:
    """A hub id for the card's `base_model` field; local paths are not ids (and are private)."""
    if not name or os.path.isabs(name) or name.startswith(".") or Path(name).exists() or name.count("/") != 1:
        return None
    return name


def _table(rows: list[tuple[str, str]], header: tuple[str, str]) -> str:
    lines = [f"| {header[0]} | {header[1]} |", "|---|---|"]
    lines += [f"| {a} | {b} |" for a, b in rows]
    return "\n".join(lines)


def build_model_card(info: ExportInfo) -> ModelCard:
    hp, cfg, clip = info.hparams, info.config, info.clip
    base = str(hp.get("bart_name_or_path", ""))
    base_id = _base_model_id(base)
    base_text = (
        f"[`{base_id}`](https://huggingface.co/{base_id})"
        if base_id
        else f"a local BART (`{Path(base).name}`)"
    )
    key = dataset_key(info)
    dataset_name = DATASET_NAMES.get(key or "", key or "an unspecified dataset")
    split, metrics = evaluation_results(info.report)
    model_name = (info.repo_id or "clip-bart").rsplit("/", 1)[-1]
    eval_results = [
        EvalResult(
            task_type="summarization",
            task_name="Multimodal abstractive summarization",
            dataset_type=key or "unknown",
            dataset_name=dataset_name,
            dataset_split=split,
            metric_type=name,
            metric_name=_pretty_metric(name),
            metric_value=round(value, 6),
        )
        for name, value in metrics.items()
    ]
    data = ModelCardData(
        language="en",
        license=info.license,
        library_name="transformers",
        base_model=base_id,
        datasets=info.datasets or ([key] if key else None),
        metrics=sorted({"rouge" if n.startswith("rouge") else n for n in metrics}) or None,
        model_name=model_name,
        eval_results=eval_results or None,
        pipeline_tag="summarization",
        tags=["mmsum", "clip-bart", "multimodal-summarization", "factuality", "custom_code"],
    )

    clip_rows = [
        ("open_clip model", f"`{clip.model_name}`"),
        (
            "pretrained",
            f"`{clip.pretrained}`" + (" (local checkpoint file)" if clip.pretrained_is_file else ""),
        ),
        (
            "feature",
            f"`model.encode_image(preprocess(image))`: pooled embedding, {clip.feature_dim}-d, "
            "float32, **not** L2-normalised",
        ),
        (
            "preprocessing",
            "the `preprocess` returned by `open_clip.create_model_and_transforms`: RGB, resize "
            f"shorter side + center crop to {clip.image_size or 'the model input size'}, normalise with mean "
            f"{clip.mean or 'CLIP mean'} / std {clip.std or 'CLIP std'}",
        ),
        (
            "images per document",
            f"at most {cfg.max_images}, in article order (`image_features` [B, n, "
            f"{cfg.visual_feat_dim}], optional `image_mask` [B, n])",
        ),
    ]
    if metrics:
        eval_text = f"On the {split} split of {dataset_name}" + (
            f" (checkpoint `{info.checkpoint_name}`, step {info.global_step}):\n\n"
            if info.global_step is not None
            else ":\n\n"
        )
        eval_text += _table(
            [(_pretty_metric(k), f"{v:.4f}") for k, v in metrics.items()], ("metric", "value")
        )
    else:
        eval_text = "No evaluation results were recorded for this checkpoint (no `report.json` with test or validation metrics)."
    generation = ", ".join(f"{k}={v}" for k, v in sorted(info.generation.items()) if k in DECODING_KEYS)

    body = f"""
# {model_name}

A CLIP-BART multimodal summarizer (Wan & Bansal, 2022) trained with mmsum: BART whose
encoder reads the document **and** CLIP embeddings of its images, plus an image-guidance head that scores
which images are summary-worthy. It was fine-tuned from {base_text} on {dataset_name}.

## Model details

- Architecture: BART ({cfg.encoder_layers}+{cfg.decoder_layers} layers, d_model {cfg.d_model}) with
  {cfg.max_images} image slots in front of the text; image features are projected from {cfg.visual_feat_dim}-d.
- Code: `clip_bart.py` in this repository (`trust_remote_code=True`); it needs only `torch` and `transformers`.
- Default decoding (`generation_config.json`): {generation or "BART defaults"}.

## CLIP feature extractor (needed at inference)

The model was trained on features from one specific CLIP; other CLIPs give vectors it has never seen
(a different size is an error, the same size silently gives bad summaries).

{_table(clip_rows, ("setting", "value"))}

## Usage

```python
{usage_snippet(info).rstrip()}
```

## Training

{_table(training_recipe(info), ("setting", "value"))}

## Evaluation

{eval_text}

## Intended use

Research on factual multimodal summarization of English news-style articles with images: generating
summaries, ranking an article's images by summary-worthiness, and comparing training objectives.
Summaries are machine-generated and must be checked before publication.

## Limitations

- English only: the tokenizer, training data and metrics are English.
- CLIP's biases: image features (and CLIP-S rewards/metrics) inherit the social and cultural biases of CLIP's
  web-scraped image-text training data, and CLIP can misread text in images or unusual photos.
- BERT's biases: BERTScore-based rewards and metrics inherit the biases of their BERT/RoBERTa encoder;
  a high CLIPBERTScore does not guarantee a factual summary.
- Abstractive models can still hallucinate entities or facts absent from the document and images.
- Only features from the CLIP above are valid inputs; at most {cfg.max_images} images per document.

## Provenance

Exported by `mmsum-export` from `{info.checkpoint_name}` (global step {info.global_step}).
"""
    return ModelCard(f"---\n{data.to_yaml()}\n---\n{body}")
