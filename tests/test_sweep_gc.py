"""Mapping a seed's jobs pauses Python's cyclic garbage collector (much faster for tens of
thousands of jobs) and leaves it as it found it."""

from __future__ import annotations

import gc
from pathlib import Path

import pytest

from psched.runs.sweep import _gc_paused, load_cell_jobs
from psched.runs.sweep_spec import SweepSpec

DATA = Path(__file__).resolve().parent / "data"


@pytest.mark.parametrize("enabled", [True, False])
def test_mapping_jobs_leaves_the_collector_as_it_was(enabled: bool) -> None:
    spec = SweepSpec(trace=(str(DATA / "helios_cluster_log_sample.csv"),))
    was = gc.isenabled()
    try:
        (gc.enable if enabled else gc.disable)()
        jobs = load_cell_jobs(spec, 0)
        assert gc.isenabled() is enabled
    finally:
        (gc.enable if was else gc.disable)()
    assert jobs == load_cell_jobs(spec, 0)


def test_the_collector_is_off_inside_and_back_on_after_an_error() -> None:
    assert gc.isenabled()
    with pytest.raises(ValueError), _gc_paused():
        assert not gc.isenabled()
        raise ValueError("boom")
    assert gc.isenabled()
