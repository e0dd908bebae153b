"""The training spine through Hydra: fast_dev_run, resume, the train.py command, configs, bad input."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from hydra import compose, initialize_config_dir
from omegaconf import OmegaConf

from mmsum.cli.train import CONF_DIR, run_training
from mmsum.data.prepared import PreparedSplitError
from tests.helpers import REPO, report, run_python, train_py

EXPERIMENTS = sorted(p.stem for p in (REPO / "conf" / "experiment").glob("*.yaml"))


def compose_train(overrides: list[str]):
    with initialize_config_dir(config_dir=CONF_DIR, version_base="1.3"):
        return compose("train", overrides=overrides)


def demo_overrides(data_root: Path, out: Path, cache: Path, *extra: str) -> list[str]:
    return [
        "+experiment=demo",
        f"paths.data_dir={data_root}",
        f"paths.output_dir={out}",
        f"paths.root_dir={out}",
        f"paths.cache_dir={cache}",
        "callbacks.rich_progress_bar=null",
        *extra,
    ]


def test_fast_dev_run_composed_through_hydra(demo_data_root, model_cache, tmp_path):
    cfg = compose_train(demo_overrides(demo_data_root, tmp_path, model_cache, "debug=fast_dev_run"))
    result = run_training(cfg)
    assert result["global_step"] == 1
    assert set(result["test"]) >= {"test/rouge1", "test/rouge2", "test/rougeL"}
    predictions = (tmp_path / "predictions.jsonl").read_text().splitlines()
    record = json.loads(predictions[0])
    assert {"id", "summary", "top_images"} <= set(record)
    assert report(tmp_path)["global_step"] == 1


@pytest.mark.slow
def test_resume_from_last_ckpt_continues_the_global_step(demo_data_root, model_cache, tmp_path):
    common = ["trainer.val_check_interval=2", "data.limit_eval_examples=4", "validate_before_training=false",
              "test_after_training=false"]  # fmt: skip
    first = run_training(
        compose_train(demo_overrides(demo_data_root, tmp_path, model_cache, "trainer.max_steps=4", *common))
    )
    assert first["global_step"] == 4 and first["first_step_this_run"] == 0
    assert (tmp_path / "checkpoints" / "last.ckpt").is_file()
    second = run_training(
        compose_train(
            demo_overrides(
                demo_data_root, tmp_path, model_cache, "trainer.max_steps=6", "ckpt_path=last", *common
            )
        )
    )
    assert second["first_step_this_run"] == 4
    assert second["global_step"] == 6
    assert second["resumed_from"].endswith("last.ckpt")


@pytest.mark.slow
def test_train_py_demo_then_evaluate_as_subprocesses(demo_data_root, model_cache, tmp_path):
    run_dir = tmp_path / "train"
    done = train_py(["+experiment=demo", f"paths.data_dir={demo_data_root}", f"hydra.run.dir={run_dir}",
                     "trainer.max_steps=6", "trainer.val_check_interval=3", "data.limit_eval_examples=6",
                     "callbacks.rich_progress_bar=null"], model_cache)  # fmt: skip
    assert done.returncode == 0, done.stderr[-3000:]
    train_report = report(run_dir)
    assert train_report["global_step"] == 6
    assert "val/rouge2" in train_report["initial_val"] and "val/rouge2" in train_report["final_val"]
    assert "test/image_precision" in train_report["test"]
    for name in ("metrics.csv", "training_curves.png", "config_resolved.yaml", "predictions.jsonl"):
        assert (run_dir / name).is_file(), name
    assert (run_dir / "checkpoints" / "last.ckpt").is_file()
    resolved = OmegaConf.load(run_dir / "config_resolved.yaml")
    assert resolved.model.visual_feat_dim == 64 and resolved.model.clip_model.startswith("mmsum-tiny-rn/")

    eval_dir = tmp_path / "eval"
    evaluate = ["-m", "mmsum.cli.evaluate", f"ckpt_path={train_report['best_checkpoint']}", "data=demo",
                f"paths.data_dir={demo_data_root}"]  # fmt: skip
    done = run_python([*evaluate, f"hydra.run.dir={eval_dir}"], model_cache)
    assert done.returncode == 0, done.stderr[-3000:]
    evaluation = report(eval_dir)
    assert evaluation["test"]["test/rouge2"] == pytest.approx(train_report["test"]["test/rouge2"], abs=1e-6)
    n_test = len((demo_data_root / "demo" / "prepared" / "test" / "examples.jsonl").read_text().splitlines())
    assert len((eval_dir / "predictions.jsonl").read_text().splitlines()) == n_test

    # split=train evaluates another split (e.g. to measure rewards on the training data).
    train_eval_dir = tmp_path / "eval_train"
    done = run_python(
        [*evaluate, f"hydra.run.dir={train_eval_dir}", "split=train", "data.limit_eval_examples=5"],
        model_cache,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    train_ids = [
        json.loads(line)["id"] for line in (train_eval_dir / "predictions.jsonl").read_text().splitlines()
    ]
    first_train = [json.loads(line)["id"] for line in
                   (demo_data_root / "demo" / "prepared" / "train" / "examples.jsonl").read_text().splitlines()[:5]]  # fmt: skip
    assert sorted(train_ids) == sorted(first_train)


@pytest.mark.parametrize("experiment", EXPERIMENTS)
def test_every_experiment_composes(experiment, tmp_path):
    cfg = compose_train(
        [f"+experiment={experiment}", f"paths.output_dir={tmp_path}", f"paths.root_dir={tmp_path}"]
    )
    resolved = OmegaConf.to_container(cfg, resolve=True)
    assert resolved["task_name"] == experiment
    if resolved.get("global_batch_size"):
        trainer, data = resolved["trainer"], resolved["data"]
        assert (
            data["batch_size"] * trainer["accumulate_grad_batches"] * trainer["devices"]
            == resolved["global_batch_size"]
        )


def test_paper_settings_of_the_xe_experiments(tmp_path):
    def load(name):
        cfg = compose_train(
            [f"+experiment={name}", f"paths.output_dir={tmp_path}", f"paths.root_dir={tmp_path}"]
        )
        return OmegaConf.to_container(cfg, resolve=True)

    wikihow, mmss, msmo = load("wikihow_xe"), load("mmss_xe"), load("msmo_clipbert_guidance")
    assert (wikihow["model"]["lr"], wikihow["trainer"]["max_steps"], wikihow["data"]["max_source_len"]) == (
        5e-5,
        15000,
        256,
    )
    assert (mmss["model"]["lr"], mmss["trainer"]["max_steps"], mmss["data"]["max_source_len"]) == (
        3e-5,
        5000,
        128,
    )
    assert (msmo["model"]["lr"], msmo["trainer"]["max_steps"], msmo["data"]["max_target_len"]) == (
        3e-5,
        20000,
        128,
    )
    assert msmo["data"]["max_images"] == 10 and msmo["model"]["label_smoothing"] == 0.1
    assert msmo["model"]["bart_name_or_path"] == "facebook/bart-base"


def test_cfg_job_prints_the_composed_experiment():
    done = train_py(["+experiment=mmss_xe", "--cfg", "job"], timeout=120)
    assert done.returncode == 0, done.stderr
    assert "task_name: mmss_xe" in done.stdout


def test_unknown_experiment_is_one_clear_error():
    done = train_py(["+experiment=no_such_experiment"], timeout=120)
    assert done.returncode != 0
    assert "no_such_experiment" in done.stderr and "experiment" in done.stderr
    assert "Traceback" not in done.stderr


def test_missing_prepared_split_names_the_path(model_cache, tmp_path):
    cfg = compose_train(demo_overrides(tmp_path / "nowhere", tmp_path, model_cache))
    with pytest.raises(PreparedSplitError, match=str(tmp_path / "nowhere" / "demo" / "prepared" / "train")):
        run_training(cfg)
    done = train_py(["+experiment=demo", f"paths.data_dir={tmp_path / 'nowhere'}", f"hydra.run.dir={tmp_path / 'run'}"],
                    model_cache, timeout=120)  # fmt: skip
    assert done.returncode == 1
    assert done.stderr.strip().splitlines()[-1].startswith("error: prepared split not found:")
    assert "Traceback" not in done.stderr


def test_feature_dim_mismatch_names_both_dims(demo_data_root, model_cache, tmp_path):
    cfg = compose_train(demo_overrides(demo_data_root, tmp_path, model_cache, "model.visual_feat_dim=1024"))
    with pytest.raises(PreparedSplitError, match=r"64-d .* expects 1024-d"):
        run_training(cfg)


def test_wandb_logger_is_offline_by_default_and_keeps_metrics_csv(tmp_path):
    cfg = compose_train(["logger=wandb", f"paths.output_dir={tmp_path}", f"paths.root_dir={tmp_path}"])
    assert cfg.logger.wandb.offline is True
    assert cfg.logger.csv.save_dir == str(tmp_path)


def test_global_batch_size_that_does_not_divide_is_an_error(tmp_path):
    cfg = compose_train(["global_batch_size=100", "data.batch_size=16", f"paths.output_dir={tmp_path}"])
    with pytest.raises(Exception, match="global_batch_size=100 is not a multiple"):
        OmegaConf.to_container(cfg.trainer, resolve=True)
