"""`deepgreen import greenlight PATH --out PKG`: FECoM/Greenlight records to an API-level package.

The work is in `deepgreen_audit.greenlight.importer`; this module is the
`import` verb's entry point for the source `greenlight`.
"""

from __future__ import annotations

from pathlib import Path

from deepgreen_audit.errors import UserError
from deepgreen_audit.greenlight.discover import read_tree
from deepgreen_audit.greenlight.importer import import_greenlight
from deepgreen_audit.greenlight.summary import compare_published


def import_source(source: Path, out: Path, *, overwrite: bool = False,
                  descriptor_path: Path | None = None) -> tuple[Path, dict]:
    """Import every experiment record under `source`; returns (descriptor, report).

    The report's `summary` is the lines to print: counts, and the comparison
    of the recomputed per-API summaries with the published ones found under
    `source`.
    """
    if descriptor_path is not None and Path(descriptor_path).resolve() != (
            Path(out) / "datapackage.json").resolve():
        raise UserError("an API-level package keeps its descriptor inside PKG; drop --descriptor",
                        path=descriptor_path)
    # Everything that reads `source` (the records, the published summaries) is read before the
    # package is written, so that a refused input leaves no package behind.
    records = read_tree(Path(source))
    comparison = compare_published(Path(source), records)
    counts = import_greenlight(Path(source), Path(out), overwrite=overwrite, records=records)
    counts.pop("records")
    summary = [f"imported {counts['calls']} calls ({counts['without_energy']} without energy: no "
               f"sample inside the call's window) and {counts['samples']:,} samples of "
               f"{counts['projects']} projects from {source}",
               comparison.format_text(),
               f"wrote {out} (described by {counts['descriptor']}); run "
               f"'deepgreen api-audit {out}' next"]
    report = {**{k: v for k, v in counts.items() if k != "descriptor"},
              "matches": comparison.count("match"), "differs": comparison.count("differs"),
              "summary": "\n".join(summary)}
    return counts["descriptor"], report
