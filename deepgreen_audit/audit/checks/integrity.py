"""Integrity: the package validates, and its tables and its run directories are one."""

from __future__ import annotations

from typing import TYPE_CHECKING

from deepgreen_audit.package.rundirs import prove_round_trip
from deepgreen_audit.package.schema import TABLES
from deepgreen_audit.suite.registry import Outcome, check

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
    back byte for byte (compared by SHA-256). Run by run, in bounded memory: each run's
    directory is made by the writer `deepgreen restore` uses and read back by the reader
    `deepgreen flatten` uses (`prove_round_trip`), without a thousand files written and
    read back; the audit computes it in a process of its own beside the other checks."""
    proof = ctx.round_trip.result()[0] if ctx.round_trip is not None \
        else prove_round_trip(ctx.package)
    if proof.error is not None:
        return Outcome.failed(f"restore -> flatten stops after {proof.runs:,} run directories: "
                              f"{proof.error}")
    if proof.changes:
        return Outcome.failed("restore -> flatten changes " + ", ".join(proof.changes))
    return Outcome.passed(f"restore -> flatten of {proof.runs:,} run directories "
                          f"({proof.files:,} files) gives the four tables back byte for byte")
