"""A tiny trained run (real Lightning checkpoints) and its export, built once per session."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import sysconfig
from pathlib import Path

import pytest

FEATURE_DIM = 64  # the tiny CLIP's embedding size, so the card's usage snippet can feed real CLIP features
MAX_IMAGES = 3
REPO_ROOT = Path(__file__).resolve().parents[2]
OPEN_CLIP_CONFIGS = REPO_ROOT / "mmsum" / "models" / "open_clip_configs"


@pytest.fixture(scope="session")
def trained_run(tmp_path_factory, tiny_bart_path, tiny_clip_path) -> Path:
    """A run dir like `mmsum-train` writes: checkpoints/best-step*.ckpt + last.ckpt, report, config."""
    import lightning as L
    import yaml
    from lightning.pytorch.callbacks import ModelCheckpoint

    from mmsum.data.datamodule import PreparedDataModule
    from mmsum.training.module import ClipBartModule
    from tests.helpers import write_synthetic_dataset

    root = tmp_path_factory.mktemp("hub-run")
    data_dir = write_synthetic_dataset(
        root / "data",
        n_train=8,
        n_eval=4,
        feature_dim=FEATURE_DIM,
        max_images=MAX_IMAGES,
        clip_model="mmsum-tiny-rn/open_clip_model.pt",
    )
    run = root / "run"
    L.seed_everything(0)
    datamodule = PreparedDataModule(
        str(data_dir),
        str(tiny_bart_path),
        batch_size=4,
        max_images=MAX_IMAGES,
        max_source_len=64,
        max_target_len=16,
    )
    datamodule.setup()
    module = ClipBartModule(
        str(tiny_bart_path),
        visual_feat_dim=FEATURE_DIM,
        max_images=MAX_IMAGES,
        clip_model="mmsum-tiny-rn/open_clip_model.pt",
        lr=1e-2,
        total_steps=4,
        generation={"num_beams": 1, "do_sample": False, "max_new_tokens": 8},
    )
    module.tokenizer = datamodule.tokenizer
    checkpoint = ModelCheckpoint(
        dirpath=run / "checkpoints",
        filename="best-step{step}",
        monitor="val/rouge2",
        mode="max",
        save_last=True,
        save_top_k=1,
        auto_insert_metric_name=False,
    )
    trainer = L.Trainer(
        max_steps=4,
        accelerator="cpu",
        logger=False,
        callbacks=[checkpoint],
        enable_progress_bar=False,
        enable_model_summary=False,
        val_check_interval=2,
        check_val_every_n_epoch=None,
        limit_val_batches=1,
    )
    trainer.fit(module, datamodule=datamodule)
    report = {
        "task_name": "demo",
        "global_step": trainer.global_step,
        "best_checkpoint": checkpoint.best_model_path,
        "final_val": {"val/loss": 3.2, "val/rouge1": 0.31, "val/rouge2": 0.12, "val/rougeL": 0.29},
        "test": {
            "test/rouge1": 0.4123,
            "test/rouge2": 0.2011,
            "test/rougeL": 0.3856,
            "test/clipbertscore": 0.8123,
            "test/entity_precision": 0.7,
            "test/image_precision": 0.55,
        },
    }
    (run / "report.json").write_text(json.dumps(report))
    config = {
        "task_name": "demo",
        "tags": ["demo", "scst"],
        "global_batch_size": 4,
        "clip": {"model_name": "mmsum-tiny-rn", "pretrained": str(tiny_clip_path)},
        "data": {
            "data_dir": str(root / "demo" / "prepared"),
            "max_source_len": 64,
            "max_target_len": 16,
            "max_images": MAX_IMAGES,
        },
        "trainer": {"max_steps": 4},
        "callbacks": {"model_checkpoint": {}, "scst": {"_target_": "mmsum.training.callbacks.SCSTCallback"}},
        "scst": {  # the shape of conf/scst/default.yaml + schedule/alternate.yaml
            "rl_weight": 0.998,
            "num_samples": 1,
            "baseline": "greedy",
            "schedule": {
                "kind": "alternate",
                "rewards": {
                    "clipbertscore": {
                        "weight": 2.0,
                        "reward": {"_target_": "mmsum.rewards.ClipBertScoreReward", "alpha": 0.25},
                    },
                    "rouge2": {
                        "weight": 1.0,
                        "reward": {"_target_": "mmsum.rewards.RougeReward", "key": "rouge2"},
                    },
                    "dropped": None,
                },
            },
        },
    }
    (run / "config_resolved.yaml").write_text(yaml.safe_dump(config))
    return run


@pytest.fixture(scope="session")
def exported(trained_run, tmp_path_factory, tiny_clip_path) -> Path:
    from mmsum.hub import export_checkpoint

    out = tmp_path_factory.mktemp("hub-export") / "clip-bart-tiny"
    export_checkpoint(trained_run, out, clip_pretrained=str(tiny_clip_path), license="mit")
    return out


def run_without_mmsum(script: str, cwd: Path, timeout: float = 180) -> subprocess.CompletedProcess:
    """Run `script` in a fresh interpreter that provably cannot import mmsum.

    `-I -S`: no PYTHONPATH, no user site, no cwd on sys.path, and no `site` module, so no `.pth`
    file runs — in particular not the editable-install finder that makes mmsum importable from
    anywhere in this venv. Only the venv's site-packages directories are put back on sys.path, as
    plain paths. The script's first lines assert mmsum is unreachable.
    """
    site_dirs = sorted({sysconfig.get_paths()["purelib"], sysconfig.get_paths()["platlib"]})
    prelude = (
        "import sys, importlib.util\n"
        f"sys.path.extend({site_dirs!r})\n"
        "assert importlib.util.find_spec('mmsum') is None, 'mmsum is importable'\n"
        "assert not any('__editable__' in type(f).__module__ for f in sys.meta_path)\n"
        "assert not any('mmsum' in p for p in sys.path), sys.path\n"
    )
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "PYTHONHOME", "PYTHONSTARTUP")}
    # Remote code is copied into HF_MODULES_CACHE; keep it in the test's tmp dir.
    env.update(
        HF_HUB_OFFLINE="1",
        TRANSFORMERS_OFFLINE="1",
        HF_HOME=str(cwd / "hf_home"),
        HF_MODULES_CACHE=str(cwd / "hf_modules"),
    )
    return subprocess.run(
        [sys.executable, "-I", "-S", "-c", prelude + script],
        cwd=cwd,
        env=env,
        capture_output=True,
        text=True,
        timeout=timeout,
    )
