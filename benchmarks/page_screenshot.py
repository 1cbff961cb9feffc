"""The screenshot of the live page in docs/page.md: a real ``psched serve`` (embedded Ray,
loopback only) running the example jobs, opened in headless Chromium.

    python benchmarks/page_screenshot.py        # writes docs/page.png (about 2 minutes)

It starts ``psched serve --slot-seconds 10 --worker-cpus 2 --history traces/run_small.csv``
in a temporary folder, submits ``examples/jobs/digits-*.toml``, waits until some slots have
run, opens the address ``psched page`` prints, checks that the page has no console error and
draws every chart with slots that ran, saves a full-page screenshot and stops the service.
"""

from __future__ import annotations

import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests"))

from browser import open_page  # noqa: E402

from ray_cluster.service import faults  # noqa: E402

SLOT_S = 10.0
SLOTS_RUN = 5  #: slots that have run when the picture is taken
#: Resolves once the page shows slot SLOTS_RUN or later with its charts drawn.
READY = f"""new Promise((resolve) => {{
  const giveUp = Date.now() + 120000;
  const tick = () => {{
    const slot = Number(document.getElementById("slot").textContent);
    const svgs = document.querySelectorAll("#gantt svg, #util svg, #prices svg").length;
    const ran = document.querySelectorAll("#gantt-svg rect.k0").length;
    if ((slot >= {SLOTS_RUN} && svgs >= 5 && ran > 0) || Date.now() > giveUp) {{
      resolve({{slot, svgs, ran}});
      return;
    }}
    setTimeout(tick, 200);
  }};
  tick();
}})"""


def main() -> None:
    jobs = sorted(str(p) for p in (ROOT / "examples" / "jobs").glob("digits-*.toml"))
    with tempfile.TemporaryDirectory(prefix="psched-page-") as tmp:
        work = Path(tmp) / "d"
        with faults.serving(work, "--slot-seconds", str(SLOT_S), "--worker-cpus", "2",
                            "--history", str(ROOT / "traces" / "run_small.csv")):
            sub = faults.psched("submit", "--dir", str(work), *jobs)
            if sub.returncode != 0:
                raise SystemExit(f"submit failed: {sub.stderr}")
            print(sub.stdout, end="")
            time.sleep(SLOT_S * (SLOTS_RUN - 1))  # the page is opened when there is history
            url = faults.psched("page", "--dir", str(work)).stdout.strip()
            page = open_page(url, READY, timeout_s=240)
        got = page.value
        if page.errors or got["svgs"] < 5 or got["ran"] == 0 or got["slot"] < SLOTS_RUN:
            raise SystemExit(f"page not ready: errors {page.errors}, {got}")
        out = ROOT / "docs" / "page.png"
        out.write_bytes(page.screenshot)
        print(f"wrote {out} (slot {got['slot']}, {got['ran']} boxes that ran)")


if __name__ == "__main__":
    main()
