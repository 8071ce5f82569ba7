"""Verb `import`: another campaign's records to a package; the source is a choice."""

from __future__ import annotations

import importlib
from pathlib import Path

from deepgreen_audit.errors import UserError
from deepgreen_audit.importers import SOURCES

#: Sources whose import reads several paths (files or folders).
MANY_PATHS = ("codecarbon",)


def cmd_import(args) -> int:
    module = importlib.import_module(SOURCES[args.source])
    paths = [Path(p) for p in args.path]
    if len(paths) > 1 and args.source not in MANY_PATHS:
        raise UserError(f"'import {args.source}' reads one folder; {len(paths)} were given")
    path, report = module.import_source(paths if args.source in MANY_PATHS else paths[0],
                                        Path(args.out), overwrite=args.overwrite,
                                        descriptor_path=Path(args.descriptor) if args.descriptor else None)
    if "summary" in report:  # a source that words its own summary (greenlight)
        print(report["summary"])
        return 0
    print(f"imported {report['runs']} runs, {report['blocks']:,} blocks from {args.path} "
          f"(source of truth: {report['source_of_truth']})")
    for c in report.get("consistency", []):
        print(f"  {c['comparison']}: {c['compared']:,} duplicate rows compared, "
              f"{c['identical']:,} identical, {c['differing']:,} differing"
              + (f" ({', '.join(f'{k} {v}' for k, v in list(c['differing_columns'].items())[:4])})"
                 if c["differing"] else "")
              + (f", {c['only_in_duplicate']} only there" if c["only_in_duplicate"] else "")
              + (f", {c['repeated_keys']} repeated keys" if c["repeated_keys"] else ""))
    print(f"wrote {args.out} (described by {path}); run 'deepgreen audit {args.out}' next")
    return 0


def register(verb) -> None:
    p = verb("import", cmd_import, "import another campaign's records as a package",
             "Convert the records of another campaign into a replication package of the four "
             "tables. SOURCE names the layout: 'legacy' is the study's first campaign (the "
             "CodeCarbon logs of ../shared/legacy-campaign: results/data/*.csv and the per-stack "
             "emissions files). Every original value is kept (kWh in the *_kwh columns, the rest "
             "verbatim beside the tables), labels are normalised with the originals kept, and what "
             "the campaign lacks is left empty with a reason. Duplicate files are compared with "
             "the source of truth and their differences reported. 'codecarbon' reads anyone's "
             "CodeCarbon emissions.csv files (1.x to 3.x, files or folders) into a package of kind "
             "codecarbon-log, one row per source row with its file and line; 'deepgreen audit PKG' "
             "then says, per log and per run, whether its energy was measured or modelled "
             "(docs/codecarbon.md).")
    p.add_argument("source", choices=sorted(SOURCES), metavar="SOURCE",
                   help="layout of the records: " + ", ".join(sorted(SOURCES)))
    p.add_argument("path", metavar="PATH", nargs="+",
                   help="folder holding the records (codecarbon: one or more emissions.csv files "
                        "or folders of them)")
    p.add_argument("--out", required=True, metavar="PKG", help="package folder to write")
    p.add_argument("--descriptor", metavar="FILE", help="write datapackage.json here instead")
    p.add_argument("--overwrite", action="store_true", help="replace PKG if it exists")
