"""docs/audit.md, generated from the registry: what each check means."""

from __future__ import annotations

from pathlib import Path

from deepgreen_audit.audit.checks import audit_checks
from deepgreen_audit.report import JSON_EVIDENCE_ROWS
from deepgreen_audit.resources import require_checkout
from deepgreen_audit.suite.registry import SUITES

DOC_PATH = ("docs", "audit.md")

INTRO = f"""\
# The audit

<!-- Generated from the check registry by `deepgreen audit --list --markdown`; do not edit by hand. -->

`deepgreen audit [PKG]` first validates the package (checksums, schemas, keys:
`deepgreen validate`), then runs every registered check against the experiment
specification (`collect/experiment.toml`, rendered in docs/spec.md). Each
finding has an id, a spec section, a status (`pass`, `fail`, `warn`, `skip`), a
message, and for row-level checks the number of rows of the named table it
concerns (`rows_affected`). A check of severity `error` that finds a defect
reports `fail`, one of severity `warning` reports `warn`. A check whose inputs are
missing reports `skip`, never `pass`, and the audit then says it did not finish.
A check that crashes (a bug) reports `fail` whatever its severity, so `--strict`
never passes an audit that could not check everything it ran.
A synthetic package is announced at the top and the bottom of every report.

A fail or warn also says why (`basis`): `not recorded` when every row it concerns fails only
because the package leaves the checked value empty (a cell, a reading, the samples), so
nothing shows the specification was met but nothing contradicts it; `contradicted` when a
recorded value breaks it.  A check says how many of its rows are only unrecorded
(`Outcome.failed(..., unrecorded=n)`); one that does not say is contradicted, so a real
finding is never filed as a gap in the records.  A finding's evidence is every row it
concerns; the JSON report (`--json`, `--out FILE`) carries its first {JSON_EVIDENCE_ROWS} in `details.evidence`
(`evidence_shown` of `evidence_total`), so that a report does not grow with the package, and
`--evidence DIR` writes all of them as `DIR/<id>-evidence.csv` (`<id>-<k>-evidence.csv` for
the k-th finding of a repeated id), which `details.evidence_csv` names (`null` without
`--evidence`).  The HTML page (`--html`) opens with the failing and warning checks, one
linked line each, in these two groups.

Exit status (README.md, "Exit codes"): 0 when every check passes (warnings allowed), 1 when
one fails or the package is invalid, 2 on a usage error. Options: `--strict` exits 1 on a
warning or a skip too; `--json` prints the report as JSON
(`--out FILE` writes it), in the shape every report of the tool has (docs/package-format.md,
Reports); `--html FILE` and `--junit FILE` write the reviewers' page and CI's test report (each
check with its duration), refusing an existing file without `--overwrite`; `--list` prints this
registry; `--spec TOML` audits against another specification; `--select PREFIX` runs only
some checks (a prefix that matches none is a usage error).

Adding a check: write a function `fn(ctx) -> Outcome` with a docstring in a module of
`deepgreen_audit/audit/checks/`, decorate it with `@check("<section>.<name>", "<section>",
table=...)` from `deepgreen_audit.suite.registry` (`figure=` names its figure on the page,
`deepgreen_audit/audit/figures.py`), and, for a new module, add it to
`audit.checks.audit_checks`, which lists the suite's modules in report order.
`ctx` gives the typed tables as numpy columns (`ctx.runs`, `ctx.blocks`, ...: Frames,
deepgreen_audit/columnar/frame.py; the audit imports no pandas), the specification
(`ctx.spec`, tolerances in `ctx.tolerances`) and the checkout (`ctx.sources_root`).
"""

SECTION_TITLES = {"integrity": "Integrity", "S1": "S1 Model", "S2": "S2 Optimisation",
                  "S3": "S3 Data pipeline", "S4": "S4 Backend", "S5": "S5 Measurement",
                  "S6": "S6 Replication", "S7": "S7 Contrast cell (S3_data.contrast_cell)",
                  "source": "Sources and built artefacts"}


def to_markdown() -> str:
    lines = [INTRO]
    registered = audit_checks()
    for section in SUITES["audit"]:
        group = [c for c in registered if c.section == section]
        if not group:
            continue
        lines += [f"## {SECTION_TITLES[section]}", "", "| id | severity | rows of | what it checks |",
                  "|---|---|---|---|"]
        lines += [f"| `{c.id}` | {c.severity} | {c.table or '-'} | {c.doc} |" for c in group]
        lines.append("")
    return "\n".join(lines).rstrip("\n") + "\n"


def doc_path() -> Path:
    """docs/audit.md of the checkout (an installed copy has no docs/ to keep current)."""
    return require_checkout("writing or checking docs/audit.md").joinpath(*DOC_PATH)


def write_markdown(path: Path | None = None) -> Path:
    from deepgreen_audit.package import atomic

    target = Path(path) if path else doc_path()
    atomic.write_text(target, to_markdown())
    return target
