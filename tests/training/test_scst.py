"""SCST: loss masking, baselines, non-finite rewards, the alternate schedule, resume, train.py."""

from __future__ import annotations

from pathlib import Path

import lightning as L
import pytest
import torch

from mmsum.data.datamodule import PreparedDataModule
from mmsum.rewards.schedule import RewardSchedule, WeightedReward
from mmsum.training.callbacks import CheckpointMismatchError, SCSTCallback, load_xe_weights
from mmsum.training.module import ClipBartModule
from mmsum.training.scst import ScstSettings, compute_baseline, rl_loss, scst_step
from tests.helpers import write_synthetic_dataset


# ---- loss and baselines on hand-built tensors -----------------------------------------------------
def test_rl_loss_counts_eos_and_skips_padding():
    log_probs = torch.tensor([[-1.0, -2.0, -3.0, -9.0], [-0.5, -9.0, -9.0, -9.0]], requires_grad=True)
    mask = torch.tensor([[1, 1, 1, 0], [1, 0, 0, 0]], dtype=torch.bool)  # row 0: 2 tokens + EOS
    adv = torch.tensor([1.0, -2.0])
    loss = rl_loss(log_probs, mask, adv)
    expected = -(1.0 * (-1 - 2 - 3) + (-2.0) * (-0.5)) / 4
    assert loss.item() == pytest.approx(expected)
    loss.backward()
    assert log_probs.grad[0, 3] == 0 and log_probs.grad[1, 1:].abs().sum() == 0
    per_seq = rl_loss(log_probs.detach(), mask, adv, reduction="sequence")
    assert per_seq.item() == pytest.approx(-((1.0 * -6 / 3) + (-2.0 * -0.5)) / 2)


def test_nonfinite_rows_are_excluded_not_propagated():
    log_probs = torch.tensor([[-1.0, -2.0], [-1.0, -1.0]], requires_grad=True)
    mask = torch.ones(2, 2, dtype=torch.bool)
    adv = torch.tensor([float("nan"), 1.0])
    loss = rl_loss(log_probs, mask, adv, valid=torch.isfinite(adv))
    loss.backward()
    assert torch.isfinite(loss) and loss.item() == pytest.approx(1.0)
    assert torch.isfinite(log_probs.grad).all() and log_probs.grad[0].abs().sum() == 0


def test_baselines():
    samples = torch.tensor([[0.2, 0.4, 0.9], [0.1, float("nan"), 0.3]])
    greedy = torch.tensor([0.5, 0.2])
    assert torch.equal(compute_baseline(samples, "greedy", greedy), torch.tensor([[0.5] * 3, [0.2] * 3]))
    assert torch.equal(compute_baseline(samples, "beam", greedy)[:, 0], greedy)
    loo = compute_baseline(samples, "loo")
    assert torch.allclose(loo[0], torch.tensor([0.65, 0.55, 0.3]))
    assert torch.allclose(loo[1], torch.tensor([0.3, 0.2, 0.1]))  # the NaN sample is left out
    with pytest.raises(ValueError, match="num_samples >= 2"):
        ScstSettings(baseline="loo", num_samples=1)


# ---- a real module and batch -------------------------------------------------------------------
class RecordingReward:
    """Scores by summary length; records (global step, rows) per call; optional NaN rows."""

    def __init__(self, name: str, nan_rows: tuple[int, ...] = ()):
        self.name, self.nan_rows, self.calls = name, nan_rows, []
        self.trainer = None

    def __call__(self, view, summaries):
        self.calls.append(self.trainer.global_step if self.trainer else None)
        values = torch.tensor([len(s.split()) / 10.0 for s in summaries])
        values[list(self.nan_rows)] = float("nan")
        return values


@pytest.fixture(scope="module")
def synthetic_root(tmp_path_factory) -> Path:
    return write_synthetic_dataset(tmp_path_factory.mktemp("scst-data"), n_train=16, n_eval=4, feature_dim=16)


def _module(tiny_bart_path, **kw) -> ClipBartModule:
    module = ClipBartModule(str(tiny_bart_path), visual_feat_dim=16, max_images=3, lr=1e-3, total_steps=100,
                            generation={"num_beams": 1, "max_new_tokens": 6}, predictions_path=None, **kw)  # fmt: skip
    return module


def _datamodule(root: Path, tiny_bart_path, batch_size: int = 4) -> PreparedDataModule:
    dm = PreparedDataModule(str(root), str(tiny_bart_path), batch_size=batch_size, max_source_len=48,
                            max_target_len=8, max_images=3)  # fmt: skip
    dm.setup()
    return dm


