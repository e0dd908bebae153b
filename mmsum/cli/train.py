"""`python train.py +experiment=NAME` (or `mmsum-train`): compose, train, test, report."""

from __future__ import annotations

import logging
import os
from pathlib import Path
from typing import Any

import hydra
import lightning as L
from omegaconf import DictConfig, OmegaConf, open_dict

import mmsum.cli.resolvers  # noqa: F401  (registers ${grad_accum:...} and ${slurm_gpus:...})
from mmsum.cli import distributed
from mmsum.cli.errors import user_errors_as_messages
from mmsum.data.datamodule import PreparedDataModule
from mmsum.training.report import plot_training_curves, write_report

log = logging.getLogger("mmsum.train")
CONF_DIR = str(Path(__file__).resolve().parents[2] / "conf")


def build_datamodule(cfg: DictConfig) -> PreparedDataModule:
    if cfg.model.get("build_tiny_bart"):
        # The tiny offline BART (and its tokenizer) must exist before the tokenizer is loaded.
        from mmsum.models.tiny import build_configured_bart

        build_configured_bart(cfg.model.bart_name_or_path, cfg.model.build_tiny_bart)
    datamodule: PreparedDataModule = hydra.utils.instantiate(cfg.data)
    datamodule.setup()
    return datamodule


def resolve_visual_settings(cfg: DictConfig, datamodule: PreparedDataModule) -> None:
    """Fill model.visual_feat_dim / clip_model from the prepared data, or check they agree with it."""
    with open_dict(cfg):
        if cfg.model.get("visual_feat_dim") is None:
            cfg.model.visual_feat_dim = datamodule.feature_dim
        if cfg.model.get("clip_model") is None:
            cfg.model.clip_model = datamodule.clip_model
    datamodule.check_features(int(cfg.model.visual_feat_dim), cfg.model.clip_model)


def build_callbacks(cfg: DictConfig) -> list[L.Callback]:
    return [
        hydra.utils.instantiate(c) for c in (cfg.get("callbacks") or {}).values() if c and "_target_" in c
    ]


def build_loggers(cfg: DictConfig) -> list:
    return [hydra.utils.instantiate(c) for c in (cfg.get("logger") or {}).values() if c and "_target_" in c]


def resolve_ckpt_path(cfg: DictConfig) -> str | None:
    """`ckpt_path=last` means this run dir's checkpoints/last.ckpt; a missing file is an error.

    `ckpt_path=auto` resumes from the newest of last.ckpt and Lightning's SLURM `hpc_ckpt_*.ckpt`
    when one exists and starts fresh otherwise: a requeued SLURM job re-runs the same command in
    the same run dir and must pick up where it stopped."""
    ckpt_path = cfg.get("ckpt_path")
    if ckpt_path is None:
        return None
    if ckpt_path == "auto":
        return newest_resume_checkpoint(Path(cfg.paths.output_dir))
    path = (
        Path(cfg.paths.output_dir) / "checkpoints" / "last.ckpt" if ckpt_path == "last" else Path(ckpt_path)
    )
    if not path.is_file():
        raise FileNotFoundError(f"ckpt_path={ckpt_path!r}: no checkpoint at {path}")
    return str(path)


def newest_resume_checkpoint(output_dir: Path) -> str | None:
    candidates = [output_dir / "checkpoints" / "last.ckpt", *output_dir.glob("hpc_ckpt_*.ckpt")]
    existing = [p for p in candidates if p.is_file()]
    return str(max(existing, key=lambda p: p.stat().st_mtime)) if existing else None


def build_trainer(cfg: DictConfig, step_range: StepRange) -> L.Trainer:
    return hydra.utils.instantiate(
        cfg.trainer, callbacks=[*build_callbacks(cfg), step_range], logger=build_loggers(cfg) or False
    )


def run_training(cfg: DictConfig) -> dict[str, Any]:
    """Train (and test) as configured; returns the report that is also written to report.json.

    Under `strategy=ddp` without a cluster manager this process becomes rank 0 and starts the
    other ranks itself (see mmsum.cli.distributed); they run this same function on the same
    resolved config and the same run dir. Process group, distributed env vars and wandb are
    cleaned up on the way out, so the next job of a local `-m` sweep starts from a clean slate."""
    with distributed.job_scope():
        return _run_training(cfg)


