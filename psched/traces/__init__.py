"""The inputs of a run: job traces (the native CSV format and the synthetic scenarios of
``oasis.md`` section 7) and cluster files (:mod:`~psched.traces.clusters`).

Adapters for public traces live in their own modules of this package, one per format family.
"""

from psched.traces.detect import FORMATS, detect_format, load_any, load_with_report
from psched.traces.native import load_trace, write_trace
from psched.traces.synth import (
    SCENARIOS,
    SynthReport,
    fig5_instance,
    oasis_paper_cluster,
    oasis_paper_jobs,
)

__all__ = [
    "FORMATS",
    "SCENARIOS",
    "SynthReport",
    "detect_format",
    "fig5_instance",
    "load_any",
    "load_trace",
    "load_with_report",
    "oasis_paper_cluster",
    "oasis_paper_jobs",
    "write_trace",
]
