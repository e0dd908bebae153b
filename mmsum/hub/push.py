"""Upload an exported folder to the Hugging Face hub.

The token is never handled here: `HfApi` finds it itself (`HF_TOKEN`, or the login saved by
`hf auth login`), so it cannot end up in files, logs or our error messages. Errors from the hub
are re-raised with any token-looking text scrubbed, in case a library echoes it.
"""

from __future__ import annotations

import logging
import re
from pathlib import Path
from typing import Any

log = logging.getLogger(__name__)
_TOKEN_PATTERN = re.compile(r"hf_[A-Za-z0-9]{8,}")


class PushError(RuntimeError):
    """Creating the repo or uploading failed; the message never holds the token."""


def scrub(text: str) -> str:
    """`text` with the configured token and anything shaped like an HF token replaced by ***."""
    from huggingface_hub import get_token

    token = get_token()
    if token:
        text = text.replace(token, "***")
    return _TOKEN_PATTERN.sub("hf_***", text)


def push_folder(
    folder: str | Path,
    repo_id: str,
    private: bool = False,
    revision: str | None = None,
    commit_message: str | None = None,
    api: Any = None,
) -> str:
    """Create `repo_id` if needed (exist_ok) and upload `folder` to it; returns the commit URL.

    `api` is an `HfApi` (or a stand-in with the same three methods, for tests); the default one
    authenticates from the environment or the saved login.
    """
    if api is None:
        from huggingface_hub import HfApi

        api = HfApi()
    folder = Path(folder)
    try:
        url = api.create_repo(repo_id, private=private, repo_type="model", exist_ok=True)
        if revision and revision != "main":
            api.create_branch(repo_id, branch=revision, repo_type="model", exist_ok=True)
        commit = api.upload_folder(
            repo_id=repo_id,
            folder_path=str(folder),
            repo_type="model",
            revision=revision,
            commit_message=commit_message or "Upload CLIP-BART exported by mmsum",
        )
    except Exception as e:
        # `from None`: the original exception's text is not scrubbed, so it must not reach tracebacks.
        raise PushError(
            f"pushing {folder} to {repo_id!r} failed: {scrub(f'{type(e).__name__}: {e}')}"
        ) from None
    commit_url = str(getattr(commit, "commit_url", None) or commit or url)
    log.info("pushed %s to %s (%s)", folder, repo_id, commit_url)
    return commit_url
