"""Push through an HfApi stand-in; the token never reaches files, output or logs. CLI and callback."""

from __future__ import annotations

import logging
from pathlib import Path
from types import SimpleNamespace

import pytest

from mmsum.cli.export import main
from mmsum.hub import PushError, push_folder
from mmsum.hub.callback import HubExportCallback

TOKEN = "hf_FakeSecretToken0123456789abcdef"


class RecordingApi:
    """Records HfApi calls and what the folder held at upload time."""

    def __init__(self, fail: Exception | None = None):
        self.calls: list[tuple[str, dict]] = []
        self.uploaded: dict[str, bytes] = {}
        self.fail = fail

    def create_repo(self, repo_id, **kwargs):
        self.calls.append(("create_repo", {"repo_id": repo_id, **kwargs}))
        if self.fail:
            raise self.fail
        return f"https://huggingface.co/{repo_id}"

    def create_branch(self, repo_id, **kwargs):
        self.calls.append(("create_branch", {"repo_id": repo_id, **kwargs}))

    def upload_folder(self, **kwargs):
        self.calls.append(("upload_folder", kwargs))
        folder = Path(kwargs["folder_path"])
        self.uploaded = {str(p.relative_to(folder)): p.read_bytes() for p in folder.rglob("*") if p.is_file()}
        return SimpleNamespace(commit_url=f"https://huggingface.co/{kwargs['repo_id']}/commit/abc")


def test_cli_exports_and_pushes_without_leaking_the_token(trained_run, tmp_path, monkeypatch, capsys, caplog):
    monkeypatch.setenv("HF_TOKEN", TOKEN)
    caplog.set_level(logging.DEBUG)
    api = RecordingApi()
    out = tmp_path / "export"
    argv = [str(trained_run), str(out), "--checkpoint", "last", "--push-to-hub", "me/clip-bart"]
    rc = main([*argv, "--private", "--revision", "v1"], api=api)
    assert rc == 0
    assert [name for name, _ in api.calls] == ["create_repo", "create_branch", "upload_folder"]
    create, branch, upload = (kwargs for _, kwargs in api.calls)
    assert create == {"repo_id": "me/clip-bart", "private": True, "repo_type": "model", "exist_ok": True}
    assert branch["branch"] == "v1" and branch["exist_ok"] is True
    assert upload["revision"] == "v1" and upload["repo_id"] == "me/clip-bart"
    assert {"model.safetensors", "config.json", "README.md", "clip_bart.py"} <= set(api.uploaded)
    assert b'repo = "me/clip-bart"' in api.uploaded["README.md"]  # the card's snippet names the repo

    captured = capsys.readouterr()
    written = [p.read_bytes() for p in out.rglob("*") if p.is_file()] + list(api.uploaded.values())
    assert written and all(TOKEN.encode() not in blob for blob in written)
    assert TOKEN not in captured.out + captured.err + caplog.text
    assert "pushed to me/clip-bart" in captured.out


def test_push_errors_are_clear_and_scrubbed(tmp_path, monkeypatch, caplog):
    monkeypatch.setenv("HF_TOKEN", TOKEN)
    api = RecordingApi(fail=RuntimeError(f"401 Unauthorized for token {TOKEN}"))
    with pytest.raises(PushError) as info:
        push_folder(tmp_path, "me/repo", api=api)
    assert "me/repo" in str(info.value) and "401 Unauthorized" in str(info.value)
    assert TOKEN not in str(info.value) and info.value.__cause__ is None and info.value.__suppress_context__
    assert TOKEN not in caplog.text


def test_main_branch_is_not_created(tmp_path):
    api = RecordingApi()
    push_folder(tmp_path, "me/repo", api=api)
    assert [name for name, _ in api.calls] == ["create_repo", "upload_folder"]


def test_cli_reports_a_bad_source_as_one_line(tmp_path, capsys):
    assert main([str(tmp_path / "nope"), str(tmp_path / "out")]) == 1
    assert "mmsum-export: error: no checkpoint or run directory" in capsys.readouterr().err


def _trainer(run: Path, rank_zero: bool):
    checkpoint = SimpleNamespace(
        best_model_path=str(next((run / "checkpoints").glob("best*.ckpt"))),
        last_model_path=str(run / "checkpoints" / "last.ckpt"),
    )
    return SimpleNamespace(is_global_zero=rank_zero, checkpoint_callback=checkpoint)


def test_callback_exports_best_checkpoint_on_rank_zero_only(trained_run, tmp_path):
    other_rank = HubExportCallback(output_dir=str(tmp_path / "rank1"))
    other_rank.on_fit_end(_trainer(trained_run, rank_zero=False), None)
    assert not (tmp_path / "rank1").exists()

    callback = HubExportCallback(output_dir=str(tmp_path / "hf"))
    callback.on_fit_end(_trainer(trained_run, rank_zero=True), None)
    assert (tmp_path / "hf" / "model.safetensors").is_file()
    assert "best-step" in (tmp_path / "hf" / "README.md").read_text()


def test_hub_export_callbacks_config_composes(tmp_path):
    from hydra import compose, initialize_config_dir
    from omegaconf import OmegaConf

    from mmsum.cli.train import CONF_DIR

    with initialize_config_dir(config_dir=CONF_DIR, version_base="1.3"):
        cfg = compose(config_name="train", overrides=["callbacks=hub_export"])
    callbacks = OmegaConf.to_container(cfg.callbacks, resolve=False)
    assert "model_checkpoint" in callbacks  # the defaults stay
    assert callbacks["hub_export"]["_target_"] == "mmsum.hub.callback.HubExportCallback"
    params = {k: v for k, v in callbacks["hub_export"].items() if k not in ("_target_", "output_dir")}
    assert HubExportCallback(output_dir=str(tmp_path), **params).which == "best"
