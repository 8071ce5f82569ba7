"""One finding and one report for every verb that checks something, and one way to print them.

`deepgreen validate`, `audit`, `parity`, `preflight` and `api-audit` all answer
with a `Report`: a flat list of `Finding`s, each with a stable machine-readable
id (a validation code such as ``type-error``, or a check id such as
``S5.tracking-mode``), a status (pass, fail, warn, skip) and where it is
(resource, row, field).  `format_text` and `to_json` are the one renderer, so
every report reads the same on screen and has the same keys in JSON.  Row
numbers count the header as row 1, as frictionless does.

The kernel's bottom layer: it imports nothing of the project but its output-safety layer and
`errors.path_text`.
"""

from __future__ import annotations

import shutil
import textwrap
from dataclasses import asdict, dataclass, field, replace

from deepgreen_audit.errors import path_text
from deepgreen_audit.safe import json_text, terminal_text

STATUSES = ("pass", "fail", "warn", "skip")
#: The bases of a skip: the check does not apply to the package (its subject is absent by the
#: declared scope or kind), or it could not run, so what it checks is not verified.
NOT_APPLICABLE, NOT_VERIFIED = "not applicable", "not verified"
SEVERITIES = ("error", "warning")
#: The verbs whose answer is a Report, with the words their verdict uses (ok, not ok).
KINDS = {"validate": ("VALID", "INVALID"), "audit": ("PASSED", "FAILED"),
         "parity": ("PASSED", "FAILED"), "preflight": ("READY", "NOT READY"),
         "api-audit": ("PASSED", "FAILED")}

#: Codes a validation can report, with what each means.
CODES = {
    "missing-descriptor": "no datapackage.json where the package was expected",
    "descriptor-error": "datapackage.json is unreadable or malformed",
    "unknown-kind": "the descriptor's deepgreen:package names no kind of package deepgreen knows",
    "unsafe-path": "a path leaves the package folder (directly or through a symbolic link)",
    "symlink": "a symbolic link where a plain file is required",
    "not-a-file": "a FIFO, socket, device or folder where a regular file is required",
    "file-too-large": "a file is larger than deepgreen reads whole (paths.MAX_READ_BYTES)",
    "read-error": "a file cannot be read (permission, a name too long, ...)",
    "bad-path": "a path holds a NUL byte",
    "missing-resource": "the descriptor lacks one of the tables of its kind of package",
    "duplicate-resource": "the descriptor has two resources of one name",
    "missing-table": "a table file is missing",
    "schema-mismatch": "a resource's schema differs from schemas/",
    "checksum-missing": "SHA256SUMS is missing or lacks a table",
    "checksum-format": "SHA256SUMS has a malformed line",
    "checksum-duplicate": "SHA256SUMS repeats a line",
    "checksum-conflict": "SHA256SUMS gives one file two different digests",
    "checksum-extra": "SHA256SUMS names a file that is not beside it",
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
    "constraint-error": "a cell breaks a constraint (required, range, length, enum, pattern)",
    "unique-error": "a value repeats in a unique column",
    "primary-key-error": "a primary key repeats",
    "foreign-key-error": "a key refers to no row of the referenced table",
    "incomplete-run": "a run lacks its environment row or its blocks",
    "row-order": "rows are not in primary-key order",
    "bad-constraint": "a foreign schema's constraint cannot be applied (a bound not of its "
                      "field's type, a pattern that is not a regular expression)",
    "frictionless-error": "a foreign package breaks a rule of frictionless (its type in the message)",
}


