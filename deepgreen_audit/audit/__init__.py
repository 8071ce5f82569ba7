"""The conformance audit: integrity, the experiment specification (S1-S6), the round trip.

`audit(PKG)` validates the package, then runs every check of the audit suite
(`deepgreen_audit.suite.registry`) and returns a `deepgreen_audit.report.Report`.  What each
check means is in docs/audit.md (generated from the registry).
"""

_EXPORTS = {"audit": "deepgreen_audit.audit.driver"}

__all__ = ["audit"]


def __getattr__(name: str):
    # Imported on first use, so that `deepgreen --help` and light verbs do not pay
    # for the heavy modules (scipy, matplotlib) behind this package.
    import importlib

    if name in _EXPORTS:
        return getattr(importlib.import_module(_EXPORTS[name]), name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
