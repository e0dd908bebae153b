"""Multi-process training that stays correct under Hydra (single runs, `-m` sweeps, SLURM).

Lightning's `strategy=ddp` starts ranks > 0 by re-running `sys.argv`. Under Hydra each of those
children composes its own config and makes its own timestamped run dir, and under `-m` it starts a
whole new sweep (Lightning #11300, Hydra #2070). Here rank 0 starts the other ranks itself, on the
job's *resolved* config file, with `LOCAL_RANK` set so that Lightning believes the processes were
created externally and relaunches nothing. On SLURM (one task per device) SLURM creates the ranks
and none of this is used.

Evaluation is sharded without padding: Lightning's DistributedSampler repeats examples to even out
the last batch, which changes ROUGE means; `UnrepeatedDistributedSampler` gives every example to
exactly one rank, and the torchmetrics sum/count states then add up to the single-process numbers.
"""

from __future__ import annotations

import contextlib
import logging
import os
import signal
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path

import lightning as L
import torch
from lightning.pytorch.overrides.distributed import UnrepeatedDistributedSampler
from lightning.pytorch.strategies.launchers import _SubprocessScriptLauncher
from omegaconf import DictConfig, OmegaConf
from torch.utils.data import DataLoader

log = logging.getLogger("mmsum.distributed")

# Ranks > 0 read the parent's resolved config from this file (see mmsum.cli.train.rank_main).
RANK_CONFIG_ENV = "MMSUM_RANK_CONFIG"
# Set by us or by Lightning's DDP setup; a leftover MASTER_PORT or LOCAL_RANK would make the next
# job of a sequential sweep reuse a dead rendezvous or skip launching its ranks.
DIST_ENV_VARS = (
    "MASTER_ADDR",
    "MASTER_PORT",
    "WORLD_SIZE",
    "RANK",
    "LOCAL_RANK",
    "NODE_RANK",
    RANK_CONFIG_ENV,
)
INTERACTIVE_SLURM_JOBS = ("bash", "interactive")


class DistributedConfigError(ValueError):
    """A process layout that cannot work (said in one message instead of a hang)."""


@dataclass
class _Launched:
    children: list[subprocess.Popen] = field(default_factory=list)
    config_file: Path | None = None


_launched: _Launched | None = None


def is_rank_zero() -> bool:
    """Rank 0 before the process group exists: every rank variable that is set must be 0."""
    if torch.distributed.is_available() and torch.distributed.is_initialized():
        return torch.distributed.get_rank() == 0
    names = ("RANK", "SLURM_PROCID", "LOCAL_RANK", "NODE_RANK", "GROUP_RANK")
    return all(int(os.environ.get(name, "0")) == 0 for name in names)


def in_slurm_batch_job() -> bool:
    return "SLURM_NTASKS" in os.environ and os.environ.get("SLURM_JOB_NAME") not in INTERACTIVE_SLURM_JOBS


def would_relaunch_argv(trainer: L.Trainer) -> bool:
    """True when Lightning would start ranks > 0 by re-running this process's command line."""
    launcher = trainer.strategy.launcher
    if not isinstance(launcher, _SubprocessScriptLauncher):
        return False
    if launcher.cluster_environment.creates_processes_externally:
        return False  # SLURM, torchelastic, or a rank we started: nothing is relaunched
    if in_slurm_batch_job():
        # Lightning only relaunches inside a SLURM job when SLURM_NTASKS != devices x nodes.
        raise DistributedConfigError(
            f"SLURM started {os.environ['SLURM_NTASKS']} task(s) but the trainer wants "
            f"{trainer.num_devices} device(s) x {trainer.num_nodes} node(s); SLURM must start one task "
            "per device (hydra/launcher=slurm sets tasks_per_node=${trainer.devices} and "
            "nodes=${trainer.num_nodes}; with plain sbatch use --ntasks-per-node=<devices>)"
        )
    return True


