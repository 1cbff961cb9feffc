"""What each built-in workload accepts as hyper-parameters, checked without building it.

Plain data and one check, importing nothing heavy: ``psched submit`` validates a job file
with it before sending (:mod:`ray_cluster.workloads.jobspec`), and the service again before
deciding.
:mod:`ray_cluster.workloads.builtin` re-exports every name here; a test keeps :data:`HPARAMS` equal
to the workloads' fields and :func:`builtin_workloads` to its registry.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass
from typing import Any

__all__ = ["DATASETS", "HPARAMS", "Param", "builtin_workloads", "check_hparams"]

DATASETS: tuple[str, ...] = ("digits", "digits-hard")  #: the built-in data sets


@dataclass(frozen=True, kw_only=True)
class Param:
    """What one hyper-parameter of a built-in workload accepts."""

    kind: type  #: int, float or str
    least: float | None = None  #: smallest number accepted
    most: float | None = None  #: largest number accepted
    choices: tuple[str, ...] = ()  #: the strings accepted (str only; empty = pattern)
    pattern: str = ""  #: regular expression a string must match in full (str only)


#: Hyper-parameters of every data set (bounds: the built data set stays under 50 MB).
_DATA_PARAMS: dict[str, Param] = {
    "dataset": Param(kind=str, choices=DATASETS),
    "split_seed": Param(kind=int, least=0, most=2**32 - 1),
    "copies": Param(kind=int, least=1, most=64),  # 1,348 x 64 images of 64 float64: 44 MB
    "noise": Param(kind=float, least=0.0, most=10.0),
}
#: Where a PyTorch workload trains (a worker actor trains on the device Ray assigned it).
_DEVICE = Param(kind=str, pattern=r"auto|cpu|cuda(:[0-9]{1,2})?")
#: The hyper-parameters each built-in workload accepts: name -> what it accepts. Checked at
#: submit (:func:`check_hparams`), before anything is built; kept equal to the workloads'
#: fields by a test. Hidden units at most 4096 (under 300,000 parameters on digits).
HPARAMS: dict[str, dict[str, Param]] = {
    "softmax": {**_DATA_PARAMS, "hidden": Param(kind=int, least=0, most=0),
                "activation": Param(kind=str, choices=("relu", "tanh"))},
    "mlp": {**_DATA_PARAMS, "hidden": Param(kind=int, least=0, most=4096),
            "activation": Param(kind=str, choices=("relu", "tanh"))},
    "torch-mlp": {**_DATA_PARAMS, "hidden": Param(kind=int, least=1, most=4096),
                  "device": _DEVICE},
    # at most 256 channels and 2048 hidden units: about 20 million parameters (81 MB)
    "torch-cnn": {**_DATA_PARAMS, "channels": Param(kind=int, least=1, most=256),
                  "hidden": Param(kind=int, least=1, most=2048), "device": _DEVICE},
    # at most 768 wide and 12 blocks of context 1024: about 86 million parameters (345 MB)
    "torch-lm": {"d_model": Param(kind=int, least=8, most=768),
                 "layers": Param(kind=int, least=1, most=12),
                 "heads": Param(kind=int, least=1, most=16),
                 "context": Param(kind=int, least=8, most=1024),
                 "corpus_mb": Param(kind=float, least=0.25, most=64.0), "device": _DEVICE},
}


def check_hparams(workload: str, hparams: Any, where: Any = None) -> None:
    """Refuse hyper-parameters a built-in ``workload`` does not accept (:data:`HPARAMS`).

    ``where`` is a :class:`psched.core.limits.Where` naming the file and lines; import-path
    workloads declare no schema here, so only the shape (a table) is checked for them.

    Raises
    ------
    InputError
        ``hparams.<key>``: unknown key, wrong type, a number out of range, a string not among
        the choices; the value is echoed shortened.
    """
    from psched.core.limits import Where

    where = where if where is not None else Where()
    if not isinstance(hparams, dict):
        raise where.error("hparams", "expected a table", hparams)
    schema = HPARAMS.get(workload)
    if schema is None:
        return
    for key, value in hparams.items():
        param = schema.get(key)
        if param is None:
            raise where.error(f"hparams.{str(key)[:40]}", f"unknown hyper-parameter of "
                              f"{workload!r} (known: {', '.join(sorted(schema))})")
        problem = _param_problem(param, value)
        if problem:
            raise where.error(f"hparams.{key}", problem, value)


def _param_problem(param: Param, value: Any) -> str:
    """Why ``value`` is not accepted by ``param`` ("" if it is)."""
    if param.kind is str:
        if not isinstance(value, str):
            return "expected a string"
        if param.choices and value not in param.choices:
            return f"expected one of {', '.join(param.choices)}"
        if param.pattern and not re.fullmatch(param.pattern, value):
            return f"expected a string matching {param.pattern}"
        return ""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return f"expected {'an integer' if param.kind is int else 'a number'}"
    if param.kind is int and not isinstance(value, int):
        return "expected an integer"
    if not math.isfinite(value) or (param.least is not None and value < param.least) or \
            (param.most is not None and value > param.most):
        return f"must be in [{param.least:g}, {param.most:g}]"
    return ""


def builtin_workloads() -> list[str]:
    """The built-in workloads' names (:func:`ray_cluster.workloads.builtin.available_workloads`
    without an import path)."""
    return sorted(HPARAMS)
