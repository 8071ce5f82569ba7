"""The conformance audit: integrity, the experiment specification (S1-S6), the round trip.

`audit(PKG)` validates the package, then runs every registered check
(`deepgreen_audit.audit.registry`) and returns an `AuditReport`.  What each
check means is in docs/audit.md (generated from the registry).
"""

from deepgreen_audit.audit.driver import audit
from deepgreen_audit.audit.registry import (REGISTRY, Check, Outcome, Skip, check,
                                            registered_checks)
from deepgreen_audit.audit.report import AuditFinding, AuditReport

__all__ = ["REGISTRY", "AuditFinding", "AuditReport", "Check", "Outcome", "Skip", "audit",
           "check", "registered_checks"]
