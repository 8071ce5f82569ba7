"""Atomic writes: a temporary sibling, then a rename.

An interrupted command leaves either the old state or the new one, never
half of either (docs/design.md, "Run directories").  Folder outputs also never destroy
their inputs or each other:

* an output that is, contains or lies inside one of the command's inputs is
  refused before anything is written (`refuse_overlap`);
* a writer holds an exclusive lock (`flock` on `.<name>.lock` beside the
  output) from before it stages until after its rename, so a second writer
  of the same output fails at once instead of silently losing one result;
* the final rename never replaces an output that appeared meanwhile unless
  the user passed --overwrite; a file is then published with a hard link
  (`commit_file`), which the kernel refuses when the name exists, so of two
  commands writing one file at once exactly one wins;
* staging folders, and the folders above the output that the writer made,
  are removed when the command fails or is terminated (SIGTERM); one left by
  a killed writer (SIGKILL) is found and removed by the next writer of that
  output, which also puts back an old output that a
  killed overwrite had moved aside but not yet replaced;
* a full disk, a read-only folder or any other OS error is one `UserError`
  line (code `write-error`), with nothing left behind.
"""

from __future__ import annotations

import contextlib
import errno
import fcntl
import os
import re
import shutil
import tempfile
from collections.abc import Callable, Iterator
from pathlib import Path

from deepgreen_audit.errors import OutputExists, UserError
from deepgreen_audit.package.paths import check_output_name

STAGED_SUFFIX = ".staged"
OLD_SUFFIX = ".old"


def _umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask


def write_error(path: Path, exc: OSError) -> UserError:
    """The one-line error for an OS error while writing `path` (disk full, read-only, ...)."""
    reason = exc.strerror or str(exc)
    hints: dict[int | None, str] = {errno.ENOSPC: "; free some space and run the command again",
            errno.EDQUOT: "; free some space and run the command again",
            errno.EROFS: "; choose a writable --out",
            errno.EACCES: "; choose a writable --out"}
    hint = hints.get(exc.errno, "")
    return UserError(f"cannot write: {reason}{hint}; nothing was written", path=path,
                     code="write-error")


def write_bytes(path: Path, data: bytes, *, overwrite: bool = True) -> None:
    """Write `data` to `path` atomically (fsynced temporary file + rename); without
    `overwrite`, never onto a file that exists by then (`commit_file`)."""
    commit_file(stage_file(path, data), path, overwrite=overwrite)


def stage_file(path: Path, data: bytes) -> Path:
    """`data` in an fsynced temporary sibling of `path`, for `commit_file` to move into place:
    a writer of several outputs stages them all before it moves any, so a failure leaves none."""
    path = Path(path)
    check_output_name(path)
    if path.is_dir() and not path.is_symlink():
        raise UserError("is a folder; choose a file name", path=path, code="write-error")
    tmp = None
    new_folders = missing_folders(path)
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
        os.fchmod(fd, 0o666 & ~_umask())  # mkstemp's 0600 would hide the file from others
        with os.fdopen(fd, "wb") as handle:
            handle.write(data)
            handle.flush()
            os.fsync(handle.fileno())
        return Path(tmp)
    except BaseException as exc:
        if tmp is not None:
            Path(tmp).unlink(missing_ok=True)
        remove_empty_folders(new_folders)
        if isinstance(exc, OSError):
            raise write_error(path, exc) from None
        raise


def commit_file(staged: Path, path: Path, *, overwrite: bool = True) -> None:
    """Move a file from `stage_file` onto `path` (a rename); removed on failure.  Without
    `overwrite` it is published with a hard link, which the kernel refuses atomically when
    `path` exists: of two commands writing one output at once, exactly one wins and the other
    fails (an "exists" check, then a rename, would let both succeed, the second silently
    replacing the first)."""
    try:
        if overwrite:
            os.replace(staged, path)
        else:
            _publish_exclusively(staged, path)
    except OSError as exc:
        raise write_error(path, exc) from None
    finally:
        staged.unlink(missing_ok=True)


def _publish_exclusively(staged: Path, path: Path) -> None:
    """`staged` at `path` unless `path` exists (an `OutputExists` that says it appeared)."""
    try:
        os.link(staged, path)
    except FileExistsError:
        raise _appeared(path) from None
    except OSError as exc:
        if exc.errno not in (errno.EPERM, errno.EOPNOTSUPP, errno.EXDEV, errno.EMLINK):
            raise
        # A file system without hard links: the name is taken with O_EXCL, then filled.
        try:
            os.close(os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o666 & ~_umask()))
        except FileExistsError:
            raise _appeared(path) from None
        os.replace(staged, path)


