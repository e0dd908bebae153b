"""Lightning callback: export the best checkpoint to an HF folder (and optionally push) when fit ends."""

from __future__ import annotations

import logging
from pathlib import Path

import lightning as L

log = logging.getLogger(__name__)


class HubExportCallback(L.Callback):
    """On `fit` end, on global rank 0 only, export the best (or last) checkpoint.

    Args:
        output_dir: where the HF folder goes (default: `<checkpoint dir>/../hf_export`).
        which: `best` (the ModelCheckpoint's best_model_path) or `last`.
        push_to_hub: a repo id to upload to after exporting, or None.
        private / revision: passed to the push.
        **export_kwargs: more `export_checkpoint` arguments (license, datasets, clip_pretrained...).

    The run's report.json is written after testing, i.e. after this callback runs, so the card of
    this export has no test results; re-run `mmsum-export RUN_DIR` after testing to add them.
    """

    def __init__(
        self,
        output_dir: str | None = None,
        which: str = "best",
        push_to_hub: str | None = None,
        private: bool = True,
        revision: str | None = None,
        **export_kwargs,
    ):
        if which not in ("best", "last"):
            raise ValueError(f"which must be 'best' or 'last', not {which!r}")
        self.output_dir = output_dir
        self.which = which
        self.push_to_hub = push_to_hub
        self.private = private
        self.revision = revision
        self.export_kwargs = export_kwargs
        self.exported_to: Path | None = None

    def _checkpoint(self, trainer: L.Trainer) -> Path | None:
        callback = trainer.checkpoint_callback
        if callback is None:
            return None
        path = getattr(callback, "best_model_path", "") if self.which == "best" else ""
        path = path or getattr(callback, "last_model_path", "")
        return Path(path) if path and Path(path).is_file() else None

    def on_fit_end(self, trainer: L.Trainer, pl_module: L.LightningModule) -> None:
        if not trainer.is_global_zero:
            return
        checkpoint = self._checkpoint(trainer)
        if checkpoint is None:
            log.warning("HubExportCallback: no %s checkpoint was saved; nothing exported", self.which)
            return
        from mmsum.hub.export import export_checkpoint
        from mmsum.hub.push import push_folder

        output_dir = Path(self.output_dir) if self.output_dir else checkpoint.parent.parent / "hf_export"
        result = export_checkpoint(
            checkpoint, output_dir, repo_id=self.push_to_hub, overwrite=True, **self.export_kwargs
        )
        self.exported_to = result.output_dir
        if self.push_to_hub:
            push_folder(result.output_dir, self.push_to_hub, private=self.private, revision=self.revision)
