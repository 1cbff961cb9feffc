"""``psched submit | status | cancel | logs | page``: the client commands of a running service. Each
reaches the service through :mod:`psched.cli.connect` (its HTTP door first) and imports
nothing heavy: a job file is parsed and checked before the one request."""

from __future__ import annotations

import argparse
import json
import sys
import time
from typing import Any, TextIO

from psched.cli.connect import (
    BAR_WIDTH,
    ServiceClient,
    page_address,
)
from psched.core.errors import InputError

__all__ = ["cmd_cancel", "cmd_logs", "cmd_page", "cmd_status", "cmd_submit", "format_status",
           "progress_bar", "submit_line"]


def cmd_page(args: argparse.Namespace) -> int:
    print(page_address(args.dir))
    return 0


def cmd_submit(args: argparse.Namespace) -> int:
    from ray_cluster.workloads.jobspec import spec_to_json

    client = ServiceClient(args)
    specs = _submissions(args, client)  # all checked here first; the service re-checks each
    failed = 0
    for spec, where in specs:
        text, place = spec_to_json(spec), where.to_dict()
        out = client.call("submit", ("POST", "api/submit", {"spec": text, "where": place}),
                          text, where=place)
        if "error" in out:
            print(f"psched: error: {out['error']}", file=sys.stderr)
            failed += 1
            continue
        print(submit_line(spec.job_id, out))
    return 2 if failed else 0


def submit_line(job_id: str, out: dict[str, Any]) -> str:
    """The line ``psched submit`` prints for the service's reply ``out`` to one job: admitted
    (plan, promise, payoff), rejected (reason), held for deferred admission (the boundary it
    is next decided at and its window's last slot), or queued for a later arrival slot."""
    if out.get("held"):
        return (f"{job_id}: arrival slot {out['arrival']}: held: decided at the boundary of "
                f"slot {out['next_boundary']} or a later one; if not admitted by slot "
                f"{out['window_end']}, rejected ({out.get('reason')})")
    if out.get("decided") is False:
        return f"{job_id}: queued: decided when slot {out['arrival']} begins"
    verdict = "admitted" if out.get("admitted") else f"rejected ({out.get('reason')})"
    end = out.get("planned_completion")
    return (f"{job_id}: arrival slot {out['arrival']}: {verdict}"
            + (f", planned completion slot {end}" if end is not None else "")
            + (f", promised by slot {out['promised']}" if out.get("promised") is not None
               else "")
            + (f", payoff {out['payoff']:.4g}" if out.get("payoff") is not None else ""))


def _submissions(args: argparse.Namespace, client: ServiceClient) -> list[Any]:
    """Every job file of ``psched submit`` as ``(spec, where)``, parsed and checked before
    anything is sent: import paths only if the service allows them, no id twice in one
    command (nothing is submitted then)."""
    from psched.core.limits import MAX_SUBMIT_JOBS
    from ray_cluster.workloads.jobspec import import_refused, load_jobspec_where

    if len(args.jobs) > MAX_SUBMIT_JOBS:
        raise InputError(f"{len(args.jobs)} job files, more than {MAX_SUBMIT_JOBS} in one "
                         "submit", field="jobs")
    # each file checked once; an import path waits for the service to say if it allows them
    parsed = [load_jobspec_where(f, allow_import=True) for f in args.jobs]
    imports = [(spec, where) for spec, where in parsed if ":" in spec.workload]
    if imports:
        if not _status(client).get("allow_import", False):
            raise import_refused(imports[0][0].workload, imports[0][1])
    elif client.door is None:
        client.actor()  # no service: one line before anything else
    first: dict[str, Any] = {}
    for spec, where in parsed:
        if spec.job_id in first:
            raise where.error("job_id", f"id {spec.job_id!r} also in {first[spec.job_id].path}"
                              "; nothing submitted")
        first[spec.job_id] = where
    return parsed


def _status(client: ServiceClient) -> dict[str, Any]:
    return dict(client.call("status", ("GET", "api/status", None)))


def format_status(st: dict[str, Any]) -> str:
    """The status table, one row per job, a progress bar each: ``#`` the work measured at
    slot ends, ``>`` the running slot's planned work times the share of the slot that has
    run (an estimate until the slot ends); its measured speed (``*``: its promise was
    re-stated) and, for a job not running, why it waits."""
    lines = [f"slot {st['slot']} ({st['phase']}), policy {st['policy']}, "
             f"{st['slot_seconds']:g} s slots" + (f"  ERROR {st['error']}" if st['error'] else "")]
    lines.append(f"{'job':<16} {'state':<15} {'arr':>4} {'w/ps':>6} {'progress':<{BAR_WIDTH + 2}} "
                 f"{'done/W':>11} {'plan':>5} {'prom':>5} {'end':>5} {'utility':>8} "
                 f"{'speed':>5}  loss")
    ran = min(1.0, float(st.get("slot_elapsed_s", 0.0)) / st["slot_seconds"])
    for j in st["jobs"]:
        lines.append(
            f"{j['job_id'][:16]:<16} {j['state'][:15]:<15} {j['arrival']:>4} "
            f"{j['workers']:>3}/{j['ps']:<2} [{progress_bar(j, ran)}] "
            f"{j['done']:>5.1f}/{j['work']:<5} "
            f"{'' if j['planned_completion'] is None else j['planned_completion']:>5} "
            f"{'' if j.get('promised') is None else j['promised']:>5} "
            f"{'' if j['completion'] is None else j['completion']:>5} "
            f"{j['utility']:>8.3g} {_speed(j):>5}  {j['loss']}"
            + (f"  ({j['waits']})" if j.get("waits") and j["state"] != "running" else ""))
    return "\n".join(lines)


