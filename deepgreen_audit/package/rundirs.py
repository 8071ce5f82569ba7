"""Run directories and the two exact directions between them and a package.

A tree of run directories (docs/design.md, "Run directories") looks like::

    RUNS/package.json                      package-level metadata (title, provenance, ...)
    RUNS/<campaign>/<run_id>/manifest.json the runs row and the environment row
    RUNS/<campaign>/<run_id>/blocks.csv    counter readings and durations per block
    RUNS/<campaign>/<run_id>/codecarbon.csv  CodeCarbon's own readings per block
    RUNS/<campaign>/<run_id>/metrics.csv   samples processed, loss, accuracy per block
    RUNS/<campaign>/<run_id>/samples.csv   the 1 Hz samples

Which block column goes to which file is the `rundir` property of the field
in `schemas/blocks.json`.  Every file is a canonical serialisation of cells
of the tables (CSV cells verbatim; JSON values whose text is the cell's
canonical text), so `restore(flatten(tree))` is the tree byte for byte and
`flatten(restore(package))` the package byte for byte.  This module is the one writer
of the format (`run_dir_files`, `write_files`): restore uses it, and so does collection
(`deepgreen_audit.collect.record`) for each run it measures.
"""

from __future__ import annotations

import json
import os
from collections import defaultdict
from functools import cache
from pathlib import Path

from deepgreen_audit.errors import UserError
from deepgreen_audit.package import atomic, paths
from deepgreen_audit.package.canonical import format_value, is_canonical, parse_value
from deepgreen_audit.package.descriptor import Package, parse_json
from deepgreen_audit.package.schema import TABLES, load_schema
from deepgreen_audit.package.tables import TextTable, canonical_text, cycle_collection_paused, text_table
from deepgreen_audit.package.writer import write_package

PACKAGE_META = "package.json"
MANIFEST = "manifest.json"
SAMPLES_FILE = "samples.csv"
BLOCK_KEY = ("epoch", "phase")
_JSON_TYPES = {"string": (str,), "datetime": (str,), "integer": (int,), "number": (int, float),
               "boolean": (bool,)}


@cache
def block_files() -> dict[str, tuple[str, ...]]:
    """{file name: block columns it holds, after the (epoch, phase) key}, from the schema."""
    groups: dict[str, list[str]] = {}
    for f in load_schema("blocks").fields:
        if f.rundir:
            groups.setdefault(f"{f.rundir}.csv", []).append(f.name)
    return {name: tuple(cols) for name, cols in groups.items()}


def _json_text(obj) -> bytes:
    return (json.dumps(obj, indent=2, ensure_ascii=False) + "\n").encode("utf-8")


def manifest_bytes(run: dict, environment: dict) -> bytes:
    """manifest.json of a run directory: the runs row and the environment row (without its
    run_id), each as {column: JSON value whose canonical text is the cell}."""
    return _json_text({"run": run, "environment": environment})


def run_dir_files(run: dict, environment: dict, block_rows: list[list[str]],
                  sample_rows: list[list[str]]) -> dict[str, bytes]:
    """{file name: bytes} of one run directory, the one serialisation of the format.

    `run` and `environment` are as `manifest_bytes` takes them; `block_rows` and
    `sample_rows` are the run's rows of the blocks and samples tables as canonical text
    cells, in the schemas' column order (run_id first).
    """
    files = {MANIFEST: manifest_bytes(run, environment)}
    col = {name: i for i, name in enumerate(load_schema("blocks").field_names)}
    for name, cols in block_files().items():
        header = list(BLOCK_KEY) + list(cols)
        idx = [col[c] for c in header]
        files[name] = canonical_text(header, [[r[i] for i in idx] for r in block_rows]).encode()
    files[SAMPLES_FILE] = canonical_text(load_schema("samples").field_names[1:],
                                         [r[1:] for r in sample_rows]).encode()
    return files


