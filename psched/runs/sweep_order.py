"""Which sweep cell starts next: longest processing time first, by a cost estimate per cell.

A sweep on ``k`` places (cores) ends when its last cell does; handing the cells out longest
first (LPT) leaves the shortest ones for the end, so the places run out of work nearly together
(Graham's bound: at most ``4/3 - 1/(3k)`` of the best possible end). A cell's cost is estimated
as its jobs times its policy's CPU seconds per job, measured once (:data:`POLICY_CPU_S_PER_1K_JOBS`)
and corrected by the cells already finished in this sweep (:class:`CellCosts`).
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Any

from psched.runs.sweep_cell import SweepCell

__all__ = ["LOAD_EXPONENT", "POLICY_CPU_S_PER_1K_JOBS", "CellCosts", "next_cell", "seed_order"]

#: CPU seconds per 1,000 jobs of each policy's simulation, measured once: the "after: sim CPU s"
#: column of BENCHMARKS.md section 12 (80,000-job Philly-like trace, 3,097 one-hour slots, quiet
#: machine) divided by 80. Only the ratios matter: a sweep rescales them by its finished cells.
POLICY_CPU_S_PER_1K_JOBS: Mapping[str, float] = {
    "fifo": 29.7 / 80, "srtf": 16.8 / 80, "drf": 38.8 / 80, "optimus": 48.0 / 80,
    "rrh": 30.2 / 80, "greedy-fill": 81.7 / 80, "greedy-gain": 84.5 / 80, "dorm": 78.5 / 80,
    "elastic-mip": 76.3 / 80, "oasis": 183.4 / 80,
}

#: A cell's cost grows with its load factor as ``load ** LOAD_EXPONENT`` (arrivals ``load``
#: times denser): measured once, 30,000 jobs of the 80,000-job Philly-like trace, FIFO / SRTF /
#: DRF / Optimus, load 2 against load 1: 1.45 / 1.29 / 1.63 / 1.24x the CPU (serial, seeds
#: 0-1), mean 1.40 ~ 2 ** 0.5 (measured on 2026-12-02 with ``benchmarks/sweep.py``). The cluster
#: scale is not modelled.
LOAD_EXPONENT = 0.5


class CellCosts:
    """Wall-second estimates of a sweep's cells, refined as cells finish.

    A cell's prior is ``jobs / 1000 * POLICY_CPU_S_PER_1K_JOBS[policy] * load **
    LOAD_EXPONENT`` (a policy not in the table: the table's largest, so it starts early).
    Once cells have finished, a cell's estimate is the mean wall time of the finished cells of
    its policy, load and cluster scale; else its prior times the mean ratio (wall / prior) of
    the finished cells of its policy; else its prior times that ratio over all finished cells
    (the machine's speed against the table's).

    Parameters
    ----------
    jobs : int
        Jobs per cell (every cell of a sweep runs the same jobs, arrival-scaled).
    """

    def __init__(self, jobs: int) -> None:
        self.jobs = max(1, int(jobs))
        # running [sum, count] of wall seconds per (policy, load, scale), of wall / prior
        # per policy, and of wall / prior over every finished cell
        self._walls: dict[tuple[str, float, float], list[float]] = {}
        self._ratios: dict[str, list[float]] = {}
        self._all = [0.0, 0.0]

    def prior_s(self, cell: SweepCell) -> float:
        """The cell's cost from the table alone, CPU seconds on the table's machine. O(1)."""
        per_1k = POLICY_CPU_S_PER_1K_JOBS.get(cell.policy, max(POLICY_CPU_S_PER_1K_JOBS.values()))
        return self.jobs / 1000.0 * per_1k * math.pow(cell.load, LOAD_EXPONENT)

    def observe(self, cell: SweepCell, wall_s: float) -> None:
        """Record a finished cell's wall seconds. O(1)."""
        ratio = wall_s / self.prior_s(cell)
        for acc, value in ((self._walls.setdefault((cell.policy, cell.load, cell.scale),
                                                   [0.0, 0.0]), wall_s),
                           (self._ratios.setdefault(cell.policy, [0.0, 0.0]), ratio),
                           (self._all, ratio)):
            acc[0] += value
            acc[1] += 1

    def estimate_s(self, cell: SweepCell) -> float:
        """The cell's estimated wall seconds (see the class). O(1)."""
        same = self._walls.get((cell.policy, cell.load, cell.scale))
        if same:
            return same[0] / same[1]
        ratio = self._ratios.get(cell.policy) or self._all
        return self.prior_s(cell) * (ratio[0] / ratio[1] if ratio[1] else 1.0)


def next_cell(queue: list[SweepCell], costs: CellCosts, loading: Mapping[int, Any],
              prefer: int | None = None) -> SweepCell:
    """Take the next cell to start out of ``queue``: the longest estimated first.

    Among cells of equal estimate (one policy, load and scale), a cell of seed ``prefer`` (the
    seed of the Ray cell that just finished: Ray hands the next task to the worker that just went
    idle, which holds that seed's jobs already), then one whose seed's jobs are mapped already
    (``loading[seed].done()``; a seed not in ``loading`` counts as mapped), then sweep order.
    O(len(queue)).
    """
    def rank(i: int) -> tuple[float, int, int, int]:
        c = queue[i]
        ready = c.seed not in loading or loading[c.seed].done()
        return (-costs.estimate_s(c), 0 if c.seed == prefer else 1, 0 if ready else 1, i)

    return queue.pop(min(range(len(queue)), key=rank))


def seed_order(cells: Sequence[SweepCell], costs: CellCosts) -> list[int]:
    """The seeds of ``cells`` in the order their first cell would start (longest first): the
    order in which to map them. O(n log n)."""
    out: list[int] = []
    for c in sorted(cells, key=lambda c: -costs.estimate_s(c)):  # stable: sweep order on ties
        if c.seed not in out:
            out.append(c.seed)
    return out
