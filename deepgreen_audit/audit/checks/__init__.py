"""Audit checks, one module per group (integrity, S1 ... S6, S7 the contrast cell,
sources, the manuscript)."""

from __future__ import annotations

from deepgreen_audit.audit.context import AuditContext
from deepgreen_audit.suite.registry import Check, registered_checks


def audit_checks() -> list[Check[AuditContext]]:
    """Every check of the suite `audit`, in the order its report lists them."""
    from deepgreen_audit.audit.checks import (
        calibration,
        contrast,
        integrity,
        manuscript,
        measurement,
        model,
        recipe,
        replication,
        sources,
        training,
    )

    return registered_checks("audit", (integrity, model, training, recipe, measurement,
                                       replication, calibration, contrast, sources, manuscript),
                           AuditContext)