def launch_other_ranks(cfg: DictConfig, trainer: L.Trainer) -> None:
    """Make this process local rank 0 and start local ranks 1..devices-1 on the resolved `cfg`."""
    global _launched
    n_local = trainer.num_devices
    os.environ.setdefault("MASTER_ADDR", "127.0.0.1")
    os.environ.setdefault("MASTER_PORT", str(_free_port()))
    os.environ.setdefault("NODE_RANK", "0")
    os.environ["WORLD_SIZE"] = str(n_local * trainer.num_nodes)
    os.environ["LOCAL_RANK"] = "0"

    fd, name = tempfile.mkstemp(prefix="mmsum-rank-config-", suffix=".yaml")
    with os.fdopen(fd, "w") as f:
        f.write(OmegaConf.to_yaml(cfg, resolve=True))
    _launched = _Launched(config_file=Path(name))
    for local_rank in range(1, n_local):
        env = {**os.environ, "LOCAL_RANK": str(local_rank), RANK_CONFIG_ENV: name}
        command = [sys.executable, "-m", "mmsum.cli.train"]
        _launched.children.append(subprocess.Popen(command, env=env, cwd=os.getcwd()))
    log.info("started local ranks 1..%d (pids %s)", n_local - 1, [c.pid for c in _launched.children])
    _watch_children(_launched.children)


def shard_eval_without_padding(datamodule: L.LightningDataModule) -> None:
    """Give validation/test loaders a non-padding distributed sampler once a process group exists.

    Lightning leaves loaders whose sampler is already a DistributedSampler alone, so training keeps
    its (shuffled, padded: harmless for a loss) sharding while evaluation counts every example once."""
    for hook in ("val_dataloader", "test_dataloader"):
        setattr(datamodule, hook, _unpadded(getattr(datamodule, hook)))


def _unpadded(make_loader: Callable[[], DataLoader]) -> Callable[[], DataLoader]:
    def loader() -> DataLoader:
        base = make_loader()
        if not (torch.distributed.is_available() and torch.distributed.is_initialized()):
            return base
        if torch.distributed.get_world_size() == 1:
            return base
        return DataLoader(
            base.dataset,
            batch_size=base.batch_size,
            sampler=UnrepeatedDistributedSampler(base.dataset, shuffle=False),
            num_workers=base.num_workers,
            collate_fn=base.collate_fn,
            persistent_workers=base.persistent_workers,
            pin_memory=base.pin_memory,
        )

    return loader


@contextlib.contextmanager
def job_scope() -> Iterator[None]:
    """One training job: on exit, reap our ranks and undo every piece of process-global state."""
    saved = {name: os.environ.get(name) for name in DIST_ENV_VARS}
    failed = True
    try:
        yield
        failed = False
    finally:
        try:
            _reap_children(kill=failed)
        finally:
            _destroy_process_group()
            _restore_env(saved)
            _finish_wandb()


def _reap_children(kill: bool) -> None:
    global _launched
    launched, _launched = _launched, None
    if launched is None:
        return
    for child in launched.children:
        if kill and child.poll() is None:
            child.terminate()
    codes = [child.wait() for child in launched.children]
    if launched.config_file is not None:
        launched.config_file.unlink(missing_ok=True)
    if not kill and any(codes):
        raise RuntimeError(f"a DDP rank failed (exit codes of ranks 1..: {codes}); see its log above")


def _watch_children(children: list[subprocess.Popen]) -> None:
    """If a rank dies, the others would wait forever in a collective: stop this process too."""
    main_pid = os.getpid()

    def watch() -> None:
        while True:
            codes = [child.poll() for child in children]
            if all(code is not None for code in codes):
                return
            if any(code for code in codes):
                log.error("a DDP rank exited with %s; stopping the run", codes)
                for child in children:
                    if child.poll() is None:
                        child.terminate()
                os.kill(main_pid, signal.SIGTERM)
                return
            time.sleep(1.0)

    threading.Thread(target=watch, name="mmsum-rank-watch", daemon=True).start()


def _destroy_process_group() -> None:
    if torch.distributed.is_available() and torch.distributed.is_initialized():
        torch.distributed.destroy_process_group()


def _restore_env(saved: dict[str, str | None]) -> None:
    for name, value in saved.items():
        if value is None:
            os.environ.pop(name, None)
        else:
            os.environ[name] = value


def _finish_wandb() -> None:
    wandb = sys.modules.get("wandb")
    if wandb is not None and getattr(wandb, "run", None) is not None:
        wandb.finish()


def _free_port() -> int:
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]
