"""The exact test before a re-pack's pulls (:func:`psched.policies.oasis_rp.repack.gain_bound`):
whenever it says the pulls cannot make the re-pack pay, the full re-pack (pulls run) is undone,
and whole runs with it equal runs without it.
"""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from strategies import Instance, instances

from psched.core.records import RunResult
from psched.core.simulator import simulate
from psched.policies import make_policy
from psched.policies.oasis_rp import repack as repack_module
from psched.policies.oasis_rp.promises import completion_utility
from psched.policies.oasis_rp.repack import gain_bound
from psched.traces.synth import oasis_paper_cluster, oasis_paper_jobs

RUNS = settings(max_examples=10, deadline=None,
                suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])


def _decisions(res: RunResult) -> tuple[object, ...]:
    return (res.allocations, [(j, r.admitted, r.promised, r.completion, r.reason)
                              for j, r in res.records.items()])


def _checked(mp: pytest.MonkeyPatch) -> list[int]:
    """Every re-pack with the test's verdict taken before its pulls but the pulls run
    anyway; each re-pack it calls vain is checked (undone whatever the pulls found).
    Returns the list the number of vain verdicts goes into."""
    seen = [0]
    state: dict[str, Any] = {}
    repack = repack_module._repack

    def vain(st: Any, job: Any, t: int, base: float, found: Any, moved: list[str],
             saved: dict[str, Any]) -> bool:
        bound = gain_bound(completion_utility(job, found.completion), base, moved, st.jobs,
                           saved, t)
        state.update(vain=bound <= 0)
        return False  # the pulls run

    def cands(st: Any, job: Any, t: int, base: float, cands: list[str]) -> Any:
        state.clear()
        got = repack(st, job, t, base, cands)
        if state.get("vain"):
            seen[0] += 1
            assert not got.schedule  # the full re-pack was undone
        return got

    mp.setattr(repack_module, "_pulls_vain", vain)
    mp.setattr(repack_module, "_repack", cands)
    return seen


def _paper(n_jobs: int, seed: int) -> tuple[list[Any], Any]:
    specs, _ = oasis_paper_jobs(n_jobs, seed=seed, slots=120)
    return specs, oasis_paper_cluster(seed=seed)


@pytest.mark.parametrize(("n_jobs", "seed"), [(60, 0), (100, 2), (150, 1)])
def test_every_re_pack_the_test_calls_vain_is_undone_with_its_pulls_run(
        n_jobs: int, seed: int, monkeypatch: pytest.MonkeyPatch) -> None:
    specs, cluster = _paper(n_jobs, seed)
    seen = _checked(monkeypatch)
    simulate(specs, cluster, make_policy("oasis-rp", certificate=False), 120, seed=0)
    assert seen[0] > 0  # the test acted on this instance


@pytest.mark.parametrize(("n_jobs", "seed"), [(60, 0), (100, 0)])
def test_whole_runs_with_the_test_equal_runs_without_it(n_jobs: int, seed: int) -> None:
    specs, cluster = _paper(n_jobs, seed)
    runs = []
    for skip in (True, False):
        with pytest.MonkeyPatch.context() as mp:
            if not skip:
                mp.setattr(repack_module, "_pulls_vain", lambda *args: False)
            runs.append(simulate(specs, cluster, make_policy("oasis-rp", certificate=False),
                                 120, seed=0))
    assert runs[0].report["repack_prechecked"] > 0
    assert runs[1].report["repack_prechecked"] == 0
    assert _decisions(runs[0]) == _decisions(runs[1])
    for key in ("repack_tried", "repack_kept", "queue_admitted"):
        assert runs[0].report[key] == runs[1].report[key]


@RUNS
@given(instance=instances(max_jobs=10, max_horizon=16))
def test_the_test_never_calls_a_re_pack_vain_that_its_pulls_would_keep(
        instance: Instance) -> None:
    cluster, specs, horizon = instance
    with pytest.MonkeyPatch.context() as mp:
        _checked(mp)
        simulate(specs, cluster, make_policy("oasis-rp", certificate=False), horizon, seed=3)