@pytest.mark.parametrize("baseline,k", [("greedy", 1), ("loo", 2), ("beam", 1)])
def test_scst_step_each_baseline_and_nan_rows(baseline, k, tiny_bart_path, synthetic_root):
    torch.manual_seed(0)
    module = _module(tiny_bart_path)
    dm = _datamodule(synthetic_root, tiny_bart_path)
    module.tokenizer = dm.tokenizer
    batch = next(iter(dm.train_dataloader()))
    reward = RecordingReward("len", nan_rows=(0,))
    schedule = RewardSchedule({"len": WeightedReward(reward, 2.0)})
    settings = ScstSettings(num_samples=k, baseline=baseline, max_new_tokens=6,
                            beam_kwargs={"num_beams": 2, "max_new_tokens": 6})  # fmt: skip
    out = scst_step(module, batch, schedule, 0, settings, torch.Generator().manual_seed(0))
    out.loss.backward()
    assert torch.isfinite(out.loss)
    assert all(torch.isfinite(p.grad).all() for p in module.parameters() if p.grad is not None)
    assert len(reward.calls) == 1  # samples and baselines scored in one batched call
    assert out.metrics["train/nonfinite_rewards"] >= 1
    for key in ("train/reward", "train/reward_std", "train/rewards/len/mean", "train/rewards/len/std",
                "train/baseline_reward", "train/advantage_mean", "train/frac_zero_advantage", "train/sample_len"):  # fmt: skip
        assert key in out.metrics
    assert len(out.completions) == batch["input_ids"].shape[0]


def test_one_shared_encoder_pass_gives_the_two_pass_loss_and_gradients(tiny_bart_path, synthetic_root):
    # scst_step runs the encoder once (with gradients) for the XE term and the samples' log-probs.
    from mmsum.training.decoding import fused_sample_and_greedy, sequence_log_probs

    torch.manual_seed(0)
    module = _module(tiny_bart_path)
    batch = next(iter(_datamodule(synthetic_root, tiny_bart_path).train_dataloader()))
    model, inputs = module.model, module.model_inputs(batch)
    samples = fused_sample_and_greedy(model.eval(), **inputs, num_samples=1, include_greedy=False,
                                      max_new_tokens=6, generator=torch.Generator().manual_seed(0)).sequences  # fmt: skip
    model.eval()  # no dropout, so both versions see the same forward

    def loss_and_grads(shared: bool) -> tuple[torch.Tensor, dict[str, torch.Tensor]]:
        module.zero_grad(set_to_none=True)
        encoded = model.encode(**inputs)
        xe = module.xe_loss(batch, encoded=encoded if shared else None)
        states, mask = (encoded if shared else model.encode(**inputs))[:2]
        loss = xe["loss"] - sequence_log_probs(model, states.last_hidden_state, mask, samples).mean()
        loss.backward()
        return loss.detach(), {n: p.grad.clone() for n, p in module.named_parameters() if p.grad is not None}

    (loss_shared, grads_shared), (loss_two, grads_two) = loss_and_grads(True), loss_and_grads(False)
    assert torch.equal(loss_shared, loss_two)
    assert grads_shared.keys() == grads_two.keys()
    for name in grads_two:
        torch.testing.assert_close(grads_shared[name], grads_two[name], rtol=1e-5, atol=1e-7, msg=name)
    # The XE term alone is the same computation either way.
    assert torch.equal(
        module.xe_loss(batch)["loss"], module.xe_loss(batch, encoded=model.encode(**inputs))["loss"]
    )


def _fit(module, dm, callback, tmp: Path, max_steps: int, ckpt_path=None, accumulate: int = 2) -> L.Trainer:
    trainer = L.Trainer(max_steps=max_steps, accumulate_grad_batches=accumulate, logger=False, enable_progress_bar=False,
                        enable_model_summary=False, limit_val_batches=0, default_root_dir=str(tmp),
                        enable_checkpointing=False, accelerator="cpu", callbacks=[callback])  # fmt: skip
    for r in callback.schedule.rewards.values():
        r.reward.trainer = trainer
    trainer.fit(module, datamodule=dm, ckpt_path=ckpt_path)
    return trainer


def _callback(**cfg) -> SCSTCallback:
    schedule = RewardSchedule(
        {"a": WeightedReward(RecordingReward("a"), 2.0), "b": WeightedReward(RecordingReward("b"), 1.0)},
        "alternate",
    )
    return SCSTCallback(
        {"max_new_tokens": 5, "completions_every_n_steps": 0, "val_rewards": False, **cfg}, schedule
    )