def _appeared(path: Path) -> UserError:
    return UserError("appeared while this command was writing it (another command wrote it); "
                     "nothing was replaced (pass --overwrite to replace it)", path=path,
                     code="output-exists")


def write_text(path: Path, text: str, *, overwrite: bool = True) -> None:
    write_bytes(path, text.encode("utf-8"), overwrite=overwrite)


def write_files(contents: dict[Path, Callable[[], bytes]], *, overwrite: bool) -> None:
    """Write several files all or none: each rendered and staged (`contents` maps a path to
    what renders its bytes) before any is published, then each published (`commit_file`);
    when one fails, the files this call published new and the folders it made are removed,
    so a failed command leaves what was there before."""
    staged: dict[Path, Path] = {}
    published: list[Path] = []
    with folders_removed_on_failure(*contents):
        try:
            for path, render in contents.items():
                staged[path] = stage_file(path, render())
            for path, temporary in staged.items():
                existed = os.path.lexists(path)
                commit_file(temporary, path, overwrite=overwrite)
                if not existed:
                    published.append(path)
        except BaseException:
            for temporary in staged.values():
                temporary.unlink(missing_ok=True)
            for path in published:
                path.unlink(missing_ok=True)
            raise


def missing_folders(path: str | Path) -> list[Path]:
    """The folders above `path` that do not exist yet, deepest first: those a writer of `path`
    makes, and so removes when it fails (never one that was there before it ran)."""
    missing = []
    for folder in Path(os.path.abspath(path)).parents:
        if os.path.lexists(folder):
            break
        missing.append(folder)
    return missing


def remove_empty_folders(folders: list[Path]) -> None:
    """Remove each of `folders` (deepest first) that is empty: one that holds something
    (another command's output written meanwhile) stays."""
    for folder in folders:
        with contextlib.suppress(OSError):
            folder.rmdir()


@contextlib.contextmanager
def folders_removed_on_failure(*paths: Path) -> Iterator[None]:
    """Remove, when the block fails, the empty folders it made above `paths`."""
    new = sorted({f for p in paths for f in missing_folders(p)}, key=lambda f: -len(f.parts))
    try:
        yield
    except BaseException:
        remove_empty_folders(new)
        raise


def check_output(path: Path, overwrite: bool) -> None:
    """Refuse an existing output unless the user asked to overwrite it."""
    if Path(path).exists() and not overwrite:
        raise OutputExists(path)


def refuse_overlap(out: Path, inputs) -> None:
    """Refuse an output that is, contains or lies inside one of `inputs`.

    Replacing such an output would delete what the command is reading
    (`restore PKG --out PKG --overwrite`, `--out .`).
    """
    check_output_name(out)
    target = Path(os.path.realpath(out))
    for item in inputs:
        source = Path(os.path.realpath(item))
        if target == source or target in source.parents or source in target.parents:
            relation = ("is" if target == source else
                        "contains" if target in source.parents else "lies inside")
            raise UserError(f"the output {relation} the input {item}; writing it would destroy "
                            "what the command reads: choose another --out", path=out,
                            code="output-overlaps-input")


class OutputLock:
    """An exclusive lock on an output path, held by one writer at a time.

    The lock is `flock` on `.<name>.lock` beside the output: the kernel drops
    it when its holder dies, so a killed writer never blocks the next one.
    The holder removes the lock file on release; a writer that opened a file
    removed meanwhile notices (its inode is no longer the path's) and retries.
    """

    def __init__(self, target: Path):
        self.target = target
        self.path = target.with_name(f".{target.name}.lock")
        self._fd: int | None = None

    def acquire(self) -> OutputLock:
        while True:
            fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o666 & ~_umask())
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                os.close(fd)
                raise UserError("another deepgreen command is writing this output now (it holds "
                                f"{self.path.name}); wait for it to finish or choose another --out",
                                path=self.target, code="output-locked") from None
            try:
                same = os.stat(self.path).st_ino == os.fstat(fd).st_ino
            except FileNotFoundError:
                same = False
            if same:
                self._fd = fd
                return self
            os.close(fd)

    def release(self) -> None:
        if self._fd is not None:
            self.path.unlink(missing_ok=True)
            os.close(self._fd)
            self._fd = None


