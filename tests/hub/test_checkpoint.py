"""Checkpoints are read safely, and the wrong ones fail with a message that says what is wrong."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
import torch

from mmsum.hub import CheckpointError, export_checkpoint, load_checkpoint, resolve_checkpoint


class Payload:
    """Unpickling this would touch a file: proves the loader never runs pickled code."""

    def __init__(self, marker: Path):
        self.marker = marker

    def __reduce__(self):
        return (Path.touch, (self.marker,))


def _raw(trained_run: Path) -> dict:
    return torch.load(trained_run / "checkpoints" / "last.ckpt", map_location="cpu", weights_only=True)


def test_reads_weights_and_hparams_with_weights_only(trained_run):
    ckpt = load_checkpoint(trained_run / "checkpoints" / "last.ckpt")
    assert ckpt.hparams["visual_feat_dim"] == 64
    assert "model.shared.weight" in ckpt.state_dict and "lm_head.weight" in ckpt.state_dict
    assert isinstance(ckpt.global_step, int) and ckpt.global_step > 0


def test_pickled_objects_are_refused_not_executed(trained_run, tmp_path):
    raw = _raw(trained_run)
    marker = tmp_path / "code-ran"
    raw["hyper_parameters"]["extra"] = Payload(marker)
    torch.save(raw, tmp_path / "evil.ckpt")
    with pytest.raises(CheckpointError, match=r"weights_only=True"):
        load_checkpoint(tmp_path / "evil.ckpt")
    assert not marker.exists()


def test_a_plain_state_dict_is_not_a_module_checkpoint(trained_run, tmp_path):
    torch.save(_raw(trained_run)["state_dict"], tmp_path / "weights.pt")
    with pytest.raises(CheckpointError, match="not a Lightning checkpoint of mmsum's ClipBartModule"):
        load_checkpoint(tmp_path / "weights.pt")
    (tmp_path / "junk.ckpt").write_bytes(b"not a checkpoint")
    with pytest.raises(CheckpointError, match="not a readable torch checkpoint"):
        load_checkpoint(tmp_path / "junk.ckpt")


def test_mismatched_hparams_fail_with_the_shapes(trained_run, tmp_path):
    raw = _raw(trained_run)
    raw["hyper_parameters"]["visual_feat_dim"] = 32
    torch.save(raw, tmp_path / "mismatch.ckpt")
    with pytest.raises(
        CheckpointError, match=r"image_projection.weight: checkpoint \(64, 64\) vs model \(64, 32\)"
    ):
        export_checkpoint(tmp_path / "mismatch.ckpt", tmp_path / "out")
    assert not (tmp_path / "out").exists()  # nothing half-written


def test_run_dir_errors(trained_run, tmp_path):
    with pytest.raises(CheckpointError, match="no checkpoint or run directory"):
        resolve_checkpoint(tmp_path / "missing")
    run = tmp_path / "run"
    (run / "checkpoints").mkdir(parents=True)
    shutil.copy(trained_run / "checkpoints" / "last.ckpt", run / "checkpoints" / "last.ckpt")
    with pytest.raises(CheckpointError, match="--checkpoint last"):
        resolve_checkpoint(run)
    assert resolve_checkpoint(run, "last").name == "last.ckpt"
    for name in ("best-step2.ckpt", "best-step4.ckpt"):
        (run / "checkpoints" / name).write_bytes(b"")
    with pytest.raises(CheckpointError, match="several best checkpoints"):
        resolve_checkpoint(run)


def test_refuses_to_overwrite_a_non_empty_folder(trained_run, tmp_path):
    (tmp_path / "out").mkdir()
    (tmp_path / "out" / "keep.txt").write_text("x")
    with pytest.raises(FileExistsError, match="--overwrite"):
        export_checkpoint(trained_run, tmp_path / "out")
    assert (tmp_path / "out" / "keep.txt").read_text() == "x"
