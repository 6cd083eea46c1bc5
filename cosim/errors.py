"""Errors that mean "the user's input is wrong" (exit code 2, one line, no traceback)."""

from __future__ import annotations


class CosimInputError(ValueError):
    """Bad user input: a malformed config, trace or results file, or an impossible setting.

    The message is one line that names the offending field and says how to fix it. The CLI turns it into
    ``Error: <message>`` on stderr and exit code 2.
    """

    def __init__(self, field: str, problem: str, fix: str | None = None):
        self.field = field
        self.problem = problem
        self.fix = fix
        text = f"{field}: {problem}"
        if fix:
            text += f" ({fix})"
        super().__init__(text)
