"""Verb `import`: another campaign's records to a package; the source is a choice."""

from __future__ import annotations

import importlib
from pathlib import Path

from deepgreen_audit.importers import SOURCES

#: Sources whose import reads several paths (files or folders).
MANY_PATHS = ("codecarbon",)


def cmd_import(args) -> int:
    module = importlib.import_module(SOURCES[args.source])
    paths = [Path(p) for p in args.path] if args.source in MANY_PATHS else Path(args.path)
    path, report = module.import_source(paths,
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


#: Each source's own help (`deepgreen import SOURCE --help`): one line, what it reads and
#: writes, what PATH is, and examples.
SOURCE_HELP: dict[str, dict] = {
    "legacy": {
        "help": "the study's first campaign (CodeCarbon logs) as a replication package",
        "description":
            "Convert the study's first campaign, the CodeCarbon logs of "
            "../shared/legacy-campaign (results/data/*.csv and the per-stack emissions files), "
            "into a replication package of the four tables. Every original value is kept (kWh in "
            "the *_kwh columns, the rest verbatim beside the tables), labels are normalised with "
            "the originals kept, and what the campaign lacks is left empty with a reason. "
            "Duplicate files are compared with the source of truth and their differences "
            "reported. The result is shipped as examples/first-campaign/.",
        "path": "the campaign's folder (holding results/data/)",
        "examples": [("deepgreen import legacy ../shared/legacy-campaign --out first-campaign/",
                      "the first campaign"),
                     ("deepgreen audit first-campaign/", "its audit (exit 1)")]},
    "codecarbon": {
        "help": "anyone's CodeCarbon emissions.csv files as a codecarbon-log package",
        "description":
            "Read CodeCarbon emissions.csv files (1.x to 3.x; files, or folders whose *.csv are "
            "read) into a package of kind codecarbon-log, one row per source row with its file "
            "and line, nothing recomputed. 'deepgreen audit PKG' then says, per log and per run, "
            "whether its energy was measured, partly modelled or modelled (docs/codecarbon.md).",
        "path": "one or more emissions.csv files or folders of them",
        "examples": [("deepgreen import codecarbon ../shared/codecarbon-logs --out cc-logs/",
                      "28 real logs"),
                     ("deepgreen audit cc-logs/", "measured or modelled? (exit 1)")]},
    "greenlight": {
        "help": "Greenlight/FECoM API-level energy records as an api-profiles package",
        "description":
            "Read Greenlight/FECoM experiment records (experiment-*.json under dataset/project "
            "folders) into an API-level package (api_calls, api_samples), recomputing each "
            "call's energy from its samples; 'deepgreen api-audit PKG' audits it "
            "(docs/greenlight.md).",
        "path": "the folder of the records",
        "examples": [("deepgreen import greenlight ../shared/greenlight --out api/",
                      "FECoM's records")]},
}


def register(verb) -> None:
    from deepgreen_audit.console import HelpFormatter, examples_epilog

    p = verb("import", cmd_import, "import another campaign's records as a package",
             "Convert the records of another campaign into a package. SOURCE names the layout; "
             "'deepgreen import SOURCE --help' describes each: "
             + "; ".join(f"{name}: {SOURCE_HELP[name]['help']}" for name in sorted(SOURCES))
             + ".")
    sources = p.add_subparsers(dest="source", metavar="SOURCE", required=True)
    for name in sorted(SOURCES):
        about = SOURCE_HELP[name]
        sub = sources.add_parser(name, help=about["help"], description=about["description"],
                                 epilog=examples_epilog(about["examples"]),
                                 formatter_class=HelpFormatter)
        sub.add_argument("path", metavar="PATH", nargs="+" if name in MANY_PATHS else None,
                         help=about["path"])
        sub.add_argument("--out", required=True, metavar="PKG", help="package folder to write")
        sub.add_argument("--descriptor", metavar="FILE", help="write datapackage.json here instead")
        sub.add_argument("--overwrite", action="store_true", help="replace PKG if it exists")
