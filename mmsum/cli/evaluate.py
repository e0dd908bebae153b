"""`mmsum-evaluate ckpt_path=PATH data=...`: generate on a test split, score, write a report."""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Any

import hydra
import lightning as L
from omegaconf import DictConfig

import mmsum.cli.resolvers  # noqa: F401
from mmsum.cli.errors import user_errors_as_messages
from mmsum.cli.train import CONF_DIR
from mmsum.data.datamodule import PreparedDataModule
from mmsum.training.module import ClipBartModule
from mmsum.training.report import write_report

log = logging.getLogger("mmsum.evaluate")


def load_module(ckpt_path: str | Path, **overrides) -> ClipBartModule:
    """A trained module from a Lightning checkpoint (a missing file is one clear error)."""
    path = Path(ckpt_path)
    if not path.is_file():
        raise FileNotFoundError(f"checkpoint not found: {path}")
    return ClipBartModule.load_from_checkpoint(path, map_location="cpu", weights_only=False, **overrides)


def run_evaluation(cfg: DictConfig) -> dict[str, Any]:
    output_dir = Path(cfg.paths.output_dir)
    output_dir.mkdir(parents=True, exist_ok=True)
    L.seed_everything(cfg.seed, workers=True)
    predictions_path = output_dir / "predictions.jsonl"
    module = load_module(cfg.ckpt_path, predictions_path=str(predictions_path))
    datamodule: PreparedDataModule = hydra.utils.instantiate(
        cfg.data,
        tokenizer_name_or_path=module.hparams.bart_name_or_path,
        max_images=module.hparams.max_images,
        test_split=cfg.split,
    )
    datamodule.setup()
    datamodule.check_features(module.hparams.visual_feat_dim, module.hparams.clip_model)
    module.tokenizer = datamodule.tokenizer
    trainer: L.Trainer = hydra.utils.instantiate(cfg.trainer, logger=False, callbacks=[])
    metrics = trainer.test(module, datamodule=datamodule, verbose=False)[0]
    report = {
        "checkpoint": str(cfg.ckpt_path),
        "data_dir": str(datamodule.data_dir),
        "split": cfg.split,
        "test": {k: float(v) for k, v in metrics.items()},
        "predictions": str(predictions_path),
    }
    if trainer.is_global_zero:
        write_report(output_dir / "report.json", report)
        log.info("report: %s", output_dir / "report.json")
    return report


@hydra.main(version_base="1.3", config_path=CONF_DIR, config_name="eval")
def main(cfg: DictConfig) -> None:
    with user_errors_as_messages():
        run_evaluation(cfg)


if __name__ == "__main__":
    main()
