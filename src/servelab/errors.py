"""Errors a user can act on.

Every problem caused by input or by the machine is a ``ServelabError``: the CLI
prints it as one line (problem, then the fix) and exits with its code, never
with a traceback. Anything else is a bug in servelab and keeps its traceback.
"""

from __future__ import annotations


class ServelabError(Exception):
    """A problem the user can fix. ``detail`` (e.g. a log tail) is shown below the line."""

    exit_code = 2

    def __init__(self, problem: str, fix: str = "", *, detail: str = "") -> None:
        super().__init__(problem)
        self.problem = problem
        self.fix = fix
        self.detail = detail

    def one_line(self) -> str:
        return f"{self.problem} (fix: {self.fix})" if self.fix else self.problem


class SpecError(ServelabError):
    """Invalid experiment, study option or knob value."""

    exit_code = 2


class MissingToolError(ServelabError):
    """A program servelab needs (nginx, a load driver, an app server) is not installed."""

    exit_code = 3


class StackStartError(ServelabError):
    """A server of the stack failed to start or to answer the readiness request."""

    exit_code = 4


class LoadDriverError(ServelabError):
    """The load driver failed, timed out or printed output servelab cannot read."""

    exit_code = 5
