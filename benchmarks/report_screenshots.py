"""Screenshots of two reports for the README: the demo trace and ElasticFlow cluster10.

    python benchmarks/report_screenshots.py            # writes docs/report_demo.png and
                                                       # docs/report_elasticflow10.png

Each runs ``psched simulate --out`` into a temporary folder, opens its ``report.html`` in
headless Chromium (``tests/browser.py``), checks that the page has no console error and that
every chart is drawn, and saves a full-page screenshot.
"""

from __future__ import annotations

import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests"))

from browser import open_page  # noqa: E402

from psched.cli.main import main  # noqa: E402

RUNS = {
    "report_demo.png": ["--trace", str(ROOT / "traces" / "demo_sim.csv"),
                        "--policies", "fifo,srtf,oasis"],
    "report_elasticflow10.png": [
        "--trace", str(ROOT / "traces" / "elasticflow" / "augmented" / "cluster10.csv"),
        "--load", "0.3", "--policies", "fifo,srtf,oasis"],
}
CHARTS = ('[...document.querySelectorAll("img.chart")].map(i => i.complete && '
          'i.naturalWidth > 0)')


def shoot(name: str, args: list[str], docs: Path) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        out = Path(tmp) / "out"
        if main(["simulate", *args, "--no-plots", "--out", str(out)]) != 0:
            raise SystemExit(f"simulate failed for {name}")
        page = open_page(out / "report.html", CHARTS, width=1100)
        if page.errors or not all(page.value):
            raise SystemExit(f"{name}: errors {page.errors}, charts drawn {page.value}")
        (docs / name).write_bytes(page.screenshot)
        print(f"wrote {docs / name} ({len(page.value)} charts)")


if __name__ == "__main__":
    docs = ROOT / "docs"
    docs.mkdir(exist_ok=True)
    for name, args in RUNS.items():
        shoot(name, args, docs)
