"""SCSTCallback: phase control for self-critical sequence training.

The callback owns the reward models and the reward schedule (so their encoders are never parameters
or checkpoint entries of the LightningModule), optionally loads an XE checkpoint's weights
(`init_from`), switches the module into SCST mode at `start_step`, logs the SCST metrics and a
completions table, and saves its phase and schedule position with the checkpoint.
"""

from __future__ import annotations

import csv
import logging
import math
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import lightning as L
import torch

from mmsum.rewards.base import expand_batch
from mmsum.rewards.schedule import RewardSchedule, build_schedule
from mmsum.training.scst import REWARD_VIEW_KEYS, ScstSettings, as_settings, scst_step

log = logging.getLogger(__name__)


class CheckpointMismatchError(ValueError):
    """An `init_from` checkpoint that does not fit the experiment's model / tokenizer / features."""


class SCSTCallback(L.Callback):
    """Drives SCST. `config` is the `scst` config node (see conf/scst/default.yaml)."""

    def __init__(self, config: Mapping[str, Any], schedule: RewardSchedule | None = None) -> None:
        self.config = dict(config)
        self.settings: ScstSettings = as_settings(self.config)
        self.start_step = int(self.config.get("start_step", 0) or 0)
        self.init_from = self.config.get("init_from")
        if self.config.get("require_init_from") and not self.init_from:
            raise ValueError(
                "this SCST experiment starts from an XE checkpoint: pass scst.init_from=PATH/TO/last.ckpt"
            )
        self.seed = int(self.config.get("seed", 0) or 0)
        self.label_smoothing = self.config.get("label_smoothing", 0.0)
        self.completions_every = int(self.config.get("completions_every_n_steps", 0) or 0)
        self.val_rewards = bool(self.config.get("val_rewards", True))
        self.schedule = schedule
        self.active = False
        self.started_at_step: int | None = None
        self.completions: list[dict[str, Any]] = []
        self._completions_written_at: int | None = None
        self._val_sums: dict[str, list[float]] = {}
        self._trainer: L.Trainer | None = None

    # ---- lifecycle ------------------------------------------------------------------------------
    def setup(self, trainer: L.Trainer, pl_module: L.LightningModule, stage: str) -> None:
        self._trainer = trainer
        if self.schedule is None:
            spec = self.config.get("schedule") or {}
            self.schedule = build_schedule(spec.get("kind", "alternate"), spec.get("rewards") or {})
        if self.init_from:
            # A resume from last.ckpt restores the module afterwards and overrides these weights.
            load_xe_weights(pl_module, self.init_from)

    def on_train_batch_start(
        self, trainer: L.Trainer, pl_module: L.LightningModule, batch: Any, batch_idx: int
    ) -> None:
        if not self.active and trainer.global_step >= self.start_step:
            self.active = True
            self.started_at_step = trainer.global_step
            log.info("SCST starts at optimizer step %d", trainer.global_step)
        if self.active:
            self._enter_scst(pl_module)

    def _enter_scst(self, pl_module: L.LightningModule) -> None:
        if pl_module.scst_step_fn is None:
            pl_module.scst_step_fn = self._training_step
            if self.label_smoothing is not None:
                pl_module.hparams.label_smoothing = float(self.label_smoothing)

    def on_train_end(self, trainer: L.Trainer, pl_module: L.LightningModule) -> None:
        pl_module.scst_step_fn = None

    # ---- the SCST step (called from the module's training_step) --------------------------------
    def schedule_step(self, global_step: int) -> int:
        """Position in the reward schedule: SCST optimizer steps so far (constant within accumulation)."""
        return global_step - (self.started_at_step or 0)

    def _training_step(
        self, module: L.LightningModule, batch: dict[str, Any], batch_idx: int
    ) -> torch.Tensor:
        trainer = module.trainer
        step = trainer.global_step
        # Seeded per (seed, rank, step, micro-batch): reproducible, and unchanged by a resume.
        generator = torch.Generator(device=module.device)
        generator.manual_seed(self.seed * 1_000_003 + trainer.global_rank * 7919 + step * 131 + batch_idx)
        out = scst_step(module, batch, self.schedule, self.schedule_step(step), self.settings, generator)
        bs = batch["input_ids"].shape[0]
        for name, value in out.metrics.items():
            if math.isnan(value):
                continue
            # prog_bar must match the XE step's own train/loss logging (same key, same arguments).
            module.log(name, value, batch_size=bs, prog_bar=name in ("train/loss", "train/reward"))
        module.log("train/scst_step", float(self.schedule_step(step)), batch_size=bs)
        self.completions = out.completions
        if (
            self.completions_every
            and step % self.completions_every == 0
            and self._completions_written_at != step
        ):
            self._completions_written_at = step
            self._write_completions(trainer, step, out.completions)
        return out.loss

    def _write_completions(self, trainer: L.Trainer, step: int, rows: list[dict[str, Any]]) -> None:
        if not trainer.is_global_zero or not rows:
            return
        rows = [{"step": step, **row} for row in rows]
        columns = list(rows[0])
        path = Path(trainer.default_root_dir) / "scst_completions.csv"
        path.parent.mkdir(parents=True, exist_ok=True)
        new = not path.exists()
        with open(path, "a", newline="", encoding="utf-8") as f:
            writer = csv.DictWriter(f, fieldnames=columns, extrasaction="ignore")
            if new:
                writer.writeheader()
            writer.writerows(rows)
        for logger in trainer.loggers:
            if type(logger).__name__ == "WandbLogger":
                logger.log_table(
                    key="train/completions", columns=columns, data=[list(r.values()) for r in rows]
                )

    # ---- validation: the schedule's rewards on the greedy validation summaries -----------------
    def on_validation_epoch_start(self, trainer: L.Trainer, pl_module: L.LightningModule) -> None:
        self._val_sums = {}

    def on_validation_batch_end(
        self, trainer, pl_module, outputs, batch: Any, batch_idx: int, dataloader_idx: int = 0
    ) -> None:
        summaries = getattr(pl_module, "last_val_summaries", None)
        if not self.val_rewards or self.schedule is None or not summaries:
            return
        view = expand_batch({k: batch[k] for k in REWARD_VIEW_KEYS if k in batch}, 1)
        for name, item in self.schedule.rewards.items():
            values = item.reward(view, list(summaries)).float()
            finite = values[torch.isfinite(values)]
            total = self._val_sums.setdefault(name, [0.0, 0.0])
            total[0] += float(finite.sum())
            total[1] += float(finite.numel())

    def on_validation_epoch_end(self, trainer: L.Trainer, pl_module: L.LightningModule) -> None:
        for name, (total, count) in self._val_sums.items():
            if count:
                pl_module.log(f"val/rewards/{name}", total / count, sync_dist=True)

    # ---- checkpointed state (counters only: no reward encoders) --------------------------------
    def state_dict(self) -> dict[str, Any]:
        return {"active": self.active, "started_at_step": self.started_at_step, "start_step": self.start_step}

    def load_state_dict(self, state_dict: dict[str, Any]) -> None:
        self.active = bool(state_dict.get("active", False))
        self.started_at_step = state_dict.get("started_at_step")


