"""No slot of ``oasis-rp`` leaves idle capacity that fits a waiting job, unless a named rule
allows it.

From the executed allocation rows alone, for every slot ``t`` the idle capacity of every
server is re-derived; then for every admitted job with work left after ``t`` that ran fewer
than ``N`` workers in ``t``, and every held job whose window is open at ``t``, the test asks
whether one more worker (on one server) and the parameter servers it needs
(:meth:`psched.core.model.Job.ps_needed`) fit that idle capacity. Where they do, the job must be
excused by one of the rules, each verified here where the rows and the records allow:

``ps``
    the worker fits but the parameter servers it needs do not (the PS rule).
``floor``
    the job is held below the density floor; verified: the floor of slot ``t``, re-derived
    from the arrivals (the clearing density of the jobs that arrived within the span, the
    median window), is positive.
``none``
    the exact search from ``t`` found no schedule of positive payoff (its optimality is
    the subject of ``test_oasis_rp_levers.test_own_usage_search_finds_the_brute_force_optimum``).
``limit``
    the queue was not searched for it: :data:`~psched.policies.oasis_rp.queue.QUEUE_LIMIT`
    held jobs had been searched before it at that boundary; verified by counting them (a
    reservation not searched that keeps its plan, starting later, counts here too).
``busy``
    past :data:`~psched.policies.oasis_rp.queue.HELD_LIMIT` held jobs without a reservation
    searched before it at that boundary (verified by counting them), and one of its workers
    with its PS did not fit the room the book left in ``t`` at its turn: the room seen in
    the rows was freed after the queue, by the boundary's revisions (pull-forward, re-plans).
``tried``
    past :data:`~psched.policies.oasis_rp.queue.HELD_LIMIT` held jobs without a reservation
    (verified by counting them), and a denser held job searched past that limit at the same
    boundary was not admitted into the room (verified: a search outcome other than
    ``admitted`` past the limit before it). Otherwise a held job that fits the book's room
    is searched past that limit.
``later``
    a reservation whose best schedule starts after ``t``: the idle room of ``t`` could not
    have made it complete with more utility than it did (with as many workers as fit in
    ``t`` and ``N`` in every slot after, its utility at that earliest completion is within
    :data:`~psched.core.model.WINDOW_UTILITY_FLOOR`, relative, of its utility earned; verified),
    so only the cost differs, and at own-usage prices the end of
    its plan was cheaper than the busier slot ``t``.
``priced``
    a reservation whose best schedule starts after ``t`` though starting now could have
    earned more utility: the exact search's payoff (utility minus the own-usage price)
    is higher later, the price of ``t``'s room (which counts the slot's usage by the
    plans, though that room goes unused once the boundary is past) exceeding the gain. This
    is the queue's rule as written (a held job is admitted only if its best schedule starts
    now); the cases are listed at the end of the module with the utility they left.
``planned``
    an admitted job whose remaining work is all planned in ``t`` (nothing to move ahead):
    on the simulated executor a job with work left after ``t`` has it planned after ``t``,
    so this rule never applies; it is counted for the live service's sake.
``closed``
    an admitted job past the last slot of its window (an uncommitted job displaced until its
    window closed): it can earn nothing more.

An admitted job not yet promised (uncommitted, :mod:`psched.policies.oasis_rp.promises`)
that the queue left without a plan is given the idle room of the slot after the planned
jobs have grown into it (:func:`psched.policies.oasis_rp.ahead.work_ahead`), so the rule
for admitted jobs covers it too.

What became of each held job at each boundary comes from the policy's ``observer``
(:data:`~psched.policies.oasis_rp.queue.OUTCOMES`). Anything else -- an admitted job not
grown into the room, a reservation that starts later while the room stands idle now -- fails
the test with the instance, the slot and the job. The counts per rule are printed at the end
of the module (``pytest -s``).
"""

from __future__ import annotations

from collections import Counter, defaultdict
from collections.abc import Iterator

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from strategies import Instance, allocations_by_slot, instances

from psched.core.model import WINDOW_UTILITY_FLOOR, Cluster, Job, Pool
from psched.core.records import REJECT_CANNOT_FIT, REJECT_PAST_HORIZON, RunResult
from psched.core.simulator import simulate
from psched.policies.oasis_rp import OasisRpPolicy
from psched.policies.oasis_rp.admission import REJECT_DENSITY, clearing_density_reference
from psched.policies.oasis_rp.estimates import refresh_due
from psched.policies.oasis_rp.observer import Observer
from psched.policies.oasis_rp.queue import HELD_LIMIT, QUEUE_LIMIT
from psched.traces.synth import fig5_instance, oasis_paper_cluster, oasis_paper_jobs

