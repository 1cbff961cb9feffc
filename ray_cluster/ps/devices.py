"""Which device a worker actor trains on: exactly the GPUs Ray assigned it, else the CPU.

Ray gives an actor created with ``num_gpus=k`` (the job's worker demand, see
:class:`ray_cluster.runtime.executor.RayPlacer`) ``k`` GPUs of its node, names them in
``ray.get_gpu_ids()`` and sets ``CUDA_VISIBLE_DEVICES`` to them before the actor's code runs,
so CUDA in that process sees those GPUs only, renumbered from 0. An actor with no GPU sees
``CUDA_VISIBLE_DEVICES`` untouched (every GPU of the node), so :func:`claim_devices` hides
them all (``CUDA_VISIBLE_DEVICES=""``, before CUDA is initialised): a CPU worker never
touches a GPU that Ray gave to another actor. PS shards ask for no GPU unless the job's PS
demand does, and update on the CPU either way.

The device a workload trains on (:func:`placed_workload`):

* a PyTorch workload (one with a ``device`` field) on a worker with GPUs trains on the first
  GPU Ray assigned (``cuda:i``, ``i`` its position in ``CUDA_VISIBLE_DEVICES``); with several,
  the others stay reserved and idle (the built-in models are single-device);
* ``device = "cpu"`` is honoured (a CPU reference run on a GPU worker);
* any other ``device`` (``auto``, ``cuda``, ``cuda:1``) is replaced by the assigned one, so a
  job never trains on a GPU it was not given;
* where Ray assigned GPUs that CUDA cannot see (Ray's fake GPUs, ``ray start --num-gpus`` on a
  machine without CUDA) the worker trains on the CPU through the same path, and says so;
* a workload without a ``device`` field (the numpy ones, a user's own) is left as it is: on
  a worker with GPUs it sees only those (the numpy ones leave them idle), and its device is
  reported as ``"unset"``; on a worker without GPUs it sees none.

:class:`DeviceInfo` is what a worker reports (:meth:`ray_cluster.ps.actors.Worker.device`)
and a job's runtime logs per slot.
"""

from __future__ import annotations

import dataclasses
import os
import platform
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

__all__ = ["DeviceInfo", "claim_devices", "device_index", "placed_workload"]

_VISIBLE = "CUDA_VISIBLE_DEVICES"


@dataclass(frozen=True, kw_only=True)
class DeviceInfo:
    """Where one worker actor trains."""

    node_id: str                #: Ray node id of the actor
    gpu_ids: tuple[str, ...]    #: GPUs Ray assigned the actor (its ids on the node)
    visible: str | None         #: ``CUDA_VISIBLE_DEVICES`` in the actor's process
    device: str                 #: torch device trained on: ``"cuda:0"``, ``"cpu"`` or ``"unset"``
    name: str                   #: the GPU's name, or the CPU's kind with why (fake GPU, numpy)
    memory_gb: float            #: the GPU's memory, GB (0 on the CPU)
    pid: int                    #: the actor's process id

    def line(self) -> str:
        """Short form for a job's log: ``cuda:0 NVIDIA H100 (79.1 GB) gpu 3 node 1a2b3c4d``."""
        mem = f" ({self.memory_gb:.1f} GB)" if self.memory_gb else ""
        gpus = f" gpu {','.join(self.gpu_ids)}" if self.gpu_ids else ""
        return f"{self.device} {self.name}{mem}{gpus} node {self.node_id[:8]}"


def device_index(gpu_ids: Sequence[str], visible: str | None) -> int:
    """CUDA index of the first assigned GPU in a process whose ``CUDA_VISIBLE_DEVICES`` is
    ``visible``: its position there (Ray's setting: 0), or the id itself when nothing was
    set (Ray told not to set it).

    Raises
    ------
    RuntimeError
        If ``visible`` is set and does not list the assigned GPU (the process would train
        on another actor's GPU).
    """
    first = str(gpu_ids[0])
    if visible is None:
        return int(first)
    listed = [v.strip() for v in visible.split(",") if v.strip()]
    if first not in listed:
        raise RuntimeError(f"Ray assigned GPU {first} but {_VISIBLE}={visible!r}")
    return listed.index(first)


def claim_devices(gpu_ids: Sequence[Any]) -> tuple[tuple[str, ...], str | None]:
    """In a worker actor, before any CUDA use: hide every GPU when Ray assigned none.

    Returns the assigned ids (as strings) and ``CUDA_VISIBLE_DEVICES`` as the process now
    has it.
    """
    ids = tuple(str(g) for g in gpu_ids)
    if not ids:
        os.environ[_VISIBLE] = ""  # CUDA then sees no GPU: never one given to another actor
    return ids, os.environ.get(_VISIBLE)


def _cpu_name(why: str) -> str:
    return f"{platform.machine()} ({why})" if why else platform.machine()


def placed_workload(workload: Any, gpu_ids: Sequence[str], visible: str | None,
                    node_id: str) -> tuple[Any, DeviceInfo]:
    """``workload`` set to train on this actor's device (module rules), and that device.

    Imports torch only for a PyTorch workload (one with a ``device`` field) given a GPU.
    """
    device, name, memory_gb = _choose(workload, gpu_ids, visible)
    if device != getattr(workload, "device", device):
        workload = dataclasses.replace(workload, device=device)
    return workload, DeviceInfo(node_id=node_id, gpu_ids=tuple(gpu_ids), visible=visible,
                                device=device, name=name, memory_gb=memory_gb,
                                pid=os.getpid())


def _choose(workload: Any, gpu_ids: Sequence[str],
            visible: str | None) -> tuple[str, str, float]:
    """``(device, name, memory_gb)`` the workload trains on (module rules)."""
    gpus = ",".join(gpu_ids)
    fields = dataclasses.fields(workload) if dataclasses.is_dataclass(workload) else ()
    if "device" not in {f.name for f in fields}:  # the numpy ones, a user's own
        if gpus:
            return "unset", f"workload without a device field; GPU {gpus} visible to it", 0.0
        return "cpu", _cpu_name(""), 0.0
    if workload.device == "cpu" or not gpu_ids:
        return "cpu", _cpu_name("device=cpu asked" if gpus else ""), 0.0
    import torch

    if not torch.cuda.is_available():
        return "cpu", _cpu_name(f"GPU {gpus} assigned, CUDA not available"), 0.0
    index = device_index(gpu_ids, visible)
    props = torch.cuda.get_device_properties(index)
    return f"cuda:{index}", str(props.name), float(props.total_memory) / 2**30
