"""Shared pieces of the scale-out tests: tiny demo settings (the subprocess runner is tests.helpers)."""

from __future__ import annotations

# A few optimizer steps, a validation pass mid-way, an odd number of eval examples so that a
# padding DistributedSampler (2 ranks) would count one example twice and shift the means.
TINY = [
    "+experiment=demo",
    "trainer.max_steps=4",
    "trainer.val_check_interval=2",
    "trainer.log_every_n_steps=1",
    "data.limit_train_examples=32",
    "data.limit_eval_examples=5",
    "callbacks.rich_progress_bar=null",
]