SEEDS = [0, 7]
SETTINGS = settings(max_examples=40, deadline=None,
                    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
RULES = ("ps", "floor", "none", "limit", "busy", "tried", "later", "priced", "planned",
         "closed")

_COUNTS: Counter[str] = Counter()
#: the ``priced`` cases seen: (instance, slot, job, utility at the earliest completion from
#: the slot, utility earned)
PRICED: list[tuple[str, int, str, float, float]] = []


@pytest.fixture(scope="module", autouse=True)
def _report_counts() -> Iterator[None]:
    yield
    print("\nidle capacity that fits a waiting job, per rule that allows it:",
          {r: _COUNTS[r] for r in ("fits", *RULES)})
    for label, t, job_id, best, got in PRICED[:20]:
        print(f"  priced: {label}, slot {t}, job {job_id}: {best:.6g} possible, {got:.6g} earned")


def _idle(result: RunResult, cluster: Cluster) -> dict[int, np.ndarray]:
    """Idle capacity per slot and server (capacity minus the rows' usage)."""
    by_slot = allocations_by_slot(result.allocations)
    out = {}
    for t in range(result.horizon):
        use = np.zeros_like(cluster.capacity)
        for job_id, (workers, ps) in by_slot.get(t, {}).items():
            spec = result.records[job_id].job.spec
            for h, c in workers.items():
                use[h] += c * spec.worker_demand.as_array()
            for k, c in ps.items():
                use[k] += c * spec.ps_demand.as_array()
        out[t] = cluster.capacity - use
    return out


def _containers(idle: np.ndarray, demand: np.ndarray) -> int:
    """How many containers of ``demand`` fit ``idle`` (rows: servers), each on one server."""
    need = demand > 0
    if not need.any():
        return 1 << 30
    per = np.floor((idle[:, need] + 1e-9) / demand[need]).min(axis=1)
    return int(np.maximum(per, 0).sum())


def _floor_at(observed: list[Job], t: int, cluster: Cluster, factor: float) -> float:
    """The density floor of slot ``t`` re-derived from the jobs the policy saw arrive by
    then: ``factor`` times the clearing density of those within the span (the median window
    as last recomputed) against the span."""
    seen = [j for j in observed if j.arrival <= t]
    if not seen:
        return 0.0
    last = max(n for n in range(1, len(seen) + 1) if refresh_due(n))
    span = max(1, int(np.median([j.window for j in seen[:last]])))
    recent = [j for j in seen if j.arrival > t - span]
    return factor * clearing_density_reference(recent, cluster, span)


def unexcused_idle(result: RunResult, cluster: Cluster,
                   outcomes: dict[tuple[int, str], list[str]], density_floor: float,
                   counts: Counter[str], label: str = "") -> list[str]:
    """The (slot, job) cases where one more worker of a waiting job fits the idle capacity
    and no rule allows it (module docstring); ``counts`` gets one per case and rule."""
    records = result.records
    idle = _idle(result, cluster)
    rows = allocations_by_slot(result.allocations)
    workers_idx, ps_idx = cluster.indices(Pool.WORKER), cluster.indices(Pool.PS)
    observed = [r.job for r in records.values()
                if r.reason not in (REJECT_PAST_HORIZON, REJECT_CANNOT_FIT)]
    done: dict[str, int] = defaultdict(int)
    bad = []
    for t in range(result.horizon):
        here = rows.get(t, {})
        for job_id, rec in records.items():
            job = rec.job
            n_w = sum(here[job_id][0].values()) if job_id in here else 0
            n_ps = sum(here[job_id][1].values()) if job_id in here else 0
            before = done[job_id]
            done[job_id] += n_w
            if rec.reason in (REJECT_PAST_HORIZON, REJECT_CANNOT_FIT) or job.arrival > t:
                continue
            admitted = rec.admitted and rec.decided is not None and rec.decided <= t
            if admitted:
                if before + n_w >= job.work or n_w >= job.max_workers:
                    continue
                if t > job.last_slot:
                    counts["closed"] += 1
                    continue
            elif t > job.last_slot:
                continue
            spec = job.spec
            gap = idle[t]
            if _containers(gap[workers_idx], spec.worker_demand.as_array()) < 1:
                continue
            counts["fits"] += 1
            extra_ps = max(0, job.ps_needed(n_w + 1) - n_ps)
            if _containers(gap[ps_idx], spec.ps_demand.as_array()) < extra_ps:
                counts["ps"] += 1
                continue
            where = f"slot {t}, job {job_id} ({'admitted' if admitted else 'held'})"
            if admitted:
                bad.append(f"{where}: not grown into the idle room ({n_w} workers)")
                continue
            rule = _held_rule(t, job, rec.reason, outcomes, records)
            if rule == "floor" and _floor_at(observed, t, cluster, density_floor) <= 0.0:
                bad.append(f"{where}: held below a floor that is 0 in slot {t}")
                continue
            if rule == "kept":  # not searched (the limits), its reservation kept for later
                rule = "limit"
            if rule in ("limit", "busy", "tried") and not _limit_reached(
                    t, job_id, outcomes, records, held_limit=rule != "limit",
                    tried=rule == "tried"):
                bad.append(f"{where}: not searched ({rule}), though the queue's limit was not "
                           "reached")
                continue
            if rule == "reserved":
                now = min(job.max_workers, job.work,
                          _containers(gap[workers_idx], spec.worker_demand.as_array()))
                while job.ps_needed(now) > _containers(gap[ps_idx], spec.ps_demand.as_array()):
                    now -= 1
                earliest = t + -(-(job.work - now) // job.max_workers)
                best = job.utility_at(earliest - job.arrival + 1)
                rule = "later" if best <= rec.utility * (1 + WINDOW_UTILITY_FLOOR) else "priced"
                if rule == "priced":
                    PRICED.append((label, t, job_id, best, rec.utility))
            if rule in RULES:
                counts[rule] += 1
                continue
            bad.append(f"{where}: {rule}")
    return bad


def _held_rule(t: int, job: Job, reason: str, outcomes: dict[tuple[int, str], list[str]],
               records: dict) -> str:
    """The rule that kept a held job out of slot ``t`` (the probe's last outcome there; a
    job arriving in its last slot is decided on arrival: its record's reason)."""
    got = outcomes.get((t, job.job_id))
    if got:
        return got[-1]
    if job.arrival == t == job.last_slot:
        return "floor" if reason == REJECT_DENSITY else "none"
    return "not taken by the queue at all"


def _is_batch_arrival(t: int, job: Job) -> bool:
    """Decided with its slot's others at the boundary (not on arrival, in its last slot)."""
    return job.arrival == t < job.last_slot


def _limit_reached(t: int, job_id: str, outcomes: dict[tuple[int, str], list[str]],
                   records: dict, *, held_limit: bool = False, tried: bool = False) -> bool:
    """Before ``job_id`` at the boundary of ``t``, the queue had searched
    :data:`QUEUE_LIMIT` held jobs, or with ``held_limit`` :data:`HELD_LIMIT` held jobs
    without a reservation (not kept as one at ``t - 1``); with ``tried`` also one more such
    job past that limit, which was not admitted."""
    order = [(j, what) for (s, j), whats in outcomes.items() if s == t
             for what in whats[-1:]]
    order.sort(key=lambda x: _position[(t, x[0])])

    def reserved(j: str) -> bool:
        return (outcomes.get((t - 1, j)) or [""])[-1] in ("reserved", "kept")

    searched = held = 0
    failed = False  # a held job without a reservation, past HELD_LIMIT, not admitted
    for j, what in order:
        if j == job_id:
            if not held_limit:
                return searched >= QUEUE_LIMIT
            return held >= HELD_LIMIT and (failed or not tried)
        if _is_batch_arrival(t, records[j].job) or what in ("limit", "kept", "busy", "tried"):
            continue
        searched += 1
        if not reserved(j):
            failed = failed or (held >= HELD_LIMIT and what != "admitted")
            held += 1
    return False


#: (slot, job id) -> its place in the order the probe saw the boundary's jobs
_position: dict[tuple[int, str], int] = {}


def run_probed(specs: list, cluster: Cluster, horizon: int, seed: int, **options: object
               ) -> tuple[RunResult, dict[tuple[int, str], list[str]], OasisRpPolicy]:
    """``oasis-rp`` (default options unless given) with its queue probed."""
    pol = OasisRpPolicy(**options)  # type: ignore[arg-type]
    outcomes: dict[tuple[int, str], list[str]] = defaultdict(list)

    class Seen(Observer):
        def queued(self, t: int, job_id: str, outcome: str) -> None:
            _position.setdefault((t, job_id), len(_position))
            outcomes[(t, job_id)].append(outcome)

    pol.observer = Seen()
    _position.clear()
    return simulate(specs, cluster, pol, horizon, seed=seed), outcomes, pol


def _check(specs: list, cluster: Cluster, horizon: int, seed: int, label: str) -> None:
    result, outcomes, pol = run_probed(specs, cluster, horizon, seed)
    bad = unexcused_idle(result, cluster, outcomes, pol.density_floor, _COUNTS, label)
    assert bad == [], f"{label}: idle capacity fits a waiting job:\n" + "\n".join(bad[:20])


@pytest.mark.parametrize("seed", SEEDS)
@SETTINGS
@given(instance=instances())
def test_no_slot_leaves_room_for_a_waiting_job_idle_without_a_rule(
        seed: int, instance: Instance) -> None:
    cluster, specs, horizon = instance
    _check(specs, cluster, horizon, seed, f"random instance (seed {seed})")


@pytest.mark.parametrize("n", [3, 6, 9])
@pytest.mark.parametrize("instance_seed", [0, 1, 2])
def test_no_slot_leaves_room_idle_on_the_fig5_instances(n: int, instance_seed: int) -> None:
    specs, cluster = fig5_instance(n, seed=instance_seed, priority=(1.0, 100.0))
    _check(specs, cluster, 10, 0, f"fig5 n={n} seed={instance_seed}")


@pytest.mark.parametrize("seed", [0, 1])
def test_no_slot_leaves_room_idle_on_a_loaded_oasis_paper_trace(seed: int) -> None:
    specs, _ = oasis_paper_jobs(120, seed=seed, slots=60)
    _check(specs, oasis_paper_cluster(seed=seed), 60, 0, f"oasis-paper 120 jobs seed={seed}")