def _speed(job: dict[str, Any]) -> str:
    """The job's measured speed against its profile, with a ``*`` when its promise was
    re-stated."""
    speed = job.get("speed")
    mark = "*" if job.get("restated") else ""
    return "" if speed is None else f"{speed:.2f}"[:4] + mark


def progress_bar(job: dict[str, Any], ran: float) -> str:
    """``job``'s bar, :data:`BAR_WIDTH` wide: ``#`` done, ``>`` the share ``ran`` (0-1) of the
    running slot's work (one worker-slot per worker), never past the job's work."""
    work = float(job["work"])
    if work <= 0:
        return " " * BAR_WIDTH
    done = min(1.0, float(job["done"]) / work)
    running = job["state"] == "running" and job["completion"] is None
    slot = min(1.0 - done, float(job["workers"]) * ran / work) if running else 0.0
    full = round(done * BAR_WIDTH)
    moving = round((done + slot) * BAR_WIDTH) - full
    return ("#" * full + ">" * moving).ljust(BAR_WIDTH)


class RunProgress:
    """``on_status`` of ``psched run``: once a slot has ended, a line naming it and one line
    per job in play (running, waiting or held, or completed since the slot shown before),
    each with its bar and work done; written to ``out`` at once."""

    def __init__(self, out: TextIO) -> None:
        self.out = out
        self.shown = -1  #: the last slot shown

    def __call__(self, st: dict[str, Any]) -> None:
        ended = int(st["slot"]) - 1  # every phase of slot t comes after slot t - 1 ended
        if ended <= self.shown:
            return
        since, self.shown = self.shown, ended
        jobs = [j for j in st["jobs"] if j["state"] in ("running", "waiting", "held")
                or (j["completion"] is not None and since < j["completion"] <= ended)]
        lines = [f"slot {ended} ended: {len(jobs) or 'no'} job(s) in play"]
        lines += [f"  {j['job_id'][:16]:<16} {j['state'][:10]:<10} [{progress_bar(j, 0.0)}] "
                  f"{j['done']:>6.1f}/{j['work']:<5} worker-slots"
                  + (f"  {j['loss']}" if j["loss"] else "") for j in jobs]
        print("\n".join(lines), file=self.out, flush=True)


def cmd_status(args: argparse.Namespace) -> int:
    client = ServiceClient(args)
    clear = args.watch and not args.json and sys.stdout.isatty()  # a pipe gets no escapes
    while True:
        st = _status(client)
        if args.json:
            print(json.dumps(st), flush=True)
        else:
            print(("\x1b[2J\x1b[H" if clear else "") + format_status(st)
                  + ("\n" if args.watch and not clear else ""), flush=True)
        over = all(j["state"] not in ("running", "waiting", "queued", "held")
                   for j in st["jobs"])
        if not args.watch or over or not st["running"]:
            return 0
        time.sleep(min(2.0, st["slot_seconds"] / 10))


def cmd_cancel(args: argparse.Namespace) -> int:
    client = ServiceClient(args)
    out = client.call("cancel", ("POST", "api/cancel", {"job_id": args.job_id}), args.job_id)
    if out is not True:  # the door: {"error": ...}; Ray: False
        return _unknown_job(args, "no active job")
    print(f"{args.job_id}: cancelled at the next slot boundary")
    return 0


def _unknown_job(args: argparse.Namespace, what: str) -> int:
    """One line for a job the service does not have; exit code 2."""
    print(f"psched: error: {what} {args.job_id!r} in the service of {args.dir} "
          f"('psched status --dir {args.dir}' lists its jobs)", file=sys.stderr)
    return 2


def cmd_logs(args: argparse.Namespace) -> int:
    from urllib.parse import quote

    client = ServiceClient(args)
    lines = client.call("logs", ("GET", f"api/logs/{quote(args.job_id, safe='')}", None),
                        args.job_id)
    if not lines or not isinstance(lines, list):  # the door: {"error": ...}; Ray: []
        return _unknown_job(args, "no job")
    print("\n".join(lines))
    return 0