@dataclass(frozen=True, kw_only=True)
class Finding:
    """One thing a check found.  `resource` is what it is about (a table of the package, a
    stack under parity, a framework or counter under preflight); `rows_affected` counts the
    rows of that resource it concerns; `details` holds its evidence (for the audit:
    ``{"evidence": [rows], "evidence_total": n}``) and any figures behind the message;
    `seconds` is how long its check ran, for CI's test reports."""

    id: str
    status: str
    message: str
    severity: str = "error"
    section: str | None = None
    resource: str | None = None
    row: int | None = None
    field: str | None = None
    rows_affected: int | None = None
    details: dict | None = None
    #: why a fail or warn failed: "contradicted" (the data contradicts the specification) or
    #: "not recorded" (only empty cells: not verifiable); why a skip skipped: "not applicable"
    #: (its subject is absent by the package's scope or kind) or "not verified" (it could not
    #: run); None for a pass
    basis: str | None = None
    #: how long the check took (JUnit's time; None for a finding no check timed)
    seconds: float | None = None
    #: what to change so that the next measurement does not have this defect, in the measuring
    #: tool's own terms (its option, permission or version); for a fail or warn of a check
    #: that states one
    remedy: str | None = None

    def __post_init__(self):
        if self.status not in STATUSES:
            raise ValueError(f"finding {self.id}: unknown status {self.status!r}")
        if self.severity not in SEVERITIES:
            raise ValueError(f"finding {self.id}: unknown severity {self.severity!r}")

    def where(self) -> str:
        parts = [p for p in (self.resource, f"row {self.row}" if self.row else None,
                             f"field {self.field!r}" if self.field else None) if p]
        return ", ".join(parts)


