"""Atomic writes: a temporary sibling, then a rename.

An interrupted command leaves either the old state or the new one, never
half of either (DESIGN.md section 5).
"""

from __future__ import annotations

import os
import shutil
import tempfile
from pathlib import Path

from deepgreen_audit.errors import OutputExists


def _umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask


def write_bytes(path: Path, data: bytes) -> None:
    """Write `data` to `path` atomically (fsynced temporary file + rename)."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    try:
        os.fchmod(fd, 0o666 & ~_umask())  # mkstemp's 0600 would hide the file from others
        with os.fdopen(fd, "wb") as handle:
            handle.write(data)
            handle.flush()
            os.fsync(handle.fileno())
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def write_text(path: Path, text: str) -> None:
    write_bytes(path, text.encode("utf-8"))


def check_output(path: Path, overwrite: bool) -> None:
    """Refuse an existing output unless the user asked to overwrite it."""
    if Path(path).exists() and not overwrite:
        raise OutputExists(path)


class StagedDirectory:
    """A directory built beside its target and renamed into place on success.

    Use as a context manager: write into `.path`; on a clean exit the
    staged directory replaces the target (the old one is removed only after
    the new one is in place); on an exception it is deleted.
    """

    def __init__(self, target: Path, overwrite: bool = False):
        self.target = Path(target)
        check_output(self.target, overwrite)
        self.target.parent.mkdir(parents=True, exist_ok=True)
        self.path = Path(tempfile.mkdtemp(prefix=f".{self.target.name}.", suffix=".staged",
                                          dir=self.target.parent))
        os.chmod(self.path, 0o777 & ~_umask())  # mkdtemp's 0700 would outlive the rename

    def __enter__(self) -> "StagedDirectory":
        return self

    def __exit__(self, exc_type, exc, tb) -> None:
        if exc_type is not None:
            shutil.rmtree(self.path, ignore_errors=True)
            return
        old = None
        if self.target.exists():
            old = self.target.with_name(f".{self.target.name}.{os.getpid()}.old")
            os.replace(self.target, old)
        os.replace(self.path, self.target)
        if old is not None:
            shutil.rmtree(old, ignore_errors=True)