def load_xe_weights(pl_module: L.LightningModule, path: str | Path) -> None:
    """Load only the CLIP-BART weights of a Lightning checkpoint; refuse one that does not fit."""
    path = Path(path)
    if not path.is_file():
        raise FileNotFoundError(f"scst.init_from={str(path)!r}: no checkpoint there")
    checkpoint = torch.load(path, map_location="cpu", weights_only=False)
    state = checkpoint.get("state_dict", checkpoint)
    weights = {k[len("model.") :]: v for k, v in state.items() if k.startswith("model.")}
    hparams = checkpoint.get("hyper_parameters") or {}
    mine = getattr(pl_module, "hparams", {})
    problems = []
    for key in ("visual_feat_dim", "clip_model"):
        theirs, ours = hparams.get(key), mine.get(key)
        if theirs is not None and ours is not None and theirs != ours:
            problems.append(f"{key}: checkpoint has {theirs!r}, this experiment {ours!r}")
    target = pl_module.model.state_dict()
    vocab_key = "model.shared.weight"
    if vocab_key in weights and weights[vocab_key].shape[0] != target[vocab_key].shape[0]:
        problems.append(
            f"tokenizer: checkpoint vocabulary has {weights[vocab_key].shape[0]} tokens, this experiment's "
            f"tokenizer ({mine.get('bart_name_or_path')}) {target[vocab_key].shape[0]}"
        )
    shapes = [
        f"{k}: {tuple(v.shape)} vs {tuple(target[k].shape)}"
        for k, v in weights.items()
        if k in target and v.shape != target[k].shape and k != vocab_key
    ]
    if shapes:
        problems.append("weight shapes differ: " + "; ".join(shapes[:5]))
    missing = sorted(set(target) - set(weights))
    if missing:
        problems.append(f"{len(missing)} weights missing, e.g. {missing[:3]}")
    if problems:
        raise CheckpointMismatchError(
            f"scst.init_from={str(path)!r} does not match this experiment: " + " | ".join(problems)
        )
    pl_module.model.load_state_dict(weights, strict=False)
    log.info("SCST: loaded XE weights from %s", path)
