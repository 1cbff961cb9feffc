"""The scheduler service's durable journal: SQLite in WAL mode on the head node.

What is written, each in one transaction, before the service acts on it:

* ``meta`` -- the service's configuration (policy, slot length, horizon, cluster, history jobs
  for the price bounds), written once; a restarted service reads it back;
* ``submissions`` -- every accepted job spec (data: JSON of :class:`psched.core.model.JobSpec`),
  ``job_id`` unique, so no job is submitted twice;
* ``decisions`` -- each admission decision (arrival or re-plan): slot, admitted, reason,
  payoff, the work decided on, the committed schedule and the promised completion slot; and
  each revision of a plan by a policy that revises plans (``oasis-rp``; kind ``revise``: the
  job's plan from that slot on, empty if none is left); an arrival held for deferred
  admission (kind ``hold``, reason: the policy's rejection reason if never admitted) and the
  decision made on it later at a slot boundary (kind ``deferred``);
* ``policy_state`` -- such a policy's latest boundary state (one row, JSON), written in the
  transaction of the revisions;
* ``slots`` + ``progress`` -- one transaction per finished slot: the plan executed, each job's
  measured progress and total, its latest checkpoint location;
* ``events`` -- cancellations, completions, drops, lost nodes.

A restarted service replays ``decisions`` through a fresh policy (deterministic given the
configuration) and the ``slots``/``progress`` rows into the loop state
(:func:`ray_cluster.service.nodes.replay`). Complexity: each write is O(rows written); a full read
is
O(journal size).
"""

from __future__ import annotations

import json
import logging
import os
import sqlite3
import threading
import time
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from psched.core.errors import InputError
from psched.core.model import Alloc, JobSpec
from ray_cluster.workloads.jobspec import spec_from_json, spec_to_json

__all__ = [
    "SYNC_ENV",
    "DecisionRow",
    "Journal",
    "JournalError",
    "alloc_from_json",
    "alloc_to_json",
    "check_journal",
]

log = logging.getLogger(__name__)

#: The journal's file name in the service folder, and the checkpoints' folder.
JOURNAL_FILE, CHECKPOINT_DIR = "journal.db", "ckpt"

#: Environment variable naming SQLite's ``synchronous`` level of every journal opened: ``FULL``
#: (the default: each commit synced to disk) or ``NORMAL`` (WAL commits reach the OS at once
#: and the disk at checkpoints: a killed process loses nothing, a lost machine may lose the
#: last commits). The test suite sets ``NORMAL`` (tests/conftest.py): it kills processes, never
#: machines, and each sync costs milliseconds.
SYNC_ENV = "PSCHED_JOURNAL_SYNC"
_SYNC_LEVELS = ("FULL", "NORMAL")

_SCHEMA = """
CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS submissions (
    seq INTEGER PRIMARY KEY AUTOINCREMENT, job_id TEXT NOT NULL UNIQUE,
    spec TEXT NOT NULL, submitted REAL NOT NULL);
CREATE TABLE IF NOT EXISTS decisions (
    seq INTEGER PRIMARY KEY AUTOINCREMENT, job_id TEXT NOT NULL, kind TEXT NOT NULL,
    slot INTEGER NOT NULL, admitted INTEGER NOT NULL, reason TEXT NOT NULL, payoff REAL,
    work INTEGER NOT NULL, schedule TEXT NOT NULL, latency_ms REAL NOT NULL,
    decided REAL NOT NULL, promised INTEGER);
CREATE TABLE IF NOT EXISTS slots (
    t INTEGER PRIMARY KEY, started REAL NOT NULL, ended REAL NOT NULL, plan TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS progress (
    t INTEGER NOT NULL, job_id TEXT NOT NULL, amount REAL NOT NULL, done REAL NOT NULL,
    checkpoint TEXT NOT NULL, info TEXT NOT NULL, PRIMARY KEY (t, job_id));
CREATE TABLE IF NOT EXISTS policy_state (
    id INTEGER PRIMARY KEY CHECK (id = 0), slot INTEGER NOT NULL, state TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS events (
    seq INTEGER PRIMARY KEY AUTOINCREMENT, job_id TEXT NOT NULL, slot INTEGER NOT NULL,
    kind TEXT NOT NULL, info TEXT NOT NULL, at REAL NOT NULL);
"""


