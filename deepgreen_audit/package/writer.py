"""Write a package of any kind: canonical tables, SHA256SUMS, datapackage.json."""

from __future__ import annotations

from pathlib import Path

from deepgreen_audit.package import atomic, descriptor as _descriptor, paths
from deepgreen_audit.package.checksums import FILENAME as SUMS_NAME, format_sums, sha256_bytes
from deepgreen_audit.package.kinds import REPLICATION, Kind
from deepgreen_audit.package.schema import load_schema
from deepgreen_audit.package.tables import TextTable, canonical_bytes


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
    out = Path(out)
    data = {}
    for name in kind.tables:
        table = tables[name]
        expected = load_schema(name).field_names
        if table.header != expected:
            raise ValueError(f"{name}: header {table.header} is not the schema's {expected}")
        data[name] = canonical_bytes(table)
    sums = {f"{name}.csv": sha256_bytes(data[name]) for name in kind.tables}
    descriptor_path = Path(descriptor_path) if descriptor_path else out / _descriptor.DESCRIPTOR_NAME
    for path in (out, descriptor_path):
        paths.check_output_name(path)
    rel = _descriptor.relpath(out.resolve(), descriptor_path.parent.resolve())
    desc_text = _descriptor.dumps(_descriptor.build(meta, data, rel, sums, kind))
    inside = descriptor_path.resolve().parent == out.resolve()
    staged_outside = None
    if not inside:
        atomic.refuse_overlap(descriptor_path, inputs)
        atomic.check_output(descriptor_path, overwrite)
        # Staged before the folder moves into place, so an unwritable descriptor folder
        # fails the command with nothing written, not a package without its descriptor.
        staged_outside = atomic.stage_file(descriptor_path, desc_text.encode("utf-8"))
    try:
        _write_folder(data, sums, out, meta, kind, overwrite=overwrite, inputs=inputs,
                      extra_files=extra_files, check=check, inside_text=desc_text if inside else None)
    except BaseException:
        if staged_outside is not None:
            staged_outside.unlink(missing_ok=True)
        raise
    if staged_outside is not None:
        atomic.commit_file(staged_outside, descriptor_path)
    return descriptor_path


def _write_folder(data: dict[str, bytes], sums: dict[str, str], out: Path, meta: dict, kind: Kind,
                  *, overwrite: bool, inputs, extra_files, check, inside_text: str | None) -> None:
    """The package folder, staged and moved into place; its descriptor is `inside_text`, or
    (None) one that `check` reads and that is then dropped, the real one lying elsewhere."""
    with atomic.StagedDirectory(out, overwrite, inputs=inputs) as staged:
        for name in kind.tables:
            (staged.path / f"{name}.csv").write_bytes(data[name])
        (staged.path / SUMS_NAME).write_text(format_sums(sums), encoding="utf-8")
        for name, content in (extra_files or {}).items():
            (staged.path / name).write_bytes(content)
        staged_descriptor = staged.path / _descriptor.DESCRIPTOR_NAME
        staged_descriptor.write_text(
            inside_text or _descriptor.dumps(_descriptor.build(meta, data, ".", sums, kind)),
            encoding="utf-8")
        if check is not None:
            check(staged_descriptor)
        if inside_text is None:
            staged_descriptor.unlink()
