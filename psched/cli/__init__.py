"""The ``psched`` command line: one module per command group (``main`` parses and dispatches)."""
