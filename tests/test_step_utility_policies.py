"""Step utilities (a trace's own values at completion times) under every policy: each runs the
5-job Chronus step sample and earns exactly the steps its completions reach; the vectorised
utilities of :mod:`psched.policies.columns` equal each job's own, bit for bit, for every kind;
the offline optimum dominates every policy on step jobs."""

from __future__ import annotations

import functools
import warnings
from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import psched
from psched.core.model import RESOURCES, Cluster, Job, JobSpec
from psched.core.records import RunResult
from psched.core.utility import ALL_KINDS, Utility, step_utility
from psched.offline.optimum import offline_optimum
from psched.policies import available_policies
from psched.policies.columns import KIND_CODE, JobColumns, step_table, utility_of
from psched.traces.clusters import cluster_from_dict
from psched.traces.detect import load_any

SAMPLE = Path(__file__).resolve().parents[1] / "traces" / "samples" / "chronus_5job_steps.csv"
_SERVER = {"cpu": 64, "memory_gb": 488, "storage_gb": 1000, "bandwidth_gbps": 50}
_PS = {"pool": "ps", "cpu": 36, "memory_gb": 60, "storage_gb": 1000, "bandwidth_gbps": 50}
#: the trace's default cluster (room for all), and one worker server of 2 or 4 GPUs, where
#: jobs queue and some finish on a later, lower step
CLUSTERS = ("sized", "gpu2", "gpu4")


def _cluster(name: str) -> Cluster | None:
    if name == "sized":
        return None
    gpu = int(name.removeprefix("gpu"))
    return cluster_from_dict({"servers": [{"pool": "worker", "gpu": gpu, **_SERVER}, _PS]})


@functools.cache
def _sample_specs() -> list[JobSpec]:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # the sample's model-name mapping note
        return load_any(SAMPLE)


