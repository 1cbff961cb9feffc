"""The example of a user's own training code (``examples/workloads``, docs/jobspec.md): its
job spec is refused without ``--allow-import`` and accepted with it; the class is a
:class:`Workload` the registry builds from the spec's hyper-parameters; its gradient is the
loss's (finite differences); SGD on its batches lowers the held-out loss."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from ray_cluster.runtime.types import RuntimeConfig
from ray_cluster.workloads.builtin import get_workload
from ray_cluster.workloads.data import Workload
from ray_cluster.workloads.jobspec import ImportRefused, load_jobspec

FOLDER = Path(__file__).resolve().parents[1] / "examples" / "workloads"


@pytest.fixture
def importable(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.syspath_prepend(str(FOLDER))


def test_the_example_spec_needs_the_operators_leave() -> None:
    with pytest.raises(ImportRefused, match="--allow-import"):
        load_jobspec(FOLDER / "least-squares.toml")
    spec = load_jobspec(FOLDER / "least-squares.toml", allow_import=True)
    assert spec.workload == "least_squares:LeastSquaresDigits"
    assert spec.work(30.0) >= 4  # several 30-s slots, like the examples in examples/jobs


def test_the_example_workload_trains(importable: None) -> None:
    spec = load_jobspec(FOLDER / "least-squares.toml", allow_import=True)
    wl = get_workload(spec.workload, json.loads(spec.hparams), allow_import=True)
    assert isinstance(wl, Workload)
    params = wl.init_params(0)
    assert params.dtype == np.float32 and params.shape == (650,)
    batch = next(wl.batches(wl.partition(2, 0), 32, np.random.default_rng(0)))
    _, grad = wl.gradient(params, batch)
    eps, rng = 1e-3, np.random.default_rng(1)
    for i in rng.choice(params.size, 5, replace=False):
        step = np.zeros_like(params)
        step[i] = eps
        numeric = (wl.gradient(params + step, batch)[0]
                   - wl.gradient(params - step, batch)[0]) / (2 * eps)
        assert numeric == pytest.approx(float(grad[i]), rel=2e-2, abs=1e-4)
    before = wl.evaluate(params)
    stream = wl.batches(wl.partition(1, 0), 32, np.random.default_rng(2))
    config = RuntimeConfig()  # the runtime's learning rate and momentum
    velocity = np.zeros_like(params)
    for _ in range(600):
        velocity = config.momentum * velocity + wl.gradient(params, next(stream))[1]
        params = params - np.float32(config.lr) * velocity
    after = wl.evaluate(params)
    assert after["loss"] < before["loss"] and after["accuracy"] > 0.8
