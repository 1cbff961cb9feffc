"""Errors for bad input: each names the file, the line and the field."""

from __future__ import annotations

__all__ = ["InputError", "PlanViolation"]


class InputError(ValueError):
    """Malformed input (trace row, cluster file, job spec, CLI argument).

    ``str(err)`` is the one-line message the CLI prints: ``file:line: field: problem``.
    """

    def __init__(self, message: str, *, path: str = "", line: int | None = None,
                 field: str = "") -> None:
        self.path, self.line, self.field, self.problem = path, line, field, message
        where = path or "<input>"
        if line is not None:
            where += f":{line}"
        text = f"{where}: {field}: {message}" if field else f"{where}: {message}"
        super().__init__(text)


class PlanViolation(RuntimeError):
    """A plan breaks a capacity or a per-job rule; the simulator refuses to execute it."""