def write_files(root: Path, files: dict[str, bytes]) -> None:
    """Write {relative posix path: bytes} under `root` (a fresh or staged folder), refusing a
    path that would land outside it."""
    resolved = Path(root).resolve()
    for rel, data in files.items():
        target = (resolved / rel).resolve()
        if resolved not in target.parents:
            raise UserError(f"{rel!r} would be written outside the output folder", path=root,
                            code="unsafe-path")
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_bytes(data)


def _check_id(value: str, what: str, where) -> str:
    """A campaign or run id that is one safe path component."""
    pattern = load_schema("runs").field("run_id").regex
    import re
    if not isinstance(value, str) or re.fullmatch(pattern, value) is None:
        raise UserError(f"{what} {value!r} is not a safe directory name (pattern {pattern}); "
                        "it could escape the output folder", path=where, code="unsafe-path")
    return value


# ---------------------------------------------------------------- restore


def restore_files(package: Package) -> dict[str, bytes]:
    """The run tree of a (validated) package as {relative posix path: bytes}."""
    with cycle_collection_paused():
        return _restore_files(package)


def _restore_files(package: Package) -> dict[str, bytes]:
    runs, env = package.text("runs"), package.text("environment")
    blocks, samples = package.text("blocks"), package.text("samples")
    runs_schema, env_schema = load_schema("runs"), load_schema("environment")
    files: dict[str, bytes] = {PACKAGE_META: _json_text(package.meta)}
    env_by_run = {row[0]: row for row in env.rows}
    blocks_by_run = _group(blocks)
    samples_by_run = _group(samples)
    for row in runs.rows:
        run = {f.name: parse_value(cell, f.type) for f, cell in zip(runs_schema.fields, row)}
        run_id = _check_id(run["run_id"], "run_id", package.table_path("runs"))
        campaign = _check_id(run["campaign"], "campaign", package.table_path("runs"))
        env_row = env_by_run[run_id]
        environment = {f.name: parse_value(cell, f.type)
                       for f, cell in zip(env_schema.fields[1:], env_row[1:])}
        run_files = run_dir_files(run, environment, blocks_by_run.get(run_id, []),
                                  samples_by_run.get(run_id, []))
        files.update((f"{campaign}/{run_id}/{name}", data) for name, data in run_files.items())
    return files


def _group(table: TextTable) -> dict[str, list[list[str]]]:
    grouped: dict[str, list[list[str]]] = defaultdict(list)
    for row in table.rows:
        grouped[row[0]].append(row)
    return grouped


def restore(location, out: Path, *, overwrite: bool = False, dry_run: bool = False) -> dict:
    """Write the run tree of the package at `location` to `out` (atomically).

    The package is validated first; an invalid package restores nothing.
    Returns a summary {runs, files, bytes}.
    """
    from deepgreen_audit.package.validate import validate

    validate(location).refuse_invalid()
    package = Package.open(location)
    files = restore_files(package)
    summary = {"runs": len(package.text("runs").rows), "files": len(files),
               "bytes": sum(len(b) for b in files.values()), "out": str(out)}
    atomic.refuse_overlap(out, package.input_paths())
    if dry_run:
        atomic.check_output(out, overwrite)
        return summary
    out = Path(out)
    with atomic.StagedDirectory(out, overwrite, inputs=package.input_paths()) as staged:
        write_files(staged.path, files)
    return summary


# ---------------------------------------------------------------- flatten


def _walk(root: Path) -> dict[str, Path]:
    """Every file under root as {relative posix path: path}; refuses symbolic links."""
    if root.is_symlink():
        raise UserError("is a symbolic link; flatten reads plain folders only", path=root,
                        code="symlink")
    if not root.is_dir():
        raise UserError("is not a folder of run directories", path=root, code="missing-input")
    found: dict[str, Path] = {}
    for dirpath, dirnames, filenames in os.walk(root, followlinks=False):
        for name in dirnames + filenames:
            path = Path(dirpath) / name
            if path.is_symlink():
                raise UserError("is a symbolic link; a run tree holds plain files only "
                                "(copy the target instead)", path=path, code="symlink")
        for name in filenames:
            path = Path(dirpath) / name
            found[path.relative_to(root).as_posix()] = path
    return found


