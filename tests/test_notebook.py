"""``notebooks/competitive_ratio.ipynb`` runs top to bottom at a reduced size and saves figures."""

from __future__ import annotations

from pathlib import Path

import pytest

nbformat = pytest.importorskip("nbformat")
nbclient = pytest.importorskip("nbclient")

NOTEBOOK = Path(__file__).resolve().parents[1] / "notebooks" / "competitive_ratio.ipynb"

REDUCED = """
INSTANCES = 1
SERVERS = (3, 6)
PRIORITIES = ((1, 100), (50, 100))
FACTORS = (0.5, 2.0)
JOBS, SLOTS = 10, 10
SEED = 0
TIME_LIMIT = 60.0
FIG_DIR = {fig_dir!r}
"""


def test_competitive_ratio_notebook_runs_and_saves_its_figures(tmp_path: Path) -> None:
    nb = nbformat.read(NOTEBOOK, as_version=4)
    params = [c for c in nb.cells if "parameters" in c.metadata.get("tags", [])]
    assert len(params) == 1, "the notebook needs exactly one cell tagged 'parameters'"
    params[0].source = REDUCED.format(fig_dir=str(tmp_path / "figs"))
    client = nbclient.NotebookClient(nb, timeout=600, kernel_name="python3",
                                     resources={"metadata": {"path": str(tmp_path)}})
    client.execute()
    figs = {p.name for p in (tmp_path / "figs").iterdir()}
    assert {"theorem.png", "ratio_distribution.png", "certificate.png", "estimate_factor.png",
            "policies.png", "solve_times.png", "worst_schedule.png", "worst_prices.png"} <= figs
    text = "".join(o.get("text", "") for c in nb.cells if c.cell_type == "code"
                   for o in c.get("outputs", []))
    assert "OPT/OASiS median" in text and "worst:" in text
    assert "OASiS utility:" in text  # the psched.compare section ran
    for cell in nb.cells:
        if cell.cell_type == "code":
            assert not any(o.get("output_type") == "error" for o in cell.outputs)


def test_the_committed_notebook_is_executed_with_its_figures() -> None:
    """What a reader sees in the repository: every code cell run in order, figures inline."""
    nb = nbformat.read(NOTEBOOK, as_version=4)
    code = [c for c in nb.cells if c.cell_type == "code"]
    counts = [c.get("execution_count") for c in code]
    assert all(isinstance(n, int) for n in counts) and counts == sorted(counts)
    outputs = [o for c in code for o in c.get("outputs", [])]
    assert not any(o.get("output_type") == "error" for o in outputs)
    images = [o for o in outputs if "image/png" in o.get("data", {})]
    assert len(images) >= 8  # six study figures, the schedule and the prices
    assert any("psched.compare" in c.source for c in code)
