"""The scheduling core: the data model, utilities, input limits, the one loop, the executor, the
plan checker and placement. Imports nothing above it (no policy, result or CLI module)."""