@functools.cache
def _runs(cluster: str) -> tuple[dict[str, RunResult], dict[str, float]]:
    """Every policy on the sample: the runs and each policy's reported total utility."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # the sample's model-name mapping note
        res = psched.compare(SAMPLE, _cluster(cluster), policies="all")
    totals = {p: float(s["total_utility"]) for p, s in res.summary_dict["policies"].items()}
    return res.runs, totals


def _by_hand(u: Utility, d: int) -> float:
    """f(d) read off the kinds the sample holds, as the trace states them (not through
    :class:`Utility`): the first step ``(t, v)`` with ``d <= t``, else 0."""
    steps = {"step": u.steps, "deadline": ((u.target, u.value),),
             "constant": ((float("inf"), u.value),)}[u.kind]
    return next((v for t, v in steps if d <= t), 0.0)


def test_the_sample_holds_step_utilities_as_the_trace_states_them() -> None:
    specs = {s.job_id: s.utility for s in _sample_specs()}
    # expect_value_list of s1, s4, s5 (3600-s slots; times counted from submission)
    assert [v for _, v in specs["s1"].steps] == [100.0, 80.0, 50.0]
    assert [v for _, v in specs["s4"].steps] == [60.0, 30.0]
    assert specs["s5"].steps == ((3.0, 90.0), (5.0, 40.0))  # 70 falls in 40's slot: dropped
    assert {u.kind for u in specs.values()} == {"step", "deadline", "constant"}


@pytest.mark.parametrize("cluster", CLUSTERS)
@pytest.mark.parametrize("policy", available_policies())
def test_every_policy_earns_the_step_utilities_of_its_completions(policy: str,
                                                                   cluster: str) -> None:
    runs, totals = _runs(cluster)
    assert policy in runs
    recs = runs[policy].records
    want = sum(_by_hand(r.job.spec.utility, r.duration) for r in recs.values()
               if r.duration is not None)
    assert totals[policy] == want
    assert any(r.duration is not None and r.job.spec.utility.kind == "step"
               for r in recs.values())


def test_a_crowded_cluster_pays_some_step_job_a_lower_step() -> None:
    runs, _ = _runs("gpu4")
    lower = [(p, j) for p, run in runs.items() for j, r in run.records.items()
             if r.job.spec.utility.kind == "step" and 0.0 < r.utility < r.job.spec.utility.value]
    assert lower  # the test above reads more than each step utility's first value


def test_the_offline_optimum_dominates_every_policy_on_step_jobs() -> None:
    runs, totals = _runs("gpu2")
    first = next(iter(runs.values()))
    specs: list[JobSpec] = [r.job.spec for r in first.records.values()]
    opt = offline_optimum(specs, first.cluster, first.horizon, time_limit=60.0,
                          known=max(totals.values()))
    assert opt.status == "optimal"
    assert opt.objective == sum(_by_hand(s.utility, opt.completion[s.job_id] - s.arrival + 1)
                                for s in specs if s.job_id in opt.completion)
    assert all(opt.objective >= t - 1e-9 for t in totals.values())


# -- the vectorised utilities ----------------------------------------------------------------
def _stepped(gaps: list[tuple[int, float]]) -> Utility:
    """A step utility from (slots after the last step, value below the last step) pairs."""
    t, v, pairs = 0, 100.0, []
    for dt, dv in gaps:
        t, v = t + dt, v - dv
        pairs.append((t, v))
    return step_utility(pairs)


_utility = st.one_of(
    st.builds(lambda k, v, g, tg: Utility(kind=k, value=v, decay=g, target=tg),
              st.sampled_from([k for k in ALL_KINDS if k != "step"]), st.floats(0.5, 100.0),
              st.floats(0.0, 3.0), st.floats(0.0, 40.0)),
    st.lists(st.tuples(st.integers(1, 6), st.floats(0.5, 19.0)), min_size=1,
             max_size=5).map(_stepped))


@settings(max_examples=80, deadline=None)
@given(st.lists(st.tuples(_utility, st.integers(0, 40)), min_size=1, max_size=25))
def test_vectorised_utility_of_every_kind_equals_each_jobs_bit_for_bit(
        jobs: list[tuple[Utility, int]]) -> None:
    us = [u for u, _ in jobs]
    kind = np.array([KIND_CODE[u.kind] for u in us], dtype=np.int64)
    v, g, tg = (np.array([getattr(u, f) for u in us]) for f in ("value", "decay", "target"))
    d = np.array([x for _, x in jobs], dtype=float)
    got = utility_of(kind, v, g, tg, d, step_table(us)).tolist()
    assert got == [u(x) for u, x in jobs]
    assert got == [u.reference(float(x)) for u, x in jobs]


def test_a_step_row_without_its_steps_is_refused() -> None:
    with pytest.raises(ValueError, match="step"):
        utility_of(np.array([KIND_CODE["step"]]), np.array([5.0]), np.zeros(1),
                   np.array([2.0]), np.array([1.0]))


@settings(max_examples=20, deadline=None)
@given(st.lists(_utility, min_size=1, max_size=15), st.integers(1, 30))
def test_job_columns_keep_each_rows_utility_through_drops_and_compaction(
        utilities: list[Utility], d: int) -> None:
    base = _sample_specs()[0]
    cols = JobColumns(len(RESOURCES))
    kept: list[Utility] = []
    for i in range(120):
        u = utilities[i % len(utilities)] if i % 8 else utilities[(i // 8) % len(utilities)]
        cols.add(Job(spec=replace(base, job_id=f"j{i}", utility=u), work=1, window=40),
                 request=1, left=1.0)
        if i % 8:  # seven rows in eight dropped: the columns must compact
            cols.drop(f"j{i}")
        else:
            kept.append(u)
        rows = cols.rows()
        assert cols.utility(rows, np.full(rows.size, float(d))).tolist() == [u(d) for u in kept]
    assert len(cols.ids) < 120  # compacted
