"""Whole-run fingerprints of ``oasis-rp``: do two code versions make the same decisions?

Runs ``oasis-rp[:opt=value...]`` (certificate off) on the cells of the policy table --
``oasis-<n>`` (seeds), ``ef-<trace>`` (seed 0), the ``fig5`` instances -- and writes, per
cell, a SHA-256 of every decision the run made: the allocation rows (slot, job, workers and
PS per server) and, per job, admitted / promised slot / completion. Run it once per code
version (``PYTHONPATH`` picks the version) and ``--compare`` the two files: the exact
speed-ups of the re-pack path and restructures of the policy must leave every fingerprint
unchanged.

    PYTHONPATH=/path/to/old python benchmarks/rp_same_runs.py --out /tmp/old.json
    PYTHONPATH=$PWD python benchmarks/rp_same_runs.py --out /tmp/new.json
    python benchmarks/rp_same_runs.py --compare /tmp/old.json /tmp/new.json
    python benchmarks/rp_same_runs.py --scenarios ef-cluster04 --out /tmp/c04.json
    python benchmarks/rp_same_runs.py --scenarios philly-3000,philly-8000 --out /tmp/ph.json

``philly-<n>`` cells are the first ``n`` jobs' synthetic Philly-like trace of
``bench_oasis_rp_scale.py`` (1-hour slots, the trace's default cluster), one cell per seed of
``--philly-seeds``; each row also records how many promises were made late
(``committed_late``).
"""

from __future__ import annotations

import os

for _var in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ.setdefault(_var, "1")

import argparse  # noqa: E402
import hashlib  # noqa: E402
import json  # noqa: E402
import sys  # noqa: E402
import time  # noqa: E402
from pathlib import Path  # noqa: E402

sys.path.insert(0, str(Path(__file__).resolve().parent))

from bench_oasis_rp_levers import cell_inputs, instances, run_variant  # noqa: E402
from bench_oasis_rp_scale import load as scale_load  # noqa: E402

from psched.core.promises import broken_promises  # noqa: E402
from psched.core.records import RunResult  # noqa: E402

__all__ = ["fingerprint"]

DEFAULT_SCENARIOS = "oasis-100,oasis-200,oasis-300,oasis-400,ef-cluster10,ef-195job,fig5"


def fingerprint(res: RunResult) -> str:
    """SHA-256 of the run's allocation rows and each job's admission, promise, completion."""
    h = hashlib.sha256()
    h.update(repr(res.allocations).encode())
    h.update(repr(sorted((j, r.admitted, r.promised, r.completion)
                         for j, r in res.records.items())).encode())
    return h.hexdigest()


def _cells(scenario: str, seeds: list[int], philly_seeds: list[int],
           fig5_per_cell: int) -> list[str]:
    """The instances of ``scenario``: a ``philly-<n>`` cell per seed of ``philly_seeds``."""
    if scenario.startswith("philly-"):
        return [str(s) for s in philly_seeds]
    return instances(scenario, seeds, fig5_per_cell)


def _inputs(scenario: str, instance: str) -> tuple[list, object, int]:
    """The jobs, cluster and horizon of one cell (``philly-<n>`` as at trace scale)."""
    if scenario.startswith("philly-"):
        return scale_load(scenario, int(instance))
    return cell_inputs(scenario, instance)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--scenarios", default=DEFAULT_SCENARIOS)
    ap.add_argument("--seeds", default="0,1")
    ap.add_argument("--philly-seeds", default="0")
    ap.add_argument("--fig5-instances", type=int, default=7)
    ap.add_argument("--variant", default="oasis-rp")
    ap.add_argument("--out", type=Path)
    ap.add_argument("--compare", nargs=2, type=Path, metavar=("OLD", "NEW"))
    args = ap.parse_args()
    if args.compare:
        old, new = (json.loads(p.read_text()) for p in args.compare)
        keys = sorted(set(old) & set(new))
        differ = [k for k in keys if old[k]["sha"] != new[k]["sha"]]
        cpu = [(old[k]["cpu_s"], new[k]["cpu_s"]) for k in keys]
        print(f"{len(keys)} cells in both, {len(differ)} differ: {differ[:10]}")
        print(f"CPU s old {sum(c[0] for c in cpu):.1f}, new {sum(c[1] for c in cpu):.1f}")
        raise SystemExit(1 if differ else 0)
    seeds = [int(s) for s in args.seeds.split(",")]
    philly_seeds = [int(s) for s in args.philly_seeds.split(",")]
    out: dict[str, dict[str, object]] = {}
    for sc in args.scenarios.split(","):
        for inst in _cells(sc, seeds, philly_seeds, args.fig5_instances):
            res, cpu = run_variant(args.variant, *_inputs(sc, inst))
            if broken_promises(res):
                raise SystemExit(f"{sc} {inst}: broken promise")
            out[f"{sc}/{inst}"] = {"sha": fingerprint(res), "cpu_s": round(cpu, 2),
                                   "repack_tried": res.report.get("repack_tried", 0),
                                   "committed_late": res.report.get("committed_late", 0)}
            print(sc, inst, out[f"{sc}/{inst}"], flush=True)
    assert args.out is not None, "--out is required to measure"
    tmp = args.out.with_suffix(".tmp")
    tmp.write_text(json.dumps(out, indent=1, sort_keys=True))
    tmp.replace(args.out)
    print(time.strftime("%H:%M UTC", time.gmtime()), "wrote", args.out)


if __name__ == "__main__":
    main()
