"""The one gate for every path deepgreen opens or writes.

Inputs are regular files, read whole only up to `MAX_READ_BYTES`: a FIFO
would block `open` forever, a character device (`/dev/zero`) never ends, a
socket or a folder cannot be read as a file.  The type is taken with
`os.stat` *before* opening, so a FIFO is never opened, and again with
`os.fstat` after, so a path swapped in between is caught too.  Outputs are
checked before anything is written: no NUL byte, every name within the file
system's limit, and (`atomic.refuse_overlap`) no overlap with an input.
Every refusal is a `UserError` naming the path.
"""

from __future__ import annotations

import errno
import os
import stat
from pathlib import Path
from typing import BinaryIO

from deepgreen_audit.errors import UserError

#: The most bytes one file is read whole: far above any package table (the shipped
#: samples.csv is 9 MB), far below what would exhaust this machine's memory.
MAX_READ_BYTES = 2 << 30

_KINDS = ((stat.S_ISDIR, "a folder"), (stat.S_ISFIFO, "a FIFO (named pipe)"),
          (stat.S_ISSOCK, "a socket"), (stat.S_ISCHR, "a character device"),
          (stat.S_ISBLK, "a block device"))


def kind_of(mode: int) -> str:
    """What a non-regular file is, in words."""
    return next((name for test, name in _KINDS if test(mode)), "not a regular file")


def check_text(path: str | Path, what: str = "path") -> None:
    """Refuse a path with a NUL byte, which no file system can name (Python would raise
    ValueError deep inside the first call that uses it)."""
    if "\0" in str(path):
        raise UserError(f"the {what} holds a NUL byte, which no file name can hold",
                        path=str(path).replace("\0", "\\0"), code="bad-path")


def regular_file(path: str | Path) -> os.stat_result:
    """The status of `path`, a regular file (symbolic links followed), or a UserError."""
    check_text(path)
    try:
        status = os.stat(path)
    except OSError as exc:
        raise _read_error(path, exc) from None
    if not stat.S_ISREG(status.st_mode):
        raise _not_a_file(path, status.st_mode)
    return status


def files_under(folder: str | Path, pattern: str) -> list[Path]:
    """The files under `folder` (recursively) whose names match `pattern`, sorted.  A folder
    of such a name is searched, not read; any other match that is not a regular file (a
    FIFO, a socket, a device, a symbolic link to one or to nothing) is refused in one line
    naming it, never skipped without a word and never opened: its type is taken with
    `os.stat` (opening a FIFO would block)."""
    found = []
    for path in sorted(Path(folder).rglob(pattern)):
        try:
            mode = os.stat(path).st_mode
        except OSError as exc:
            raise _read_error(path, exc) from None
        if stat.S_ISDIR(mode):
            continue
        if not stat.S_ISREG(mode):
            raise _not_a_file(path, mode)
        found.append(path)
    return found


def _not_a_file(path: str | Path, mode: int) -> UserError:
    link = " (a symbolic link to it)" if os.path.islink(path) else ""
    return UserError(f"is {kind_of(mode)}{link}, not a regular file; deepgreen reads regular "
                     "files only", path=path, code="not-a-file")


def open_regular(path: str | Path) -> BinaryIO:
    """The regular file `path` opened for reading bytes (to read piecewise, or whole with
    `read_bytes`)."""
    regular_file(path)
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK)
    except OSError as exc:
        raise _read_error(path, exc) from None
    handle = os.fdopen(fd, "rb")
    status = os.fstat(handle.fileno())
    if not stat.S_ISREG(status.st_mode):  # swapped after the first look
        handle.close()
        raise _not_a_file(path, status.st_mode)
    return handle


def read_bytes(path: str | Path, limit_bytes: int = MAX_READ_BYTES) -> bytes:
    """The bytes of the regular file `path`, refused past `limit_bytes`."""
    with open_regular(path) as handle:
        try:
            data = handle.read(limit_bytes + 1)
        except OSError as exc:
            raise _read_error(path, exc) from None
    if len(data) > limit_bytes:
        raise UserError(f"is larger than {limit_bytes:,} bytes, the most deepgreen reads from "
                        "one file", path=path, code="file-too-large")
    return data


def read_text(path: str | Path) -> str:
    """The UTF-8 text of the regular file `path` (see `read_bytes`)."""
    data = read_bytes(path)
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise UserError(f"is not UTF-8 (byte {exc.start})", path=path,
                        row=data[: exc.start].count(b"\n") + 1, code="encoding-error") from None


def check_output_name(path: str | Path) -> None:
    """Refuse an output path the file system cannot hold: a NUL byte, a name longer than
    its folder's NAME_MAX, or a whole path longer than PATH_MAX."""
    check_text(path, "output path")
    absolute = Path(os.path.abspath(path))
    existing = next(p for p in (absolute, *absolute.parents) if os.path.exists(p))
    name_max_bytes = _pathconf(existing, "PC_NAME_MAX", 255)
    # Staging and lock siblings add a prefix and suffix to the name (atomic.py).
    margin_bytes = 32
    for part in absolute.parts[1:]:
        if len(os.fsencode(part)) + margin_bytes > name_max_bytes:
            raise UserError(f"the name {part[:40]!r}... is {len(os.fsencode(part))} bytes; this "
                            f"file system allows {name_max_bytes - margin_bytes} for an output: "
                            "choose a shorter one", path=path, code="name-too-long")
    path_max_bytes = _pathconf(existing, "PC_PATH_MAX", 4096)
    if len(os.fsencode(str(absolute))) + margin_bytes > path_max_bytes:
        raise UserError(f"the path is longer than this file system's {path_max_bytes} bytes: "
                        "choose a shorter one", path=path, code="name-too-long")


def _pathconf(path: Path, name: str, default: int) -> int:
    try:
        return os.pathconf(path, name)
    except (OSError, ValueError):
        return default


def _read_error(path: str | Path, exc: OSError) -> UserError:
    reasons: dict[int | None, str] = {errno.ENAMETOOLONG: "the name is longer than the file system allows",
              errno.ENOENT: "does not exist"}
    reason = reasons.get(exc.errno, exc.strerror or str(exc))
    if exc.errno in (errno.ENOENT, errno.ELOOP) and os.path.islink(path):
        reason = "a symbolic link to nothing readable (its target does not exist, or loops)"
    return UserError(f"cannot read: {reason}", path=path, code="read-error")