def _run_training(cfg: DictConfig) -> dict[str, Any]:
    output_dir = Path(cfg.paths.output_dir)
    output_dir.mkdir(parents=True, exist_ok=True)
    L.seed_everything(cfg.seed, workers=True)

    datamodule = build_datamodule(cfg)
    resolve_visual_settings(cfg, datamodule)
    step_range = StepRange()
    trainer = build_trainer(cfg, step_range)
    if distributed.would_relaunch_argv(trainer):
        # Lightning would re-run sys.argv for ranks > 0: under Hydra that makes new run dirs (and,
        # with -m, new sweeps). Start the ranks ourselves on this job's resolved config instead.
        distributed.launch_other_ranks(cfg, trainer)
        trainer = build_trainer(cfg, step_range)
    distributed.shard_eval_without_padding(datamodule)
    if distributed.is_rank_zero():
        (output_dir / "config_resolved.yaml").write_text(OmegaConf.to_yaml(cfg, resolve=True))

    module = hydra.utils.instantiate(cfg.model, _convert_="object")
    module.tokenizer = datamodule.tokenizer
    ckpt_path = resolve_ckpt_path(cfg)

    report: dict[str, Any] = {"task_name": cfg.task_name, "output_dir": str(output_dir)}
    if cfg.get("validate_before_training") and ckpt_path is None:
        # The starting point: the untrained model for XE, the init checkpoint's weights for SCST.
        report["initial_val"] = _floats(trainer.validate(module, datamodule=datamodule, verbose=False)[0])

    trainer.fit(module, datamodule=datamodule, ckpt_path=ckpt_path)
    save_final_last_checkpoint(trainer)
    report["train"] = _floats(trainer.callback_metrics, prefix="train/")
    report["global_step"] = trainer.global_step
    report["first_step_this_run"] = step_range.first
    report["resumed_from"] = ckpt_path
    best = getattr(trainer.checkpoint_callback, "best_model_path", "") if trainer.checkpoint_callback else ""
    report["best_checkpoint"] = best or None
    report["final_val"] = _floats(trainer.callback_metrics, prefix="val/")

    if cfg.get("test_after_training"):
        test_ckpt = best if best else None
        report["test"] = _floats(
            trainer.test(module, datamodule=datamodule, ckpt_path=test_ckpt, verbose=False)[0]
        )
        report["predictions"] = cfg.model.get("predictions_path")

    if trainer.is_global_zero:
        metrics_csv = output_dir / "metrics.csv"
        plot = plot_training_curves(metrics_csv, output_dir / "training_curves.png")
        report["metrics_csv"] = str(metrics_csv) if metrics_csv.exists() else None
        report["plot"] = str(plot) if plot else None
        write_report(output_dir / "report.json", report)
        log.info("report: %s", output_dir / "report.json")
    return report


def save_final_last_checkpoint(trainer: L.Trainer) -> None:
    """ModelCheckpoint updates last.ckpt only after validation; a run that stops at max_steps
    between validations would leave it behind, so `ckpt_path=last` resumes from the true end."""
    callback = trainer.checkpoint_callback
    if callback is not None and getattr(callback, "save_last", False) and callback.dirpath:
        trainer.save_checkpoint(Path(callback.dirpath) / "last.ckpt")


class StepRange(L.Callback):
    """Remembers the global step at which this run's training started (> 0 after a resume)."""

    first: int | None = None

    def on_train_start(self, trainer: L.Trainer, pl_module: L.LightningModule) -> None:
        self.first = trainer.global_step


def _floats(metrics, prefix: str = "") -> dict[str, float]:
    return {k: float(v) for k, v in dict(metrics).items() if k.startswith(prefix)}


@hydra.main(version_base="1.3", config_path=CONF_DIR, config_name="train")
def main(cfg: DictConfig) -> None:
    with user_errors_as_messages():
        run_training(cfg)


def rank_main(config_path: str) -> None:
    """Entry of a rank > 0 started by `distributed.launch_other_ranks`: no Hydra, no new run dir."""
    logging.basicConfig(level=logging.INFO, format="[rank %(process)d] %(name)s: %(message)s")
    with user_errors_as_messages():
        run_training(OmegaConf.load(config_path))


if __name__ == "__main__":
    child_config = os.environ.get(distributed.RANK_CONFIG_ENV)
    rank_main(child_config) if child_config else main()
