"""Write a package of any kind: canonical tables, SHA256SUMS, datapackage.json."""

from __future__ import annotations

from pathlib import Path

from deepgreen_audit.package import atomic, descriptor as _descriptor
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
    rel = _descriptor.relpath(out.resolve(), descriptor_path.parent.resolve())
    desc_text = _descriptor.dumps(_descriptor.build(meta, data, rel, sums, kind))
    inside = descriptor_path.resolve().parent == out.resolve()
    if not inside:
        atomic.refuse_overlap(descriptor_path, inputs)
        atomic.check_output(descriptor_path, overwrite)
    with atomic.StagedDirectory(out, overwrite, inputs=inputs) as staged:
        for name in kind.tables:
            (staged.path / f"{name}.csv").write_bytes(data[name])
        (staged.path / SUMS_NAME).write_text(format_sums(sums), encoding="utf-8")
        for name, content in (extra_files or {}).items():
            (staged.path / name).write_bytes(content)
        staged_descriptor = staged.path / _descriptor.DESCRIPTOR_NAME
        staged_descriptor.write_text(
            desc_text if inside else _descriptor.dumps(_descriptor.build(meta, data, ".", sums, kind)),
            encoding="utf-8")
        if check is not None:
            check(staged_descriptor)
        if not inside:
            staged_descriptor.unlink()
    if not inside:
        atomic.write_text(descriptor_path, desc_text)
    return descriptor_path
