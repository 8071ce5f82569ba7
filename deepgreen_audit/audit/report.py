"""The audit report: one finding per check, with stable ids, JSON and text forms."""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass, field

STATUSES = ("pass", "fail", "warn", "skip")


@dataclass(frozen=True)
class AuditFinding:
    id: str
    section: str
    severity: str
    status: str
    message: str
    rows_affected: int | None = None
    table: str | None = None
    details: dict | None = None


@dataclass
class AuditReport:
    package: str
    synthetic: bool = False
    notice: str | None = None
    #: the scope the package declares and was audited against (None: the full design)
    scope: dict | None = None
    findings: list[AuditFinding] = field(default_factory=list)

    @property
    def counts(self) -> dict[str, int]:
        return {s: sum(f.status == s for f in self.findings) for s in STATUSES}

    @property
    def finished(self) -> bool:
        """An audit with a skipped check did not finish: something was not checked."""
        return not any(f.status == "skip" for f in self.findings)

    @property
    def failed(self) -> bool:
        return any(f.status == "fail" for f in self.findings)

    def finding(self, check_id: str) -> AuditFinding:
        for f in self.findings:
            if f.id == check_id:
                return f
        raise KeyError(check_id)

    def to_dict(self) -> dict:
        return {"package": self.package, "synthetic": self.synthetic, "notice": self.notice,
                "scope": self.scope, "finished": self.finished, "counts": self.counts,
                "findings": [asdict(f) for f in self.findings]}

    def to_json(self) -> str:
        return json.dumps(self.to_dict(), indent=2, ensure_ascii=False) + "\n"

    def format_text(self) -> str:
        lines = [self.notice] if self.notice else []
        lines.append(f"AUDIT of {self.package}")
        if self.scope:
            lines.append("  audited against the scope the package declares: "
                         + ", ".join(f"{k} {v}" for k, v in self.scope.items()))
        width = max((len(f.id) for f in self.findings), default=10)
        for f in self.findings:
            rows = f" [{f.rows_affected:,} {f.table or 'row'} row(s)]" if (
                f.rows_affected is not None and f.status in ("fail", "warn")) else ""
            lines.append(f"  {f.status.upper():<4}  {f.id:<{width}}  {f.message}{rows}")
        c = self.counts
        lines.append(f"{c['pass']} pass, {c['fail']} fail, {c['warn']} warn, {c['skip']} skip")
        if not self.finished:
            lines.append(f"the audit did NOT finish: {c['skip']} check(s) were skipped, so "
                         "what they check was not verified")
        if self.notice:
            lines.append(self.notice)
        return "\n".join(lines)
