"""Typed errors for problems in what the user gave us.

The command line prints a `UserError` as one clear line (no traceback) and
exits 2; anything else is a bug in deepgreen, printed as one line that says
so, with exit status `BUG_EXIT` (the traceback only with DEEPGREEN_TRACEBACK=1).
"""

from __future__ import annotations

from pathlib import Path

#: Exit status of a command that met an internal error (EX_SOFTWARE of sysexits.h).
BUG_EXIT = 70


class UserError(Exception):
    """A problem with the user's input or request, named precisely."""

    def __init__(self, message: str, *, path: str | Path | None = None,
                 row: int | None = None, field: str | None = None,
                 code: str = "user-error"):
        self.message = message
        self.path = str(path) if path is not None else None
        self.row = row
        self.field = field
        self.code = code
        super().__init__(self.__str__())

    def __str__(self) -> str:
        where = []
        if self.path:
            where.append(self.path)
        if self.row is not None:
            where.append(f"row {self.row}")
        if self.field:
            where.append(f"column {self.field!r}")
        prefix = ": ".join([", ".join(where)]) + ": " if where else ""
        return f"{prefix}{self.message}"


class Terminated(BaseException):
    """SIGTERM arrived: unwinds like Ctrl-C, so staging folders are removed on the way out."""


class OutputExists(UserError):
    """The output exists and the user did not ask to overwrite it."""

    def __init__(self, path: str | Path):
        super().__init__("already exists; pass --overwrite to replace it", path=path,
                         code="output-exists")
