"""Export trained CLIP-BART checkpoints as Hugging Face folders (with a model card) and push them."""

from mmsum.hub.checkpoint import CheckpointError, load_checkpoint, resolve_checkpoint
from mmsum.hub.export import ExportResult, build_model, export_checkpoint
from mmsum.hub.push import PushError, push_folder

__all__ = [
    "CheckpointError",
    "ExportResult",
    "PushError",
    "build_model",
    "export_checkpoint",
    "load_checkpoint",
    "push_folder",
    "resolve_checkpoint",
]
