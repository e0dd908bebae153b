"""OmegaConf resolvers used by conf/ (registered once, on import)."""

from __future__ import annotations

from omegaconf import OmegaConf


def grad_accum(global_batch_size: int | None, per_device_batch: int, devices, num_nodes: int = 1) -> int:
    """Gradient accumulation that makes per-device batch x accumulation x devices x nodes = global batch."""
    if global_batch_size in (None, "null"):
        return 1
    n_devices = (
        devices if isinstance(devices, int) else (len(devices) if isinstance(devices, (list, tuple)) else 1)
    )
    per_step = int(per_device_batch) * max(int(n_devices), 1) * int(num_nodes)
    if int(global_batch_size) % per_step:
        raise ValueError(
            f"global_batch_size={global_batch_size} is not a multiple of data.batch_size x devices x nodes "
            f"= {per_device_batch} x {n_devices} x {num_nodes} = {per_step}"
        )
    return int(global_batch_size) // per_step


def slurm_gpus(accelerator: str, devices: int) -> int | None:
    """`gpus_per_node` for hydra/launcher=slurm: one GPU per task on GPU trainers, none on CPU ones."""
    return int(devices) if str(accelerator) in ("gpu", "cuda", "auto") else None


def register_resolvers() -> None:
    for name, fn in (("grad_accum", grad_accum), ("slurm_gpus", slurm_gpus)):
        if not OmegaConf.has_resolver(name):
            OmegaConf.register_new_resolver(name, fn)


register_resolvers()
