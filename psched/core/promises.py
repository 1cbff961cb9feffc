"""An independent check that every promise was kept, from the executed schedule alone.

An OASiS-family policy promises each admitted job a completion slot (``Decision.promised``,
the ``promised`` column of ``jobs.csv``). The check re-derives every job's completion from the
allocation rows (cumulative workers per slot against the job's work ``W``), ignoring the
completion the loop recorded, and reports each admitted job with a promise that did not
complete by it. It reads either a :class:`~psched.core.records.RunResult` or the files of
``--out DIR/<policy>`` (``jobs.csv``, ``allocations.csv``).

    python -m psched.core.promises DIR/oasis-rp     # exit 1 and one line per broken promise
"""

from __future__ import annotations

import csv
import sys
from collections import defaultdict
from collections.abc import Iterable, Mapping
from pathlib import Path

from psched.core.records import RunResult

__all__ = ["broken_promises", "broken_promises_in", "completions_from_rows"]


def completions_from_rows(rows: Iterable[tuple[int, str, str, int]],
                          work: Mapping[str, int]) -> dict[str, int]:
    """First slot at which each job's cumulative workers reach its work.

    ``rows`` are ``(slot, job_id, role, count)``; only ``worker`` rows count. O(rows log rows).
    """
    per_slot: dict[str, dict[int, int]] = defaultdict(lambda: defaultdict(int))
    for t, job_id, role, count in rows:
        if role == "worker":
            per_slot[job_id][int(t)] += int(count)
    out: dict[str, int] = {}
    for job_id, slots in per_slot.items():
        need = work.get(job_id)
        if need is None:
            continue
        total = 0
        for t in sorted(slots):
            total += slots[t]
            if total >= need:
                out[job_id] = t
                break
    return out


def _violations(promised: Mapping[str, int], done: Mapping[str, int]) -> list[str]:
    out = []
    for job_id, slot in promised.items():
        got = done.get(job_id)
        if got is None:
            out.append(f"{job_id}: promised slot {slot}, never completed")
        elif got > slot:
            out.append(f"{job_id}: promised slot {slot}, completed in slot {got}")
    return out


def broken_promises(result: RunResult) -> list[str]:
    """One line per admitted job of ``result`` that did not complete by its promise."""
    promised = {j: r.promised for j, r in result.records.items()
                if r.admitted and r.promised is not None}
    work = {j: r.job.work for j, r in result.records.items()}
    done = completions_from_rows(((t, j, role, n) for t, j, _h, role, n in result.allocations),
                                 work)
    return _violations(promised, done)


def broken_promises_in(folder: str | Path) -> list[str]:
    """The same check from ``folder/jobs.csv`` and ``folder/allocations.csv`` (one policy's
    folder of ``--out``). Raises ``ValueError`` naming the file if a column is missing."""
    folder = Path(folder)
    promised: dict[str, int] = {}
    work: dict[str, int] = {}
    with (folder / "jobs.csv").open(newline="") as fh:
        reader = csv.DictReader(fh)
        missing = {"job_id", "work", "admitted", "promised"} - set(reader.fieldnames or ())
        if missing:
            raise ValueError(f"{folder / 'jobs.csv'}: missing column(s) {sorted(missing)}")
        for row in reader:
            work[row["job_id"]] = int(row["work"])
            if row["admitted"] == "1" and row["promised"] != "":
                promised[row["job_id"]] = int(row["promised"])
    with (folder / "allocations.csv").open(newline="") as fh:
        rows = [(int(r["slot"]), r["job_id"], r["role"], int(r["count"]))
                for r in csv.DictReader(fh)]
    return _violations(promised, completions_from_rows(rows, work))


def main(argv: list[str] | None = None) -> int:
    """``python -m psched.core.promises FOLDER...``: exit 1 if any promise was broken."""
    bad = 0
    for folder in argv if argv is not None else sys.argv[1:]:
        lines = broken_promises_in(folder)
        for line in lines:
            sys.stdout.write(f"{folder}: {line}\n")
        bad += len(lines)
    return 1 if bad else 0


if __name__ == "__main__":
    raise SystemExit(main())
