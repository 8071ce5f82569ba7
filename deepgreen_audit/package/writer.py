"""Write a package of any kind: canonical tables, SHA256SUMS, datapackage.json.

`write_package` writes tables held in memory; `write_package_streamed` writes rows as a
producer yields them, so a package far larger than memory can be written.  Both stage the
folder beside its target (`atomic.StagedDirectory`), hash and count every table's bytes as
they go to disk, and describe the tables from those counts (`descriptor.build`,
`checksums.format_sums`)."""

from __future__ import annotations

import hashlib
from collections.abc import Callable, Iterable
from pathlib import Path

from deepgreen_audit.package import atomic, descriptor as _descriptor, paths
from deepgreen_audit.package.checksums import FILENAME as SUMS_NAME, format_sums
from deepgreen_audit.package.kinds import REPLICATION, Kind
from deepgreen_audit.package.schema import load_schema
from deepgreen_audit.package.tables import TextTable, canonical_bytes, canonical_text

#: Bytes a table file gathers before they go to disk.
_BUFFER = 1 << 20


def write_package(tables: dict[str, TextTable], out: Path, meta: dict, *,
                  descriptor_path: Path | None = None, overwrite: bool = False,
                  extra_files: dict[str, bytes] | None = None, check=None, inputs=(),
                  kind: Kind = REPLICATION) -> Path:
    """Write the tables of a `kind` package under `out` and describe them; returns the
    descriptor path.

    The folder is staged beside its target and renamed into place, so an
    interrupted write leaves the old package or the new one.  The descriptor
    goes into `out` unless `descriptor_path` puts it elsewhere (the shipped
    package is described from the project's top level).  `check`, if given,
    is called with the staged descriptor before anything is moved into place
    and may raise to abandon the write.  `inputs` are what the caller read:
    neither `out` nor the descriptor may overlap them.
    """
    data = {}
    for name in kind.tables:
        table = tables[name]
        expected = load_schema(name).field_names
        if table.header != expected:
            raise ValueError(f"{name}: header {table.header} is not the schema's {expected}")
        data[name] = canonical_bytes(table)
    return _write(((name, data[name]) for name in kind.tables), out, meta,
                  descriptor_path=descriptor_path, overwrite=overwrite, extra_files=extra_files,
                  check=check, inputs=inputs, kind=kind)


def write_package_streamed(rows: Iterable[tuple[str, bytes]], out: Path, meta: dict, *,
                           descriptor_path: Path | None = None, overwrite: bool = False,
                           extra_files: dict[str, bytes] | None = None, check=None, inputs=(),
                           kind: Kind = REPLICATION) -> Path:
    """Write a `kind` package whose rows come from `rows` as they are produced; returns the
    descriptor path.

    `rows` yields (table name, canonical CSV lines without the header, each ending in a line
    feed), in each table's primary-key order: the writer puts the schema's header first and
    the lines in the order they come, hashing and counting them on the way, so memory holds
    one piece at a time, never a table.  Everything else is `write_package`'s.
    """
    def with_headers():
        for name in kind.tables:
            yield name, canonical_text(load_schema(name).field_names, []).encode("utf-8")
        yield from rows

    return _write(with_headers(), out, meta, descriptor_path=descriptor_path,
                  overwrite=overwrite, extra_files=extra_files, check=check, inputs=inputs,
                  kind=kind)


class _TableFile:
    """One table file being written: every byte goes to disk and through SHA-256."""

    def __init__(self, path: Path):
        self.handle = open(path, "wb", buffering=_BUFFER)  # noqa: SIM115 (closed by close())
        self.digest = hashlib.sha256()
        self.size = 0

    def write(self, data: bytes) -> None:
        self.handle.write(data)
        self.digest.update(data)
        self.size += len(data)

    def close(self) -> _descriptor.Written:
        self.handle.close()
        return _descriptor.Written(self.size, self.digest.hexdigest())


def _write_tables(folder: Path, chunks: Iterable[tuple[str, bytes]],
                  kind: Kind) -> dict[str, _descriptor.Written]:
    """Each table of `kind` as `<name>.csv` in `folder`, from (name, bytes) pieces in order."""
    files: dict[str, _TableFile] = {}
    try:
        for name in kind.tables:
            files[name] = _TableFile(folder / f"{name}.csv")
        for name, data in chunks:
            files[name].write(data)
    finally:
        written = {name: table.close() for name, table in files.items()}
    return written


def _write(chunks: Iterable[tuple[str, bytes]], out: Path, meta: dict, *,
           descriptor_path: Path | None, overwrite: bool, extra_files: dict[str, bytes] | None,
           check: Callable[[Path], object] | None, inputs, kind: Kind) -> Path:
    """The package folder from its tables' pieces, staged and moved into place, with its
    SHA256SUMS, extra files and descriptor (inside it, or at `descriptor_path`)."""
    out = Path(out)
    descriptor_path = Path(descriptor_path) if descriptor_path else out / _descriptor.DESCRIPTOR_NAME
    for path in (out, descriptor_path):
        paths.check_output_name(path)
    rel = _descriptor.relpath(out.resolve(), descriptor_path.parent.resolve())
    inside = descriptor_path.resolve().parent == out.resolve()
    if not inside:
        atomic.refuse_overlap(descriptor_path, inputs)
        atomic.check_output(descriptor_path, overwrite)
    staged_outside = None
    try:
        with atomic.StagedDirectory(out, overwrite, inputs=inputs) as staged:
            written = _write_tables(staged.path, chunks, kind)
            (staged.path / SUMS_NAME).write_text(
                format_sums({f"{name}.csv": written[name].sha256 for name in kind.tables}),
                encoding="utf-8")
            for name, content in (extra_files or {}).items():
                (staged.path / name).write_bytes(content)
            staged_descriptor = staged.path / _descriptor.DESCRIPTOR_NAME
            staged_descriptor.write_text(
                _descriptor.dumps(_descriptor.build(meta, written, ".", kind)),
                encoding="utf-8")
            if check is not None:
                check(staged_descriptor)
            if not inside:
                staged_descriptor.unlink()
                # Staged before the folder moves into place, so an unwritable descriptor folder
                # fails the command with nothing written, not a package without its descriptor.
                staged_outside = atomic.stage_file(descriptor_path, _descriptor.dumps(
                    _descriptor.build(meta, written, rel, kind)).encode("utf-8"))
    except BaseException:
        if staged_outside is not None:
            staged_outside.unlink(missing_ok=True)
        raise
    if staged_outside is not None:
        atomic.commit_file(staged_outside, descriptor_path)
    return descriptor_path
