"""Turn the errors a user can fix (missing data, wrong paths, mismatched features) into one line."""

from __future__ import annotations

import sys
from collections.abc import Iterator
from contextlib import contextmanager

from mmsum.data.prepared import PreparedSplitError
from mmsum.scoring.encoders import EncoderLoadError
from mmsum.training.callbacks import CheckpointMismatchError

USER_ERRORS = (PreparedSplitError, EncoderLoadError, CheckpointMismatchError, FileNotFoundError)


@contextmanager
def user_errors_as_messages() -> Iterator[None]:
    """Print `error: <message>` and exit 1 instead of a traceback for errors the user can fix."""
    try:
        yield
    except USER_ERRORS as e:
        print(f"error: {e}", file=sys.stderr)
        raise SystemExit(1) from None
