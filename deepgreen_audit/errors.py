"""Typed errors for problems in what the user gave us.

The command line prints a `UserError` as one clear line (no traceback) and
exits `USAGE_EXIT` (2); anything else is a bug in deepgreen, printed as one line that says
so, with exit status `BUG_EXIT` (the traceback only with DEEPGREEN_TRACEBACK=1).
"""

from __future__ import annotations

import codecs
import difflib
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path

#: Exit status of a check that failed: a failing check, an invalid package (or, with
#: --strict, a warning or a check that could not run), as pytest and frictionless use it.
CHECK_FAILED = 1
#: Exit status of a usage or input error (a `UserError`; argparse's own errors too).
USAGE_EXIT = 2
#: Exit status of a command that met an internal error (EX_SOFTWARE of sysexits.h).
BUG_EXIT = 70

#: What every verb's exit status means: the one table `deepgreen --help` prints and
#: README.md's "Exit codes" repeats (tests/test_cli_exit.py checks that they agree), so a CI
#: gate built on any verb reads it the same way.
EXIT_CODES: tuple[tuple[int, str], ...] = (
    (0, "done; every check passed (warnings allowed)"),
    (CHECK_FAILED, "a check failed or the package is invalid; with --strict, also a warning "
                   "or a check that could not run (not one that does not apply)"),
    (USAGE_EXIT, "a usage or input error: a bad option, an unreadable input, --select that "
                 "matches no check, an output that exists without --overwrite"),
    (BUG_EXIT, "a bug in deepgreen (one line; DEEPGREEN_TRACEBACK=1 shows the traceback)"),
    (130, "interrupted (Ctrl-C); 143: terminated (SIGTERM); nothing was half-written"),
)


class UserError(Exception):
    """A problem with the user's input or request, named precisely."""

    def __init__(self, message: str, *, path: str | Path | None = None,
                 row: int | None = None, field: str | None = None,
                 code: str = "user-error"):
        self.message = message
        self.path = path_text(path) if path is not None else None
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
            where.append(f"{field_word(self.path, self.field)} {self.field!r}")
        prefix = ": ".join([", ".join(where)]) + ": " if where else ""
        return f"{prefix}{self.message}"


#: The codec error handler that writes each lone surrogate of a text as what it stands for:
#: `\xff` for the byte 0xff of a file name that is not UTF-8 (Python holds such a byte as
#: U+DCFF, "surrogateescape"), `\ud800` for one that stands for no byte.  `path_text` uses
#: it, and `cli.main` sets it on stdout and stderr, so that no name is printed raw or crashes
#: a print.
NAME_BYTES = "deepgreen-name-bytes"


def _name_bytes(exc: UnicodeError) -> tuple[str, int]:
    if not isinstance(exc, UnicodeEncodeError):
        raise exc
    shown = "".join(f"\\x{ord(c) - 0xDC00:02x}" if 0xDC80 <= ord(c) <= 0xDCFF
                    else f"\\u{ord(c):04x}" for c in exc.object[exc.start:exc.end])
    return shown, exc.end


codecs.register_error(NAME_BYTES, _name_bytes)


def path_text(path: str | Path) -> str:
    r"""`path` as text every output can hold: a file name is any bytes the OS allows, and a
    byte that is not UTF-8 is shown as the byte it stands for, `\xff` (the name's other
    characters as they are; the output's own escaping, of control characters say, is the
    writer's)."""
    return str(path).encode("utf-8", NAME_BYTES).decode("utf-8")


#: Files whose fields are the columns of a table; every other file's are the keys of a document
#: (a plan or experiment.toml, codecarbon.ini, a descriptor or manifest in JSON).
TABLE_SUFFIXES = (".csv", ".tsv")


def field_word(path: str | None, field: str) -> str:
    """What a `UserError`'s field is called where it is printed: an option of the command line
    (it starts with '-'), a column of a CSV table, else a key (TOML, JSON, INI)."""
    if field.startswith("-"):
        return "option"
    return "column" if path and Path(path).suffix.lower() in TABLE_SUFFIXES else "key"


def unknown_name(name: str, valid: Sequence[str], what: str,
                 reasons: Mapping[str, str] | None = None) -> str:
    """The message that refuses `name`, which is not `what` (e.g. "an ecosystem of the
    specification"): the reason it is refused where `reasons` gives one (matched ignoring
    case), else the closest valid name when one is close; always the valid names."""
    reason = next((text for key, text in (reasons or {}).items()
                   if key.lower() == name.lower()), None)
    close = did_you_mean(name, valid)
    hint = f": {reason}" if reason else f"; {close}" if close else ""
    return f"{name!r} is not {what}{hint} (valid: {', '.join(valid) or 'none'})"


def did_you_mean(name: str, valid: Sequence[str]) -> str:
    """"did you mean 'a', 'b' or 'c'?" of the names `closest` finds, or "" when none is close."""
    names = [repr(v) for v in closest(name, valid)]
    return f"did you mean {' or '.join(filter(None, (', '.join(names[:-1]), *names[-1:])))}?" \
        if names else ""


def closest(name: str, valid: Sequence[str]) -> list[str]:
    """The valid names `name` most likely meant, ignoring case: the one it spells, else those
    that contain it (up to three: 'pytorch' is 'python-pytorch'), else difflib's closest."""
    lowered = {v.lower(): v for v in valid}
    key = name.lower()
    if key in lowered:
        return [lowered[key]]
    containing = [v for k, v in lowered.items() if key and key in k]
    if containing:
        return containing[:3]
    return [lowered[m] for m in difflib.get_close_matches(key, list(lowered), n=1)]


def refuse_unknown(names: Iterable[str], valid: Sequence[str], what: str, *,
                   reasons: Mapping[str, str] | None = None, path: str | Path | None = None,
                   field: str | None = None, code: str = "usage-error") -> None:
    """Raise a `UserError` naming the first of `names` that is not in `valid` (see
    `unknown_name`): the one way every verb refuses a name a user misspelt."""
    for name in names:
        if name not in valid:
            raise UserError(unknown_name(str(name), valid, what, reasons), path=path,
                            field=field, code=code)


class Terminated(BaseException):
    """SIGTERM arrived: unwinds like Ctrl-C, so staging folders are removed on the way out."""


class OutputExists(UserError):
    """The output exists and the user did not ask to overwrite it."""

    def __init__(self, path: str | Path):
        super().__init__("already exists; pass --overwrite to replace it", path=path,
                         code="output-exists")
