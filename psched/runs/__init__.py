"""Runs as library calls: ``psched simulate`` and ``trace synth`` (:mod:`~psched.runs.runner`),
sweeps (:mod:`~psched.runs.sweep`), the competitive-ratio study (:mod:`~psched.runs.ratio`) and
its figures, and progress on stderr."""
