"""Lightning checkpoint → self-contained Hugging Face folder (safetensors, remote code, tokenizer, card).

The folder needs neither mmsum nor Lightning: `AutoModelForSeq2SeqLM.from_pretrained(folder,
trust_remote_code=True)` loads it through the copied `clip_bart.py`.
"""

from __future__ import annotations

import logging
import os
import shutil
import tempfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import torch

from mmsum.hub.card import ExportInfo, build_model_card, clip_settings, read_run_config
from mmsum.hub.checkpoint import (
    CheckpointError,
    LoadedCheckpoint,
    load_checkpoint,
    read_json,
    resolve_checkpoint,
    run_dir_of,
)
from mmsum.models.clip_bart import ClipBartConfig, ClipBartForConditionalGeneration

log = logging.getLogger(__name__)

# Files a download may hold; anything that could be unpickled is kept out on purpose.
PICKLE_SUFFIXES = (".bin", ".pt", ".pth", ".ckpt", ".pkl", ".pickle")


@dataclass
class ExportResult:
    output_dir: Path
    checkpoint: Path
    files: list[str] = field(default_factory=list)
    repo_id: str | None = None
    commit_url: str | None = None


def build_model(ckpt: LoadedCheckpoint, base_model: str | None = None) -> ClipBartForConditionalGeneration:
    """The HF model of a checkpoint: BART architecture from its base config, weights from the checkpoint.

    Only the base model's `config.json` is read (not its weights), so exporting works wherever that
    config is reachable; `base_model` overrides the path recorded in the checkpoint.
    """
    from transformers import BartConfig

    hp = ckpt.hparams
    base = base_model or hp["bart_name_or_path"]
    try:
        bart_config = BartConfig.from_pretrained(base)
    except (OSError, ValueError) as e:
        raise CheckpointError(
            f"cannot read the base BART config from {base!r} (recorded in the checkpoint): {e}. "
            "Pass --base-model PATH pointing at a local copy of that BART."
        ) from e
    config_dict = bart_config.to_dict()
    for key in ("model_type", "architectures", "transformers_version", "auto_map"):
        config_dict.pop(key, None)
    config = ClipBartConfig(
        visual_feat_dim=int(hp["visual_feat_dim"]),
        max_images=int(hp.get("max_images", 10)),
        guidance_loss_weight=float(hp.get("guidance_loss_weight", 6.0)),
        clip_model=hp.get("clip_model"),
        **config_dict,
    )
    model = ClipBartForConditionalGeneration(config)
    expected = model.state_dict()
    missing = sorted(set(expected) - set(ckpt.state_dict))
    unexpected = sorted(set(ckpt.state_dict) - set(expected))
    shapes = [
        f"{k}: checkpoint {tuple(v.shape)} vs model {tuple(expected[k].shape)}"
        for k, v in ckpt.state_dict.items()
        if k in expected and v.shape != expected[k].shape
    ]
    if missing or unexpected or shapes:
        raise CheckpointError(
            f"{ckpt.path}: weights do not match CLIP-BART built from {base!r} with "
            f"visual_feat_dim={config.visual_feat_dim}, max_images={config.max_images}: "
            f"missing={missing[:5]} unexpected={unexpected[:5]} shape mismatches={shapes[:5]}"
        )
    model.load_state_dict(ckpt.state_dict, strict=True)
    if config.tie_word_embeddings and not torch.equal(
        ckpt.state_dict["lm_head.weight"], ckpt.state_dict["model.shared.weight"]
    ):
        raise CheckpointError(f"{ckpt.path}: lm_head and shared embeddings differ but the config ties them")
    model.generation_config = _generation_config(base, hp.get("generation"), model)
    return model.eval()


def _generation_config(base: str, overrides: dict[str, Any] | None, model) -> Any:
    """The base BART's generation defaults plus the run's decoding settings (what validation used)."""
    from transformers import GenerationConfig

    try:
        generation = GenerationConfig.from_pretrained(base)
    except OSError:
        generation = GenerationConfig.from_model_config(model.config)
    for key, value in (overrides or {}).items():
        setattr(generation, key, value)
    if generation.max_new_tokens is not None:
        generation.max_length = None  # else generate() warns that both are set on every call
    generation.validate()
    return generation


def _save_tokenizer(source: str, out_dir: Path) -> None:
    from transformers import AutoTokenizer

    try:
        tokenizer = AutoTokenizer.from_pretrained(source)
    except (OSError, ValueError) as e:
        raise CheckpointError(
            f"cannot load the tokenizer from {source!r}: {e}. Pass --tokenizer PATH."
        ) from e
    tokenizer.save_pretrained(out_dir)


def _make_readable(folder: Path) -> None:
    """mkdtemp makes 0700 dirs (and some writers 0600 files); an export is meant to be shared."""
    umask = os.umask(0)
    os.umask(umask)
    folder.chmod(0o777 & ~umask)
    for path in folder.rglob("*"):
        path.chmod((0o777 if path.is_dir() else 0o666) & ~umask)


def export_checkpoint(
    source: str | Path,
    output_dir: str | Path,
    which: str = "best",
    base_model: str | None = None,
    tokenizer: str | None = None,
    repo_id: str | None = None,
    clip_model: str | None = None,
    clip_pretrained: str | None = None,
    license: str | None = None,
    datasets: list[str] | None = None,
    overwrite: bool = False,
) -> ExportResult:
    """Write the HF folder for a checkpoint or run dir; see docs/export.md for what it holds."""
    output_dir = Path(output_dir)
    if output_dir.exists() and any(output_dir.iterdir()) and not overwrite:
        raise FileExistsError(f"{output_dir} exists and is not empty (pass --overwrite to replace it)")
    ckpt_path = resolve_checkpoint(source, which)
    ckpt = load_checkpoint(ckpt_path)
    run_dir = Path(source) if Path(source).is_dir() else run_dir_of(ckpt_path)
    report = read_json(run_dir / "report.json") if run_dir else None
    run_config = read_run_config(run_dir / "config_resolved.yaml") if run_dir else None

    model = build_model(ckpt, base_model)
    clip = clip_settings(ckpt.hparams, run_config, clip_model, clip_pretrained)
    info = ExportInfo(
        hparams=ckpt.hparams,
        config=model.config,
        generation=model.generation_config.to_diff_dict(),
        report=report,
        run_config=run_config,
        clip=clip,
        repo_id=repo_id,
        global_step=ckpt.global_step,
        checkpoint_name=ckpt_path.name,
        license=license,
        datasets=datasets,
    )

    # Build next to the target and swap in at the end: a failed export leaves no half-written folder.
    output_dir.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=f".{output_dir.name}.tmp-", dir=output_dir.parent))
    try:
        model.save_pretrained(tmp)
        _save_tokenizer(tokenizer or base_model or ckpt.hparams["bart_name_or_path"], tmp)
        build_model_card(info).save(tmp / "README.md")
        unsafe = [p.name for p in tmp.rglob("*") if p.suffix in PICKLE_SUFFIXES]
        if unsafe:
            raise CheckpointError(f"refusing to write pickle files into the export: {unsafe}")
        _make_readable(tmp)
        if output_dir.exists():
            shutil.rmtree(output_dir)
        os.replace(tmp, output_dir)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    files = sorted(str(p.relative_to(output_dir)) for p in output_dir.rglob("*") if p.is_file())
    log.info("exported %s → %s (%d files)", ckpt_path, output_dir, len(files))
    return ExportResult(output_dir=output_dir, checkpoint=ckpt_path, files=files, repo_id=repo_id)
