"""Find and safely read the Lightning checkpoint of a training run.

Checkpoints are read with `torch.load(weights_only=True)`: a checkpoint is a file users pass
around, and unpickling arbitrary objects from one would run arbitrary code. Only a few plain
types that Lightning may put in `hyper_parameters` are allowlisted; anything else is refused
with a message that names it, never retried with `weights_only=False`.
"""

from __future__ import annotations

import json
import logging
import pathlib
import pickle
import re
import zipfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import torch

log = logging.getLogger(__name__)

MODEL_PREFIX = "model."  # ClipBartModule keeps the HF model under `self.model`
REQUIRED_HPARAMS = ("bart_name_or_path", "visual_feat_dim")


class CheckpointError(ValueError):
    """A checkpoint that cannot be exported: missing, unsafe, not ours, or not matching its config."""


@dataclass
class LoadedCheckpoint:
    path: Path
    state_dict: dict[str, torch.Tensor]  # the HF model's weights, `model.` prefix removed
    hparams: dict[str, Any]
    global_step: int | None = None
    epoch: int | None = None
    ignored_keys: list[str] = field(default_factory=list)


def _safe_globals() -> list[Any]:
    """Types allowed in a checkpoint besides tensors and builtins: all are inert data holders."""
    allowed: list[Any] = [
        pathlib.PosixPath,
        pathlib.WindowsPath,
        pathlib.PurePosixPath,
        pathlib.PureWindowsPath,
    ]
    try:  # Lightning saves hparams as a plain dict today; older versions used AttributeDict.
        from lightning.fabric.utilities.data import AttributeDict

        allowed.append(AttributeDict)
    except ImportError:  # pragma: no cover - lightning is a dependency, but the loader does not need it
        pass
    return allowed


def _unpickler_reason(error: Exception) -> str:
    """The line of torch's message that names the refused type, without its advice to disable the check."""
    match = re.search(r"WeightsUnpickler error:\s*(.+?)(?:\n\n|$)", str(error), flags=re.S)
    reason = match.group(1).strip() if match else str(error).splitlines()[0]
    return reason.rstrip(".")


def resolve_checkpoint(source: str | Path, which: str = "best") -> Path:
    """The checkpoint file for `source`: a `.ckpt` file, or a run dir (its best, or `last` on request)."""
    if which not in ("best", "last"):
        raise ValueError(f"which must be 'best' or 'last', not {which!r}")
    path = Path(source)
    if path.is_file():
        return path
    if not path.is_dir():
        raise CheckpointError(f"no checkpoint or run directory at {path}")
    ckpt_dir = path / "checkpoints" if (path / "checkpoints").is_dir() else path
    if which == "last":
        last = ckpt_dir / "last.ckpt"
        if not last.is_file():
            raise CheckpointError(f"{path}: no last.ckpt in {ckpt_dir}")
        return last
    best = sorted(ckpt_dir.glob("best*.ckpt"))
    if len(best) == 1:
        return best[0]
    if len(best) > 1:
        # save_top_k > 1 keeps several; the run's report names the best one.
        recorded = (read_json(path / "report.json") or {}).get("best_checkpoint")
        for candidate in best:
            if recorded and Path(recorded).name == candidate.name:
                return candidate
        names = ", ".join(p.name for p in best)
        raise CheckpointError(
            f"{path}: several best checkpoints ({names}) and report.json does not say which; pass one"
        )
    hint = " (pass --checkpoint last to export last.ckpt)" if (ckpt_dir / "last.ckpt").is_file() else ""
    raise CheckpointError(f"{path}: no best*.ckpt in {ckpt_dir}{hint}")


def run_dir_of(checkpoint: Path) -> Path | None:
    """The run dir a checkpoint belongs to (`<run>/checkpoints/x.ckpt`), if it looks like one."""
    parent = checkpoint.resolve().parent
    run = parent.parent if parent.name == "checkpoints" else parent
    return run if (run / "report.json").is_file() or (run / "config_resolved.yaml").is_file() else None


def read_json(path: Path) -> dict[str, Any] | None:
    if not path.is_file():
        return None
    with open(path, encoding="utf-8") as f:
        return json.load(f)


def load_checkpoint(path: str | Path) -> LoadedCheckpoint:
    """Read a ClipBartModule checkpoint's model weights and hyperparameters without unsafe unpickling."""
    path = Path(path)
    if not path.is_file():
        raise CheckpointError(f"checkpoint not found: {path}")
    if not zipfile.is_zipfile(path):  # torch.save has written zip archives since torch 1.6
        raise CheckpointError(f"{path}: not a readable torch checkpoint (not a torch.save zip archive)")
    try:
        with torch.serialization.safe_globals(_safe_globals()):
            raw = torch.load(path, map_location="cpu", weights_only=True)
    except pickle.UnpicklingError as e:
        raise CheckpointError(
            f"{path}: refused by torch.load(weights_only=True), which only reads tensors and plain data: "
            f"{_unpickler_reason(e)}. "
            "mmsum does not unpickle arbitrary objects; re-save the checkpoint with plain-Python hyperparameters."
        ) from e
    except (RuntimeError, EOFError, OSError) as e:
        raise CheckpointError(f"{path}: not a readable torch checkpoint ({type(e).__name__}: {e})") from e
    if not isinstance(raw, dict) or "state_dict" not in raw or "hyper_parameters" not in raw:
        keys = sorted(raw)[:8] if isinstance(raw, dict) else type(raw).__name__
        raise CheckpointError(
            f"{path}: not a Lightning checkpoint of mmsum's ClipBartModule (needs state_dict and hyper_parameters; "
            f"found {keys})"
        )
    hparams = dict(raw["hyper_parameters"])
    missing = [k for k in REQUIRED_HPARAMS if hparams.get(k) is None]
    if missing:
        raise CheckpointError(f"{path}: hyper_parameters lack {missing}: not a ClipBartModule checkpoint")
    state_dict, ignored = {}, []
    for key, tensor in raw["state_dict"].items():
        if key.startswith(MODEL_PREFIX):
            state_dict[key[len(MODEL_PREFIX) :]] = tensor
        else:
            ignored.append(key)
    if not state_dict:
        raise CheckpointError(
            f"{path}: no `{MODEL_PREFIX}*` weights in state_dict: not a ClipBartModule checkpoint"
        )
    if ignored:
        log.info(
            "%s: %d non-model entries left out of the export (%s ...)", path.name, len(ignored), ignored[0]
        )
    return LoadedCheckpoint(
        path=path,
        state_dict=state_dict,
        hparams=hparams,
        global_step=raw.get("global_step"),
        epoch=raw.get("epoch"),
        ignored_keys=ignored,
    )