def test_alternate_schedule_per_optimizer_step_with_accumulation_and_resume(
    tiny_bart_path, synthetic_root, tmp_path
):
    torch.manual_seed(0)
    dm = _datamodule(synthetic_root, tiny_bart_path)
    module = _module(tiny_bart_path)
    module.tokenizer = dm.tokenizer
    callback = _callback(start_step=1)  # one XE step first, then SCST
    trainer = _fit(module, dm, callback, tmp_path, max_steps=3)
    a, b = (callback.schedule.rewards[n].reward for n in ("a", "b"))
    # 2 micro-batches per optimizer step; SCST from step 1: a at steps 1, b at step 2.
    assert a.calls == [1, 1] and b.calls == [2, 2]
    assert callback.state_dict() == {"active": True, "started_at_step": 1, "start_step": 1}
    ckpt = tmp_path / "mid.ckpt"
    trainer.save_checkpoint(ckpt)

    module2 = _module(tiny_bart_path)
    module2.tokenizer = dm.tokenizer
    resumed = _callback(start_step=1)
    _fit(module2, dm, resumed, tmp_path, max_steps=5, ckpt_path=str(ckpt))
    a2, b2 = (resumed.schedule.rewards[n].reward for n in ("a", "b"))
    assert resumed.started_at_step == 1
    assert a2.calls == [3, 3] and b2.calls == [4, 4]  # the schedule continues where it stopped


def test_init_from_refuses_a_mismatched_checkpoint(tiny_bart_path, tmp_path):
    source = _module(tiny_bart_path)
    trainer = L.Trainer(logger=False, enable_progress_bar=False, accelerator="cpu")
    trainer.strategy.connect(source)
    ckpt = tmp_path / "xe.ckpt"
    torch.save({"state_dict": source.state_dict(), "hyper_parameters": dict(source.hparams)}, ckpt)
    target = _module(tiny_bart_path)
    load_xe_weights(target, ckpt)
    assert torch.equal(target.model.lm_head.weight, source.model.lm_head.weight)
    other = ClipBartModule(str(tiny_bart_path), visual_feat_dim=32, max_images=3, predictions_path=None)
    with pytest.raises(CheckpointMismatchError, match="visual_feat_dim: checkpoint has 16"):
        load_xe_weights(other, ckpt)
    with pytest.raises(FileNotFoundError):
        load_xe_weights(target, tmp_path / "missing.ckpt")


@pytest.mark.slow
def test_train_py_demo_scst_subprocess(demo_data_root, model_cache, tmp_path):
    from mmsum.cli.train import run_training
    from tests.helpers import report, train_py
    from tests.training.test_train import compose_train, demo_overrides

    xe_dir = tmp_path / "xe"
    quick = ["validate_before_training=false", "test_after_training=false", "data.limit_eval_examples=4",
             "trainer.val_check_interval=2"]  # fmt: skip
    run_training(
        compose_train(demo_overrides(demo_data_root, xe_dir, model_cache, "trainer.max_steps=2", *quick))
    )
    xe_ckpt = xe_dir / "checkpoints" / "last.ckpt"
    assert xe_ckpt.is_file()

    run_dir = tmp_path / "scst"
    done = train_py(["+experiment=demo_scst", f"paths.data_dir={demo_data_root}", f"hydra.run.dir={run_dir}",
                     f"scst.init_from={xe_ckpt}", "trainer.max_steps=2", "trainer.val_check_interval=2",
                     "data.limit_eval_examples=4", "data.batch_size=4", "scst.max_new_tokens=8",
                     "scst.completions_every_n_steps=1", "test_after_training=false",
                     "callbacks.rich_progress_bar=null"], model_cache)  # fmt: skip
    assert done.returncode == 0, done.stderr[-3000:]
    scst_report = report(run_dir)
    assert scst_report["global_step"] == 2
    assert "train/reward" in scst_report["train"] and "train/rewards/rouge2/mean" in scst_report["train"]
    assert "val/rewards/clipbertscore" in scst_report["final_val"]
    assert (run_dir / "scst_completions.csv").is_file()
    header = (run_dir / "metrics.csv").read_text().splitlines()[0]
    assert "train/rewards/clipbertscore/mean" in header
    ckpt = torch.load(run_dir / "checkpoints" / "last.ckpt", map_location="cpu", weights_only=False)
    assert not any("clip" in k.lower() and "scorer" in k.lower() for k in ckpt["state_dict"])
    assert all(k.startswith("model.") for k in ckpt["state_dict"])
    assert any("SCSTCallback" in k for k in ckpt["callbacks"])