def _read_csv(data: bytes, path: Path, expected: list[str]) -> list[list[str]]:
    table = text_table(data, path)
    if table.header != expected:
        raise UserError(f"header is {','.join(table.header)}; expected {','.join(expected)}",
                        path=path, row=1, code="header-error")
    for number, row in enumerate(table.rows, start=2):
        if len(row) != len(expected):
            raise UserError(f"{len(row)} cells, expected {len(expected)}", path=path, row=number,
                            code="field-count")
    return table.rows


def _cells_from_json(obj: dict, fields, path: Path, section: str) -> list[str]:
    if not isinstance(obj, dict):
        raise UserError(f"'{section}' is not an object", path=path, code="manifest-error")
    names = [f.name for f in fields]
    extra = [k for k in obj if k not in names]
    missing = [n for n in names if n not in obj]
    if extra or missing:
        raise UserError(f"'{section}' keys differ from the schema: missing {missing}, "
                        f"unexpected {extra}", path=path, code="manifest-error")
    cells = []
    for f in fields:
        value = obj[f.name]
        if value is not None:
            ok = isinstance(value, _JSON_TYPES[f.type]) and not (
                f.type in ("integer", "number") and isinstance(value, bool))
            if not ok:
                raise UserError(f"{value!r} is not a valid {f.type}", path=path, field=f"{section}.{f.name}",
                                code="type-error")
        cell = format_value(value, f.type)
        if value is not None and f.type in ("string",) and cell == "":
            raise UserError("an empty string; write null for a missing value", path=path,
                            field=f"{section}.{f.name}", code="manifest-error")
        if cell and not is_canonical(cell, f.type):
            raise UserError(f"{value!r} is not a valid {f.type}", path=path,
                            field=f"{section}.{f.name}", code="type-error")
        cells.append(cell)
    return cells


def flatten_tables(root: Path, progress=None) -> tuple[dict[str, TextTable], dict]:
    """Read a run tree into the four text tables and the package metadata."""
    root = Path(root)
    return flatten_files({rel: paths.read_bytes(path) for rel, path in _walk(root).items()}, root,
                         progress)


def flatten_files(files: dict[str, bytes], root: Path,
                  progress=None) -> tuple[dict[str, TextTable], dict]:
    """The four text tables and the package metadata of a run tree given as its files' bytes
    ({relative posix path: bytes}, as `restore_files` makes them and `_walk` finds them under
    `root`, which errors name): one reader for a tree on disk and for the audit's in-memory
    round trip."""
    with cycle_collection_paused():
        return _flatten_files(dict(files), root, progress)