@dataclass
class Report:
    """What one verb found about `subject` (a package, a plan, an architecture's stacks)."""

    subject: str
    kind: str
    synthetic: bool = False
    notice: str | None = None
    #: what the findings were measured against (a declared scope, tolerances), one line each
    notes: list[str] = field(default_factory=list)
    findings: list[Finding] = field(default_factory=list)
    stats: dict = field(default_factory=dict)
    #: failing findings beyond the per-(id, resource, field) cap of `add`, counted not listed
    suppressed: dict[str, int] = field(default_factory=dict)
    limit_per_kind: int = 20
    _shown: dict[str, int] = field(default_factory=dict, repr=False)

    def __post_init__(self):
        self.subject = path_text(self.subject)  # a file name that is not UTF-8, shown escaped
        if self.kind not in KINDS:
            raise ValueError(f"unknown kind of report {self.kind!r}")

    def add(self, code: str, message: str, resource: str | None = None,
            row: int | None = None, field: str | None = None) -> None:
        """A validation error: `code` from CODES; at most `limit_per_kind` are listed per
        (code, resource, field), the rest counted in `suppressed`."""
        assert code in CODES, code
        key = f"{code}|{resource}|{field}"
        shown = self._shown.get(key, 0)
        if shown >= self.limit_per_kind:
            self.suppressed[key] = self.suppressed.get(key, 0) + 1
            return
        self._shown[key] = shown + 1
        self.findings.append(Finding(id=code, status="fail", message=message, section="integrity",
                                     resource=resource, row=row, field=field))

    def merge(self, other: Report) -> None:
        """Take in the findings, suppressed counts and statistics of a report on a part of
        this one's subject (one table of a package)."""
        self.findings.extend(other.findings)
        for key, count in other.suppressed.items():
            self.suppressed[key] = self.suppressed.get(key, 0) + count
        self.stats.update(other.stats)

    @property
    def counts(self) -> dict[str, int]:
        """Findings per status; suppressed validation errors count as fails (the skips that do
        not apply to the package are among `skip`: `not_applicable` lists them)."""
        counts = {s: sum(f.status == s for f in self.findings) for s in STATUSES}
        counts["fail"] += sum(self.suppressed.values())
        return counts

    @property
    def not_applicable(self) -> list[Finding]:
        """The skipped checks that do not apply to the package."""
        return [f for f in self.findings if f.status == "skip" and f.basis == NOT_APPLICABLE]

    @property
    def not_verified(self) -> list[Finding]:
        """The skipped checks that could not run: what they check was not verified."""
        return [f for f in self.findings if f.status == "skip" and f.basis != NOT_APPLICABLE]

    @property
    def error_count(self) -> int:
        return self.counts["fail"]

    @property
    def valid(self) -> bool:
        """No finding failed (warnings and skips do not make a report invalid)."""
        return self.error_count == 0

    def refuse_invalid(self, what: str = "the package") -> None:
        """Stop a verb that reads a package (export, restore, compare) unless it validated,
        naming the first finding: its work would rest on what validate refuses."""
        if self.valid:
            return
        from deepgreen_audit.errors import UserError

        first = next((f for f in self.findings if f.status == "fail"), None)
        said = f"; first: [{first.id}] {first.where()}: {first.message}" if first else ""
        raise UserError(f"{what} is not valid ({self.error_count} error(s){said}); run "
                        "'deepgreen validate' for the full report", path=self.subject,
                        code="invalid-package")

    @property
    def finished(self) -> bool:
        """A report with a check that could not run did not finish: something was not
        verified.  A check that does not apply to the package is no gap."""
        return not self.not_verified

    def exit_status(self, strict: bool = False) -> int:
        """The verb's exit status (errors.EXIT_CODES): 1 when a check failed, or with `strict`
        when one warned or could not run (a strict gate accepts only what was verified; a
        check that does not apply is not a gap); else 0."""
        c = self.counts
        return 1 if c["fail"] or (strict and (c["warn"] or self.not_verified)) else 0

    def strict_verdict(self) -> str | None:
        """The line that says why --strict fails a report whose verdict reads ok (its warnings
        and the checks that could not run), or None when --strict changes nothing."""
        c = self.counts
        unverified = len(self.not_verified)
        if self.valid and (c["warn"] or unverified):
            return (f"{KINDS[self.kind][1]} under --strict: {c['warn']} warning(s), {unverified} "
                    "check(s) that could not run")
        return None

    def finding(self, finding_id: str) -> Finding:
        for f in self.findings:
            if f.id == finding_id:
                return f
        raise KeyError(finding_id)

    def findings_for(self, resource: str) -> list[Finding]:
        return [f for f in self.findings if f.resource == resource]

    def to_dict(self, evidence_csv: list[str | None] | None = None) -> dict:
        """The JSON report; `evidence_csv`: the CSV file holding each finding's complete
        evidence, in the findings' order (`audit --evidence DIR`; None: none written)."""
        files: list[str | None] = evidence_csv or [None] * len(self.findings)
        return {"kind": self.kind, "subject": self.subject, "valid": self.valid,
                "finished": self.finished, "synthetic": self.synthetic, "notice": self.notice,
                "not_applicable": [f.id for f in self.not_applicable],
                "notes": self.notes, "counts": self.counts, "error_count": self.error_count,
                "stats": self.stats,
                "findings": [_finding_dict(f, path) for f, path in zip(self.findings, files, strict=True)],
                "suppressed": self.suppressed}

    def to_json(self, evidence_csv: list[str | None] | None = None) -> str:
        return json_text(self.to_dict(evidence_csv)) + "\n"

    def format_text(self, evidence_rows: int = 0, width: int | None = None) -> str:
        """The report for a terminal of `width` columns (default: this terminal's, 100 when
        it is not one), each finding a line wrapped with a hanging indent and a very long
        message cut with a pointer to the output that holds it whole; `evidence_rows` > 0
        lists that many evidence rows under each failing or warning finding."""
        width = width or shutil.get_terminal_size((100, 24)).columns
        whole = "--json or --html" if self.kind == "audit" else "--json"
        lines = [self.notice] if self.notice else []  # a banner, printed as it is written
        lines.append(f"{self.kind.upper()} of {self.subject}")
        for note in self.notes:
            lines += _wrapped(f"  {note}", width, 4, whole)
        id_width = max((len(f.id) for f in self.findings), default=10)
        for f in self.findings:
            where = f.where()
            rows = f" [{f.rows_affected:,} row(s)]" if (
                f.rows_affected is not None and f.status in ("fail", "warn")) else ""
            head = f"  {f.status.upper():<4}  {f.id:<{id_width}}  "
            lines += _wrapped(f"{head}{where + ': ' if where else ''}{f.message}{rows}", width,
                              len(head) if width - len(head) >= 40 else 8, whole)
            if f.remedy:
                lines += _wrapped(f"        fix: {f.remedy}", width, 13, whole)
            if evidence_rows and f.status in ("fail", "warn"):
                for line in _evidence_lines(f, evidence_rows):
                    lines += _wrapped(line, width, 8, whole)
        for key, count in self.suppressed.items():
            code, resource, fld = key.split("|")
            lines.append(f"  FAIL  {code:<{id_width}}  {resource} {fld}: {count} more not shown")
        c = self.counts
        if self.findings:
            applicable = (f" ({len(self.not_applicable)} not applicable)" if self.not_applicable
                          else "")
            lines.append(f"{c['pass']} pass, {c['fail']} fail, {c['warn']} warn, {c['skip']} "
                         f"skip{applicable}")
        ok, not_ok = KINDS[self.kind]
        verdict = (f"{ok}: {self.subject}" if self.valid
                   else f"{not_ok}: {self.subject}: {self.error_count} failure(s)")
        lines += _wrapped(verdict, width, 4, whole)
        if not self.finished:
            lines += _wrapped(f"the {self.kind} did NOT finish: {len(self.not_verified)} check(s) "
                              "could not run, so what they check was not verified: "
                              + ", ".join(f.id for f in self.not_verified), width, 4, whole)
        if self.not_applicable:
            lines += _wrapped(f"{len(self.not_applicable)} check(s) do not apply to this package "
                              "(their lines above say why): "
                              + ", ".join(f.id for f in self.not_applicable), width, 4, whole)
        if self.notice:
            lines.append(self.notice)
        return terminal_text("\n".join(lines))