class JournalError(InputError):
    """The journal cannot be read, or is empty while checkpoints exist: one line."""


def _checkpointed_jobs(workdir: Path) -> int:
    folder = workdir / CHECKPOINT_DIR
    return sum(1 for _ in folder.iterdir()) if folder.is_dir() else 0


def _journal_problem(path: Path, jobs: int) -> str | None:
    """Why the journal at ``path`` cannot be trusted, or None (``jobs``: checkpointed jobs)."""
    lost = f"while {CHECKPOINT_DIR}/ holds checkpoints of {jobs} job(s)"
    if not path.exists() or path.stat().st_size == 0:
        if jobs and not (path.exists() and Path(f"{path}-wal").exists()):
            return f"is {'missing' if not path.exists() else 'empty'} {lost}"
        if not path.exists():
            return None
    try:
        db = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
        try:
            check = db.execute("PRAGMA quick_check").fetchall()
            if check != [("ok",)]:
                return f"cannot be read (integrity check: {str(check[0][0])[:120]})"
            tables = {r[0] for r in db.execute("SELECT name FROM sqlite_master")}
            config = ("meta" in tables and db.execute(
                "SELECT COUNT(*) FROM meta WHERE key = 'config'").fetchone()[0] > 0)
        finally:
            db.close()
    except sqlite3.Error as err:
        return f"cannot be read ({str(err)[:120]})"
    if not config and jobs:
        return f"holds no service {lost}"
    return None


def check_journal(workdir: str | Path, *, fresh: bool = False) -> str | None:
    """Refuse to start on a journal that cannot be read, or that is empty (or missing)
    while checkpoints exist: silently starting afresh would lose every job it held.

    With ``fresh``, the bad journal (and its ``-wal``/``-shm``) and the checkpoint folder are
    moved aside to ``<name>.bad-<unix time>`` instead, and what was moved is returned (None if
    the journal is fine). O(journal size) (SQLite's quick check).

    Raises
    ------
    JournalError
        One line naming the file and the problem, unless ``fresh``.
    """
    workdir = Path(workdir)
    path = workdir / JOURNAL_FILE
    problem = _journal_problem(path, _checkpointed_jobs(workdir))
    if problem is None:
        return None
    if not fresh:
        raise JournalError(f"the journal {problem}; its jobs would be lost: move it away, or "
                           "start with --fresh to set it and the checkpoints aside",
                           path=str(path))
    stamp = int(time.time())
    moved = []
    for name in (JOURNAL_FILE, f"{JOURNAL_FILE}-wal", f"{JOURNAL_FILE}-shm", CHECKPOINT_DIR):
        src = workdir / name
        if src.exists():
            src.rename(workdir / f"{name}.bad-{stamp}")
            moved.append(f"{name}.bad-{stamp}")
    log.warning("journal %s %s: moved aside: %s", path, problem, ", ".join(moved))
    return f"the journal {problem}: moved aside to {', '.join(moved)}"


def alloc_to_json(schedule: Mapping[int, Alloc]) -> str:
    """A schedule ``{slot: Alloc}`` as JSON ``{slot: [workers, ps]}``."""
    return json.dumps({str(t): [[list(p) for p in a.workers], [list(p) for p in a.ps]]
                       for t, a in sorted(schedule.items())})


def alloc_from_json(text: str) -> dict[int, Alloc]:
    """The inverse of :func:`alloc_to_json`."""
    return {int(t): Alloc(workers=tuple((int(h), int(n)) for h, n in w),
                          ps=tuple((int(k), int(n)) for k, n in p))
            for t, (w, p) in json.loads(text).items()}


@dataclass(frozen=True, kw_only=True)
class DecisionRow:
    """One journaled decision."""

    job_id: str  #: the job
    kind: str  #: "arrival", "replan", "advance", "release", "revise", "hold" or "deferred"
    slot: int  #: the slot the decision was made for (its first usable slot)
    admitted: bool  #: admitted
    reason: str  #: rejection reason ("" if admitted)
    payoff: float | None  #: the policy's payoff
    work: int  #: worker-slots decided on (the job's W, or what was left at a re-plan)
    schedule: dict[int, Alloc]  #: committed schedule (empty if none)
    latency_ms: float  #: submission-to-decision time (policy time for trace arrivals)
    promised: int | None = None  #: the completion slot promised on admission, if any


