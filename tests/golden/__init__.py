"""Recorded outputs of every policy on fixed inputs (``runs.csv``, ``oasis_rp.csv``,
``greedy.csv``), checked by ``tests/test_golden.py``; written by ``make.py``."""