#: The evidence rows a finding carries in the JSON report (its first ones): a finding of every
#: block of a campaign would otherwise carry thousands, and the report grow with the package.
#: `details.evidence_total` counts them all; `audit --evidence DIR` writes them all as CSV.
JSON_EVIDENCE_ROWS = 50


def _finding_dict(finding: Finding, evidence_csv: str | None) -> dict:
    """A finding as the JSON report writes it: its evidence capped at JSON_EVIDENCE_ROWS rows,
    with how many it shows (`evidence_shown`), how many there are (`evidence_total`) and the
    CSV file that holds them all (`evidence_csv`, None when none was written)."""
    details = finding.details or {}
    rows = details.get("evidence")
    if not rows:
        return asdict(finding)
    shown = rows[:JSON_EVIDENCE_ROWS]
    capped = replace(finding, details={**details, "evidence": shown,
                                       "evidence_total": details.get("evidence_total", len(rows)),
                                       "evidence_shown": len(shown), "evidence_csv": evidence_csv})
    return asdict(capped)


#: The most terminal lines one finding takes; the rest is left to --json (and --html).
MAX_LINES = 6


def _wrapped(text: str, width: int, indent: int, whole: str) -> list[str]:
    """`text` wrapped to `width` with a hanging `indent`, its first line's own leading
    spaces kept; a path is never split, so it can be copied; past MAX_LINES lines it is cut
    with a pointer to `whole`."""
    lines = textwrap.wrap(text, width, subsequent_indent=" " * indent, break_on_hyphens=False,
                          break_long_words=False, drop_whitespace=True) or [""]
    lines[0] = text[:len(text) - len(text.lstrip(" "))] + lines[0].lstrip(" ")
    if len(lines) <= MAX_LINES:
        return lines
    pointer = f"... ({len(text):,} characters; {whole} shows it whole)"
    return lines[:MAX_LINES - 1] + [" " * max(0, min(indent, width - len(pointer))) + pointer]


def _evidence_lines(finding: Finding, limit: int) -> list[str]:
    rows = (finding.details or {}).get("evidence") or []
    total = (finding.details or {}).get("evidence_total", len(rows))
    lines = ["      " + ", ".join(f"{k}={v}" for k, v in row.items()) for row in rows[:limit]]
    if total > limit:
        lines.append(f"      ... {total - min(limit, len(rows)):,} more")
    return lines