def _leftovers(target: Path) -> tuple[list[Path], list[Path]]:
    """Staging folders and moved-aside old outputs that killed writers of `target` left.

    Their names are `.<name>.<token>.staged` and `.<name>.<pid>.old`, tokens
    without dots, so the leftovers of an output `runs.x` are never `runs`'s.
    """
    name = re.escape(target.name)
    staged_re = re.compile(rf"\.{name}\.[A-Za-z0-9_]+{re.escape(STAGED_SUFFIX)}")
    old_re = re.compile(rf"\.{name}\.[0-9]+{re.escape(OLD_SUFFIX)}")
    staged, old = [], []
    for entry in target.parent.iterdir():
        if entry.is_symlink() or not entry.is_dir():
            continue
        if staged_re.fullmatch(entry.name):
            staged.append(entry)
        elif old_re.fullmatch(entry.name):
            old.append(entry)
    return staged, old


def clean_leftovers(target: Path) -> None:
    """Remove what killed writers of `target` left; call only while holding its lock.

    An old output moved aside by a killed overwrite is put back when the new
    one never arrived, so the target holds the old state, not nothing.
    """
    staged, old = _leftovers(target)
    for path in staged:
        shutil.rmtree(path)
    if old and not target.exists() and not target.is_symlink():
        os.rename(old.pop(), target)
    for path in old:
        shutil.rmtree(path)


class StagedDirectory:
    """A directory built beside its target and renamed into place on success.

    Use as a context manager: write into `.path`; on a clean exit the
    staged directory replaces the target (the old one is removed only after
    the new one is in place); on an exception, SIGTERM included, it is
    deleted.  The target's lock is held throughout; `inputs` are the paths
    the command reads, which the target must not overlap.
    """

    def __init__(self, target: Path, overwrite: bool = False, inputs=()):
        check_output_name(target)
        self.target = Path(os.path.abspath(target))
        self.overwrite = overwrite
        refuse_overlap(self.target, inputs)
        check_output(self.target, overwrite)
        self.lock = OutputLock(self.target)
        #: the folders above the target this writer makes, removed again when it fails
        self.new_folders = missing_folders(self.target)

    def __enter__(self) -> StagedDirectory:
        """Take the lock and make the staging folder.  Made here, not in __init__: from here on
        the `with` statement runs __exit__ whatever happens, and a signal that lands in here
        (SIGTERM as the folder appears) removes what was made before it unwinds."""
        try:
            self.target.parent.mkdir(parents=True, exist_ok=True)
            self.lock.acquire()
        except BaseException as exc:
            remove_empty_folders(self.new_folders)
            if isinstance(exc, OSError):
                raise write_error(self.target, exc) from None
            raise
        staged = None
        try:
            clean_leftovers(self.target)
            check_output(self.target, self.overwrite)
            while staged is None:
                # named before it is made: a signal that lands as it appears finds it named,
                # so the clean-up below removes it (mkdtemp names it only on its return)
                staged = _staging_name(self.target)
                try:
                    os.mkdir(staged)   # 0777 less the umask, as any folder the writer makes
                except FileExistsError:
                    staged = None      # another writer's: try another name
            self.path = Path(staged)
        except BaseException as exc:
            if staged is not None:
                shutil.rmtree(staged, ignore_errors=True)
            self.lock.release()
            remove_empty_folders(self.new_folders)
            if isinstance(exc, OSError):
                raise write_error(self.target, exc) from None
            raise
        return self

    def __exit__(self, exc_type, exc, tb) -> None:
        moved = False
        try:
            if exc_type is not None:
                shutil.rmtree(self.path, ignore_errors=True)
                if isinstance(exc, OSError):
                    raise write_error(self.target, exc) from None
                return
            self._move_into_place()
            moved = True
        finally:
            self.lock.release()  # (its file lies in the target's folder: removed first)
            if not moved:
                remove_empty_folders(self.new_folders)

    def _move_into_place(self) -> None:
        if (self.target.exists() or self.target.is_symlink()) and not self.overwrite:
            shutil.rmtree(self.path, ignore_errors=True)
            raise _appeared(self.target)
        old = None
        try:
            if self.target.exists() or self.target.is_symlink():
                old = self.target.with_name(f".{self.target.name}.{os.getpid()}{OLD_SUFFIX}")
                os.replace(self.target, old)
            os.replace(self.path, self.target)
        except OSError as exc:
            if old is not None and not self.target.exists():
                os.replace(old, self.target)
            shutil.rmtree(self.path, ignore_errors=True)
            raise write_error(self.target, exc) from None
        if old is not None:
            _remove(old)


def _staging_name(target: Path) -> str:
    """A name beside `target` to build it under: `.<name>.<random>.staged`."""
    return os.path.join(target.parent, f".{target.name}.{os.urandom(4).hex()}{STAGED_SUFFIX}")


def _remove(path: Path) -> None:
    if path.is_dir() and not path.is_symlink():
        shutil.rmtree(path, ignore_errors=True)
    else:
        path.unlink(missing_ok=True)
