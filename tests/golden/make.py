"""Record the outputs that ``tests/test_golden.py`` checks.

    python tests/golden/make.py                       # every file
    python tests/golden/make.py --only oasis-rp       # oasis_rp.csv alone (its behaviour moves)

``runs.csv``: one row per run of :data:`golden.cases.RUNS` except ``oasis-rp``;
``oasis_rp.csv``: the ``oasis-rp`` runs; ``greedy.csv``: the greedy fills on
:data:`golden.cases.GREEDY_EPOCHS`. Each file is written to a temporary name, then renamed.
Regenerate a file only for a change that is meant to change what it records, and say so in the
commit.
"""

from __future__ import annotations

import argparse
import csv
import io
import sys
from collections.abc import Iterable, Sequence
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))

from golden.cases import (  # noqa: E402 (after the path above)
    GREEDY_COLUMNS,
    GREEDY_EPOCHS,
    RUN_COLUMNS,
    RUNS,
    greedy_rows,
    run_row,
)
from psched.traces.native import atomic_write_text  # noqa: E402

__all__ = ["FILES", "main", "rows_of"]

#: file name -> (columns, the policy labels it records: None = every label but oasis-rp)
FILES: dict[str, tuple[Sequence[str], str | None]] = {
    "runs.csv": (RUN_COLUMNS, None),
    "oasis_rp.csv": (RUN_COLUMNS, "oasis-rp"),
    "greedy.csv": (GREEDY_COLUMNS, None),
}


def rows_of(name: str) -> Iterable[dict[str, str]]:
    """The rows of one recorded file, computed now."""
    if name == "greedy.csv":
        for epoch in GREEDY_EPOCHS:
            yield from greedy_rows(*epoch)
        return
    only = FILES[name][1]
    for label, policy, options, case in RUNS:
        if (policy == only) if only else policy != "oasis-rp":
            yield run_row(label, policy, options, case)


def _write(name: str) -> None:
    buf = io.StringIO()
    w = csv.DictWriter(buf, fieldnames=list(FILES[name][0]), lineterminator="\n")
    w.writeheader()
    w.writerows(rows_of(name))
    atomic_write_text(HERE / name, buf.getvalue())
    print(f"wrote {HERE / name}")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--only", choices=("runs", "oasis-rp", "greedy"),
                    help="write one file: runs.csv, oasis_rp.csv or greedy.csv")
    args = ap.parse_args()
    names = {"runs": ["runs.csv"], "oasis-rp": ["oasis_rp.csv"], "greedy": ["greedy.csv"],
             None: list(FILES)}[args.only]
    for name in names:
        _write(name)


if __name__ == "__main__":
    main()
