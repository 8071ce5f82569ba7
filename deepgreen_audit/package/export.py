"""Parquet export of a package: typed tables for fast analysis elsewhere.

Parquet is an export, not the archive format: the CSV tables and their
checksums stay the reference.  The package is validated before export; any
kind of ours exports its own tables.
"""

from __future__ import annotations

from pathlib import Path

import pyarrow.parquet as pq

from deepgreen_audit.errors import path_text
from deepgreen_audit.package import atomic
from deepgreen_audit.package.descriptor import Package


def export_parquet(location, out: Path, *, overwrite: bool = False) -> dict[str, int]:
    """Write <table>.parquet for each table into `out`; returns rows per table."""
    from deepgreen_audit.package.dispatch import check_verb, validate_package

    check_verb(location, "export")
    validate_package(location).refuse_invalid()
    package = Package.open(location)
    counts = {}
    with atomic.StagedDirectory(Path(out), overwrite, inputs=package.input_paths()) as staged:
        for name in package.kind.tables:
            table = package.table(name)
            table = table.replace_schema_metadata({
                "deepgreen.source": path_text(package.table_path(name)),
                "deepgreen.synthetic": str(package.synthetic).lower()})
            # (a handle: pyarrow cannot open a name that is not UTF-8)
            with open(staged.path / f"{name}.parquet", "wb") as handle:
                pq.write_table(table, handle, compression="zstd")
            counts[name] = table.num_rows
    return counts
