"""`mmsum-export SOURCE OUT [--push-to-hub REPO_ID]`: a trained checkpoint as a Hugging Face model folder."""

from __future__ import annotations

import argparse
import logging
import sys
from collections.abc import Sequence
from typing import Any

log = logging.getLogger("mmsum.export")


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="mmsum-export",
        description="Export a CLIP-BART Lightning checkpoint (or a run dir's best/last one) to a Hugging Face "
        "folder loadable with AutoModelForSeq2SeqLM.from_pretrained(dir, trust_remote_code=True).",
    )
    p.add_argument("source", help="a .ckpt file, or a run dir holding checkpoints/ (and report.json)")
    p.add_argument("output_dir", help="the folder to write (must be empty unless --overwrite)")
    p.add_argument(
        "--checkpoint", choices=("best", "last"), default="best", help="which checkpoint of a run dir"
    )
    p.add_argument("--base-model", help="BART config/tokenizer to use instead of the path in the checkpoint")
    p.add_argument("--tokenizer", help="tokenizer to ship (default: the base model's)")
    p.add_argument("--clip-model", help="open_clip model name for the card (default: from the run)")
    p.add_argument(
        "--clip-pretrained", help="open_clip pretrained tag or file for the card (default: from the run)"
    )
    p.add_argument("--license", help="license id for the card metadata, e.g. apache-2.0")
    p.add_argument("--dataset", action="append", dest="datasets", help="hub dataset id(s) for the card")
    p.add_argument("--overwrite", action="store_true", help="replace a non-empty output_dir")
    p.add_argument(
        "--push-to-hub", metavar="REPO_ID", help="also create REPO_ID (if needed) and upload the folder"
    )
    p.add_argument("--private", action="store_true", help="create the repo private")
    p.add_argument("--revision", help="branch to upload to (created if missing)")
    return p


def main(argv: Sequence[str] | None = None, api: Any = None) -> int:
    """Entry point; `api` replaces `HfApi()` for the push (tests pass a recorder)."""
    from mmsum.hub.checkpoint import CheckpointError
    from mmsum.hub.export import export_checkpoint
    from mmsum.hub.push import PushError, push_folder

    args = build_parser().parse_args(argv)
    if not logging.getLogger().handlers:
        logging.basicConfig(level=logging.INFO, format="%(levelname)s %(name)s: %(message)s")
    try:
        result = export_checkpoint(
            args.source,
            args.output_dir,
            which=args.checkpoint,
            base_model=args.base_model,
            tokenizer=args.tokenizer,
            repo_id=args.push_to_hub,
            clip_model=args.clip_model,
            clip_pretrained=args.clip_pretrained,
            license=args.license,
            datasets=args.datasets,
            overwrite=args.overwrite,
        )
        print(f"exported {result.checkpoint} -> {result.output_dir}: {', '.join(result.files)}")
        if args.push_to_hub:
            url = push_folder(
                result.output_dir, args.push_to_hub, private=args.private, revision=args.revision, api=api
            )
            print(f"pushed to {args.push_to_hub}: {url}")
    except (CheckpointError, PushError, FileExistsError, FileNotFoundError) as e:
        print(f"mmsum-export: error: {e}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