class Journal:
    """The journal file. Thread-safe (one connection, one lock); WAL, synchronous=FULL (or
    the level :data:`SYNC_ENV` names)."""

    def __init__(self, path: str | Path) -> None:
        self.path = Path(path)
        sync = os.environ.get(SYNC_ENV, "FULL").upper()
        if sync not in _SYNC_LEVELS:
            raise InputError(f"must be one of {', '.join(_SYNC_LEVELS)}, got {sync!r}",
                             path=SYNC_ENV)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self._lock = threading.Lock()
        self._db = sqlite3.connect(str(self.path), check_same_thread=False,
                                   isolation_level=None)
        try:
            self._db.execute("PRAGMA journal_mode=WAL")
            self._db.execute(f"PRAGMA synchronous={sync}")
            self._db.executescript(_SCHEMA)
            cols = {r[1] for r in self._db.execute("PRAGMA table_info(decisions)")}
            if "promised" not in cols:  # a journal written before promises were journaled
                self._db.execute("ALTER TABLE decisions ADD COLUMN promised INTEGER")
        except sqlite3.DatabaseError as err:
            self._db.close()
            raise JournalError(f"the journal cannot be read ({err}): move it away, or start "
                               "with --fresh", path=str(self.path)) from None

    def close(self) -> None:
        with self._lock:
            self._db.close()

    def _tx(self, statements: list[tuple[str, tuple[Any, ...]]]) -> None:
        with self._lock:
            self._db.execute("BEGIN IMMEDIATE")
            try:
                for sql, args in statements:
                    self._db.execute(sql, args)
            except BaseException:
                self._db.execute("ROLLBACK")
                raise
            self._db.execute("COMMIT")

    def _rows(self, sql: str, args: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
        with self._lock:
            return list(self._db.execute(sql, args).fetchall())

    # -- writes ----------------------------------------------------------------------------
    def set_meta(self, values: Mapping[str, Any]) -> None:
        """Store configuration values (JSON) once; existing keys are kept."""
        self._tx([("INSERT OR IGNORE INTO meta VALUES (?, ?)", (k, json.dumps(v)))
                  for k, v in values.items()])

    def submit(self, spec: JobSpec, decision: DecisionRow | None = None,
               revisions: list[DecisionRow] = (),  # type: ignore[assignment]
               state: tuple[int, Mapping[str, Any]] | None = None) -> None:
        """Record a submission (its decision, the revisions it caused and the policy's
        state after it: same transaction).

        Raises ``sqlite3.IntegrityError`` if the job id was submitted before.
        """
        now = time.time()
        stmts = [("INSERT INTO submissions (job_id, spec, submitted) VALUES (?, ?, ?)",
                  (spec.job_id, spec_to_json(spec), now))]
        if decision is not None:
            stmts.append(self._decision_stmt(decision, now))
        stmts += [self._decision_stmt(r, now) for r in revisions]
        if state is not None:
            stmts.append(self._state_stmt(*state))
        self._tx(stmts)

    @staticmethod
    def _decision_stmt(d: DecisionRow, now: float) -> tuple[str, tuple[Any, ...]]:
        return ("INSERT INTO decisions (job_id, kind, slot, admitted, reason, payoff, work, "
                "schedule, latency_ms, decided, promised) VALUES "
                "(?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
                (d.job_id, d.kind, d.slot, int(d.admitted), d.reason, d.payoff, d.work,
                 alloc_to_json(d.schedule), d.latency_ms, now, d.promised))

    @staticmethod
    def _state_stmt(slot: int, state: Mapping[str, Any]) -> tuple[str, tuple[Any, ...]]:
        return ("INSERT OR REPLACE INTO policy_state VALUES (0, ?, ?)",
                (slot, json.dumps(state, sort_keys=True)))

    def decide(self, decision: DecisionRow) -> None:
        self._tx([self._decision_stmt(decision, time.time())])

    def revise(self, revisions: list[DecisionRow],
               state: tuple[int, Mapping[str, Any]] | None = None) -> None:
        """Record plan revisions (kind ``revise``) and the policy's state (slot, JSON) after
        them, in one transaction; nothing if there is neither."""
        now = time.time()
        stmts = [self._decision_stmt(r, now) for r in revisions]
        if state is not None:
            stmts.append(self._state_stmt(*state))
        if stmts:
            self._tx(stmts)

    def slot_done(self, t: int, started: float, plan: Mapping[str, Alloc],
                  progress: Mapping[str, tuple[float, float, str, str]],
                  events: list[tuple[str, str, str]] = ()) -> None:  # type: ignore[assignment]
        """Record a finished slot: plan, per job (amount, done, checkpoint, info), events."""
        now = time.time()
        stmts: list[tuple[str, tuple[Any, ...]]] = [(
            "INSERT INTO slots VALUES (?, ?, ?, ?)",
            (t, started, now, json.dumps({j: [[list(p) for p in a.workers],
                                              [list(p) for p in a.ps]]
                                          for j, a in plan.items()})))]
        for job_id, (amount, done, ckpt, info) in progress.items():
            stmts.append(("INSERT INTO progress VALUES (?, ?, ?, ?, ?, ?)",
                          (t, job_id, amount, done, ckpt, info)))
        for job_id, kind, info in events:
            stmts.append(("INSERT INTO events (job_id, slot, kind, info, at) VALUES "
                          "(?, ?, ?, ?, ?)", (job_id, t, kind, info, now)))
        self._tx(stmts)

    def event(self, job_id: str, slot: int, kind: str, info: str = "") -> None:
        self._tx([("INSERT INTO events (job_id, slot, kind, info, at) VALUES (?, ?, ?, ?, ?)",
                   (job_id, slot, kind, info, time.time()))])

    # -- reads -----------------------------------------------------------------------------
    def meta(self) -> dict[str, Any]:
        return {k: json.loads(v) for k, v in self._rows("SELECT key, value FROM meta")}

    def submissions(self) -> dict[str, JobSpec]:
        """Every submitted spec by job id, in submission order."""
        return {j: spec_from_json(s) for j, s in
                self._rows("SELECT job_id, spec FROM submissions ORDER BY seq")}

    def decisions(self) -> Iterator[DecisionRow]:
        """Every decision, in the order made."""
        for row in self._rows("SELECT job_id, kind, slot, admitted, reason, payoff, work, "
                              "schedule, latency_ms, promised FROM decisions ORDER BY seq"):
            yield DecisionRow(job_id=row[0], kind=row[1], slot=row[2], admitted=bool(row[3]),
                              reason=row[4], payoff=row[5], work=row[6],
                              schedule=alloc_from_json(row[7]), latency_ms=row[8],
                              promised=row[9])

    def policy_state(self) -> dict[str, Any] | None:
        """The policy's latest journaled boundary state, or None."""
        rows = self._rows("SELECT state FROM policy_state WHERE id = 0")
        return json.loads(rows[0][0]) if rows else None

    def slots(self) -> list[tuple[int, float, float, dict[str, Alloc]]]:
        """Finished slots: (t, started, ended, plan), in order."""
        out = []
        for t, s, e, plan in self._rows("SELECT t, started, ended, plan FROM slots ORDER BY t"):
            out.append((t, s, e, {j: Alloc(workers=tuple(tuple(p) for p in w),
                                           ps=tuple(tuple(p) for p in q))
                                  for j, (w, q) in json.loads(plan).items()}))
        return out

    def progress(self, job_id: str | None = None) -> list[tuple[int, str, float, float, str, str]]:
        """Progress rows (t, job_id, amount, done, checkpoint, info) in slot order."""
        sql = "SELECT t, job_id, amount, done, checkpoint, info FROM progress"
        if job_id is not None:
            return self._rows(sql + " WHERE job_id = ? ORDER BY t", (job_id,))
        return self._rows(sql + " ORDER BY t, job_id")

    def events(self, job_id: str | None = None) -> list[tuple[str, int, str, str]]:
        """Events (job_id, slot, kind, info) in order."""
        sql = "SELECT job_id, slot, kind, info FROM events"
        if job_id is not None:
            return self._rows(sql + " WHERE job_id = ? ORDER BY seq", (job_id,))
        return self._rows(sql + " ORDER BY seq")
