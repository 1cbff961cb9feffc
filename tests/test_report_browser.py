"""``report.html`` opened in a real headless Chromium: no console error, no request beyond
the file itself, every chart present and drawn; a screenshot is saved. Also the report's
rebuild (``psched report DIR``) and its aggregation past ``max_rects``.
"""

from __future__ import annotations

import base64
import io
import re
from pathlib import Path

import matplotlib.image
import numpy as np
import pytest
from browser import chromium, open_page

from psched.cli.main import main
from psched.results.report import REPORT_NAME, write_report

ROOT = Path(__file__).resolve().parents[1]
DEMO = ROOT / "traces" / "demo_sim.csv"
POLICIES = ("fifo", "oasis")
CHARTS = """[...document.querySelectorAll("img.chart")].map(i =>
    ({id: i.id, complete: i.complete, w: i.naturalWidth, h: i.naturalHeight,
      shown: i.getBoundingClientRect().width}))"""
needs_chromium = pytest.mark.skipif(chromium() is None,
                                    reason="no chromium (.ci/run installs it)")


@pytest.fixture(scope="module")
def out(tmp_path_factory: pytest.TempPathFactory) -> Path:
    folder = tmp_path_factory.mktemp("report") / "out"
    assert main(["simulate", "--trace", str(DEMO), "--jobs", "20", "--slots", "60",
                 "--policies", ",".join(POLICIES), "--no-plots", "--out", str(folder)]) == 0
    return folder


def _expected_ids() -> set[str]:
    ids = {"comparison", "jct-cdf", "prices-oasis"}
    for p in POLICIES:
        ids |= {f"gantt-{p}", f"util-{p}"}
    return ids


def test_report_is_self_contained_and_names_trace_and_cluster(out: Path) -> None:
    text = (out / REPORT_NAME).read_text()
    assert "demo_sim.csv" in text and "worker +" in text and "PS servers" in text
    assert not re.search(r"""(src|href)=["']?(https?:)?//""", text)  # no network
    ids = set(re.findall(r'<img class="chart" id="([^"]+)"', text))
    assert ids == _expected_ids()


def test_every_chart_is_a_non_blank_picture(out: Path) -> None:
    text = (out / REPORT_NAME).read_text()
    for chart_id, data in re.findall(r'id="([^"]+)" alt="[^"]*" src="data:image/png;base64,'
                                     r'([^"]+)"', text):
        img = matplotlib.image.imread(io.BytesIO(base64.b64decode(data)), format="png")
        assert img.shape[0] > 200 and img.shape[1] > 400, chart_id
        assert float(np.std(img[..., :3])) > 0.01, f"{chart_id} is blank"


@needs_chromium
def test_report_loads_in_chromium_without_errors_and_draws_every_chart(
        out: Path, tmp_path: Path) -> None:
    page = open_page(out / REPORT_NAME, CHARTS)
    assert page.errors == []
    assert all(u.startswith(("file:", "data:")) for u in page.requests), page.requests
    charts = {c["id"]: c for c in page.value}
    assert set(charts) == _expected_ids()
    for c in charts.values():
        assert c["complete"] and c["w"] > 400 and c["h"] > 200 and c["shown"] > 300, c
    shot = tmp_path / "report.png"
    shot.write_bytes(page.screenshot)
    img = matplotlib.image.imread(shot)
    assert img.shape[0] > 2000 and img.shape[1] == 1280  # the whole page, all charts


@needs_chromium
def test_the_browser_check_sees_a_broken_chart_and_a_script_error(tmp_path: Path) -> None:
    """The check above can fail: a console error, an exception and an undecodable chart."""
    bad = tmp_path / "bad.html"
    bad.write_text('<!DOCTYPE html><html><body><img class="chart" id="x" '
                   'src="data:image/png;base64,AAAA"><script>console.error("boom");'
                   "missing();</script></body></html>")
    page = open_page(bad, CHARTS)
    assert any("boom" in e for e in page.errors)
    assert any("missing" in e for e in page.errors)
    assert page.value[0]["w"] == 0


def test_psched_report_rebuilds_the_report_from_the_files(
        out: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    import shutil

    copy = tmp_path / "copy"
    shutil.copytree(out, copy)
    (copy / REPORT_NAME).unlink()
    assert main(["report", str(copy)]) == 0
    rebuilt = (copy / REPORT_NAME).read_text()
    assert set(re.findall(r'<img class="chart" id="([^"]+)"', rebuilt)) == _expected_ids()
    capsys.readouterr()
    assert main(["report", str(tmp_path)]) == 2  # not an output folder
    assert "not a folder written by" in capsys.readouterr().err


def test_a_large_schedule_is_aggregated_and_the_page_says_so(out: Path, tmp_path: Path
                                                             ) -> None:
    import shutil

    copy = tmp_path / "copy"
    shutil.copytree(out, copy)
    write_report(copy, max_rects=10)
    text = (copy / REPORT_NAME).read_text()
    assert text.count("too many to draw one by one") == len(POLICIES)
    assert "jobs are not distinguished" in text


def test_psched_report_on_a_damaged_output_is_one_line(
        out: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    import shutil

    copy = tmp_path / "copy"
    shutil.copytree(out, copy)
    (copy / "fifo" / "jobs.csv").write_text("job_id\nj0\n")  # columns missing
    assert main(["report", str(copy)]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and str(copy) in err and "Traceback" not in err