def _flatten_files(files: dict[str, bytes], root: Path, progress) -> tuple[dict[str, TextTable], dict]:
    meta_bytes = files.pop(PACKAGE_META, None)
    meta = {}
    if meta_bytes is not None:
        meta_path = root / PACKAGE_META
        meta = parse_json(meta_bytes, meta_path, "manifest-error")
        if not isinstance(meta, dict):
            raise UserError("is not a JSON object of package metadata", path=meta_path,
                            code="manifest-error")
    names_in: dict[str, set[str]] = defaultdict(set)
    for rel in files:
        folder, _, name = rel.rpartition("/")
        names_in[folder].add(name)
    run_dirs = sorted(names_in)
    expected_names = {MANIFEST, SAMPLES_FILE, *block_files()}
    schemas = {name: load_schema(name) for name in TABLES}
    rows: dict[str, list] = {name: [] for name in TABLES}
    runs_seen: list[tuple[str, str]] = []
    for rel_dir in run_dirs:
        parts = rel_dir.split("/")
        if len(parts) != 2:
            raise UserError("files must lie in <campaign>/<run_id>/ folders", path=root / rel_dir,
                            code="layout-error")
        campaign, run_id = (_check_id(p, what, root / rel_dir) for p, what in
                            zip(parts, ("campaign", "run_id")))
        present = names_in[rel_dir]
        if present != expected_names:
            raise UserError(f"a run directory holds exactly {sorted(expected_names)}; missing "
                            f"{sorted(expected_names - present)}, unexpected "
                            f"{sorted(present - expected_names)}", path=root / rel_dir,
                            code="layout-error")
        runs_seen.append((run_id, rel_dir))
    runs_seen.sort()
    for n, (run_id, rel_dir) in enumerate(runs_seen, start=1):
        if progress:
            progress(n, len(runs_seen), run_id)
        base = root / rel_dir
        campaign = rel_dir.split("/")[0]
        manifest_path = base / MANIFEST
        manifest = parse_json(files[f"{rel_dir}/{MANIFEST}"], manifest_path, "manifest-error")
        if not isinstance(manifest, dict) or set(manifest) != {"run", "environment"}:
            raise UserError("a manifest holds exactly the keys 'run' and 'environment'",
                            path=manifest_path, code="manifest-error")
        run_cells = _cells_from_json(manifest["run"], schemas["runs"].fields, manifest_path, "run")
        if run_cells[0] != run_id or run_cells[1] != campaign:
            raise UserError(f"run_id/campaign {run_cells[0]!r}/{run_cells[1]!r} differ from the "
                            f"folder {rel_dir!r}", path=manifest_path, code="manifest-error")
        rows["runs"].append(run_cells)
        rows["environment"].append([run_id] + _cells_from_json(
            manifest["environment"], schemas["environment"].fields[1:], manifest_path, "environment"))
        merged = None
        for name, cols in block_files().items():
            part = _read_csv(files[f"{rel_dir}/{name}"], base / name, list(BLOCK_KEY) + list(cols))
            if merged is None:
                merged = [[run_id] + r for r in part]
                continue
            if len(part) != len(merged) or any(r[:2] != m[1:3] for r, m in zip(part, merged)):
                raise UserError("its (epoch, phase) rows differ from blocks.csv's", path=base / name,
                                code="layout-error")
            for m, r in zip(merged, part):
                m.extend(r[2:])
        blocks_header = schemas["blocks"].field_names
        merged_header = ["run_id", *BLOCK_KEY] + [c for cols in block_files().values() for c in cols]
        index = [merged_header.index(c) for c in blocks_header]
        rows["blocks"].extend([[m[i] for i in index] for m in merged or []])
        rows["samples"].extend([run_id] + r for r in _read_csv(
            files[f"{rel_dir}/{SAMPLES_FILE}"], base / SAMPLES_FILE, schemas["samples"].field_names[1:]))
    tables = {name: TextTable(header=schemas[name].field_names, rows=rows[name]) for name in TABLES}
    return tables, meta


def flatten(root: Path, out: Path, *, overwrite: bool = False, descriptor_path: Path | None = None,
            progress=None) -> Path:
    """Flatten a run tree into a package at `out`; refuses to write an invalid package."""
    atomic.refuse_overlap(out, [root])
    tables, meta = flatten_tables(root, progress)
    return write_package(tables, out, meta, descriptor_path=descriptor_path, overwrite=overwrite,
                         check=lambda staged: _refuse_invalid(staged, root), inputs=[root])


def _refuse_invalid(staged_descriptor: Path, root: Path) -> None:
    from deepgreen_audit.package.validate import validate

    report = validate(staged_descriptor)
    if not report.valid:
        first = report.findings[0]
        raise UserError(f"the run tree does not make a valid package ({report.error_count} "
                        f"error(s); first: [{first.id}] {first.where()}: {first.message})",
                        path=root, code="invalid-package")
