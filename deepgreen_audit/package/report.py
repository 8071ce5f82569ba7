"""One report object for validation, with stable machine-readable codes.

Like frictionless-py's report: a flat list of findings, each with a code
that never changes meaning, and where it is (resource, row, field).  Row
numbers count the header as row 1, as frictionless does.
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass, field

#: Codes a validation can report, with what each means.
CODES = {
    "missing-descriptor": "no datapackage.json where the package was expected",
    "descriptor-error": "datapackage.json is unreadable or malformed",
    "unknown-kind": "the descriptor's deepgreen:package names no kind of package deepgreen knows",
    "unsafe-path": "a path leaves the package folder (directly or through a symbolic link)",
    "symlink": "a symbolic link where a plain file is required",
    "missing-resource": "the descriptor lacks one of the four tables",
    "missing-table": "a table file is missing",
    "schema-mismatch": "a resource's schema differs from schemas/",
    "checksum-missing": "SHA256SUMS is missing or lacks a table",
    "checksum-format": "SHA256SUMS has a malformed line",
    "checksum-mismatch": "a table's SHA256 differs from SHA256SUMS",
    "bytes-mismatch": "a table's size differs from the descriptor's bytes",
    "hash-mismatch": "a table's SHA256 differs from the descriptor's hash",
    "encoding-error": "a table is not UTF-8",
    "byte-order-mark": "a table starts with a byte-order mark, which canonical CSV does not have",
    "empty-table": "a table file is empty (not even a header row)",
    "csv-error": "a table cannot be parsed as CSV",
    "line-ending": "a table uses CR or CRLF line endings",
    "truncated-row": "the last row does not end with a newline",
    "missing-column": "a schema column is absent from the header",
    "extra-column": "the header has a column the schema lacks",
    "header-order": "the header's columns are not in the schema's order",
    "field-count": "a row has more or fewer cells than the header",
    "type-error": "a cell is not a value of its column's type",
    "non-canonical-cell": "a valid value not written in its canonical form",
    "non-canonical-row": "a row not written in canonical CSV (quoting)",
    "constraint-error": "a cell breaks a constraint (required, range, enum, pattern)",
    "unique-error": "a value repeats in a unique column",
    "primary-key-error": "a primary key repeats",
    "foreign-key-error": "a key refers to no row of the referenced table",
    "incomplete-run": "a run lacks its environment row or its blocks",
    "row-order": "rows are not in primary-key order",
    "frictionless-error": "a foreign package breaks a rule of frictionless (its type in the message)",
}


@dataclass(frozen=True)
class Finding:
    code: str
    message: str
    resource: str | None = None
    row: int | None = None
    field: str | None = None

    def where(self) -> str:
        parts = [p for p in (self.resource, f"row {self.row}" if self.row else None,
                             f"field {self.field!r}" if self.field else None) if p]
        return ", ".join(parts)


@dataclass
class Report:
    package: str
    synthetic: bool = False
    notice: str | None = None
    findings: list[Finding] = field(default_factory=list)
    stats: dict = field(default_factory=dict)
    #: findings beyond the per-(code, resource, field) cap, counted not listed
    suppressed: dict[str, int] = field(default_factory=dict)
    limit_per_kind: int = 20
    _shown: dict[str, int] = field(default_factory=dict, repr=False)

    @property
    def valid(self) -> bool:
        return not self.findings

    def add(self, code: str, message: str, resource: str | None = None,
            row: int | None = None, field: str | None = None) -> None:
        assert code in CODES, code
        key = f"{code}|{resource}|{field}"
        shown = self._shown.get(key, 0)
        if shown >= self.limit_per_kind:
            self.suppressed[key] = self.suppressed.get(key, 0) + 1
            return
        self._shown[key] = shown + 1
        self.findings.append(Finding(code, message, resource, row, field))

    def findings_for(self, resource: str) -> list[Finding]:
        return [f for f in self.findings if f.resource == resource]

    @property
    def error_count(self) -> int:
        return len(self.findings) + sum(self.suppressed.values())

    def to_dict(self) -> dict:
        return {"package": self.package, "valid": self.valid, "synthetic": self.synthetic,
                "notice": self.notice, "stats": self.stats,
                "error_count": self.error_count, "errors": [asdict(f) for f in self.findings],
                "suppressed": self.suppressed}

    def to_json(self) -> str:
        return json.dumps(self.to_dict(), indent=2, ensure_ascii=False)

    def format_text(self) -> str:
        lines = []
        if self.notice:
            lines.append(self.notice)
        if self.valid:
            lines.append(f"VALID: {self.package}")
        else:
            lines.append(f"INVALID: {self.package}: {self.error_count} error(s)")
            for f in self.findings:
                lines.append(f"  [{f.code}] {f.where()}: {f.message}")
            for key, count in self.suppressed.items():
                code, resource, fld = key.split("|")
                lines.append(f"  [{code}] {resource} {fld}: {count} more not shown")
        return "\n".join(lines)
