"""The ``soft`` reservations as JSON (the live service journals them after every decision):
each reservation's row is written once and reused while it stands, and what is written is
always exactly what writing every row afresh gives, whatever reservations are made, moved
(a new reservation) or taken in between; it reads back to the same reservations.
"""

from __future__ import annotations

from dataclasses import replace

from hypothesis import given, settings
from hypothesis import strategies as st
from test_oasis_rp import _spec

from psched.core.model import Alloc, resolve_job
from psched.core.utility import Utility
from psched.policies.oasis_rp.reservations import Reservation, Reservations, plan_to_json

JOBS = {f"j{i}": resolve_job(_spec(f"j{i}", 0, 2, 3, Utility(kind="sigmoid", value=10.0 + i,
                                                             decay=0.5, target=4.0)), 3600.0, 20)
        for i in range(4)}


def _plan(start: int, length: int, workers: int) -> dict[int, Alloc]:
    return {s: Alloc.of({0: workers}, {}) for s in range(start, start + length)}


def _fresh(res: Reservations) -> dict[str, object]:
    return {"soft": [[j, plan_to_json(r.plan), r.payoff, r.density] for j, r in res.items()]}


_OPS = st.lists(st.tuples(st.sampled_from(["set", "move", "del"]),
                          st.sampled_from(sorted(JOBS)), st.integers(0, 6),
                          st.integers(1, 4), st.integers(1, 2)), max_size=25)


@settings(max_examples=40, deadline=None)
@given(ops=_OPS)
def test_the_rows_written_are_those_written_afresh_after_any_changes(
        ops: list[tuple[str, str, int, int, int]]) -> None:
    res = Reservations()
    for op, j, start, length, workers in ops:
        if op == "set":
            res[j] = Reservation(job=JOBS[j], plan=_plan(start, length, workers),
                                 payoff=float(start), density=float(workers))
        elif op == "move" and j in res:
            res[j] = replace(res[j], plan=_plan(start, length, workers))
        elif op == "del" and j in res:
            del res[j]
        got = res.to_json()
        assert got == _fresh(res)
        back = Reservations.from_json(got, JOBS)
        assert {k: (r.plan, r.payoff, r.density) for k, r in back.items()} == {
            k: (r.plan, r.payoff, r.density) for k, r in res.items()}


def test_a_standing_reservation_reuses_its_row_and_a_moved_one_gets_a_new_one() -> None:
    res = Reservations()
    res["j0"] = Reservation(job=JOBS["j0"], plan=_plan(2, 3, 1), payoff=1.0, density=1.0)
    res["j1"] = Reservation(job=JOBS["j1"], plan=_plan(4, 2, 2), payoff=2.0, density=2.0)
    first = res.to_json()["soft"]
    res["j1"] = replace(res["j1"], plan=_plan(5, 2, 2))
    second = res.to_json()["soft"]
    assert second[0] is first[0]  # j0 stood: the same row
    assert second[1] is not first[1] and second[1][1] == plan_to_json(_plan(5, 2, 2))
