"""What a run leaves behind: per-job rows, metrics, ``summary.json``, the ``--out`` files, the
figures and ``report.html``."""
