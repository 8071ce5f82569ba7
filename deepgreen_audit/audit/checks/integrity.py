"""Integrity: the package validates, and its tables and its run directories are one."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

from deepgreen_audit.package import paths
from deepgreen_audit.package.checksums import sha256_bytes
from deepgreen_audit.package.rundirs import flatten_files, restore_files
from deepgreen_audit.package.schema import TABLES
from deepgreen_audit.package.tables import canonical_bytes
from deepgreen_audit.registry import Outcome, check

if TYPE_CHECKING:  # the audit layer, for the annotation only
    from deepgreen_audit.audit.context import AuditContext


@check("integrity.validate", "integrity")
def validated(ctx: AuditContext) -> Outcome:
    """The package validates: checksums, descriptor, every row against its Table Schema,
    primary and foreign keys, canonical form (deepgreen validate). Every other check
    needs this; on an invalid package they are all skipped."""
    stats = ctx.integrity.stats
    rows = ", ".join(f"{name} {stats[name]['rows']:,}" for name in TABLES if name in stats)
    return Outcome.passed(f"valid ({rows} rows; SHA256SUMS and descriptor hashes match)")


@check("integrity.round-trip", "integrity")
def round_trip(ctx: AuditContext) -> Outcome:
    """Restoring the package into run directories and flattening them again gives every table
    back byte for byte (compared by SHA-256). The restored files are kept in memory and read
    back by the reader `deepgreen flatten` uses for a tree on disk (`flatten_files`): the
    same bytes through the same parser, without a thousand files written and read back."""
    files = restore_files(ctx.package)
    tables, meta = flatten_files(files, Path("<restored run tree>"))
    differ = []
    for name in TABLES:
        original = sha256_bytes(paths.read_bytes(ctx.package.table_path(name)))
        again = sha256_bytes(canonical_bytes(tables[name]))
        if original != again:
            differ.append(f"{name} (sha256 {original[:12]} -> {again[:12]})")
    if meta != ctx.package.meta:
        differ.append("package metadata")
    runs = len(ctx.package.text("runs").rows)
    if differ:
        return Outcome.failed("restore -> flatten changes " + ", ".join(differ))
    return Outcome.passed(f"restore -> flatten of {runs:,} run directories ({len(files):,} files) "
                          "gives the four tables back byte for byte")
