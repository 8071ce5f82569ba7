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
(`deepgreen_audit.collect.record`) for each run it measures; `flatten_run` is the one reader
of a run directory.  Restore and the audit's round-trip proof (`prove_round_trip`) stream a
package one run at a time (`restored_runs`), so their memory does not grow with its size.
"""

from __future__ import annotations

import hashlib
import json
import os
import pickle
from collections import defaultdict, deque
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from functools import cache, partial
from itertools import groupby
from operator import itemgetter
from pathlib import Path

from deepgreen_audit.errors import UserError
from deepgreen_audit.package import atomic, outputs, paths
from deepgreen_audit.package.beside import Beside, ChildFailed
from deepgreen_audit.package.canonical import format_value, is_canonical, parse_value
from deepgreen_audit.package.descriptor import Package, parse_json
from deepgreen_audit.package.schema import TABLES, load_schema
from deepgreen_audit.package.tables import (
    TextTable,
    canonical_rows,
    canonical_text,
    cycle_collection_paused,
    stream_rows,
    text_table,
)
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


def restored_runs(package: Package, digests: dict | None = None
                  ) -> Iterator[tuple[str, str, dict[str, bytes]]]:
    """(campaign, run_id, {file name: bytes}) of each run directory of a (validated) package,
    in run order, one run at a time: the four tables are streamed side by side
    (`_rows_by_run`), so no more than one run's rows and files are held.  `digests`
    ({table: hashlib object}) is fed each table file's bytes as they are read.

    Unlike the readers of whole tables, a caller leaves the cycle collector on: json's
    encoder leaves a few reference cycles behind each manifest, which a paused collector
    would let pile up run after run (memory growing with the package after all)."""
    runs_schema, env_schema = load_schema("runs"), load_schema("environment")
    runs_path = package.table_path("runs")
    for row, env_rows, block_rows, sample_rows in _rows_by_run(package, digests or {}):
        run = {f.name: parse_value(cell, f.type) for f, cell in zip(runs_schema.fields, row)}
        run_id = _check_id(run["run_id"], "run_id", runs_path)
        campaign = _check_id(run["campaign"], "campaign", runs_path)
        if len(env_rows) != 1:
            raise UserError(f"run {run_id} has {len(env_rows)} environment rows; its run "
                            "directory holds one", path=package.table_path("environment"),
                            code="foreign-key")
        environment = {f.name: parse_value(cell, f.type)
                       for f, cell in zip(env_schema.fields[1:], env_rows[0][1:])}
        yield campaign, run_id, run_dir_files(run, environment, block_rows, sample_rows)


def _rows_by_run(package: Package, digests: dict) -> Iterator[tuple[list[str], list[list[str]],
                                                                   list[list[str]], list[list[str]]]]:
    """Each runs row with the run's environment, blocks and samples rows.

    Every table's primary key starts with run_id and its rows are in key order, so the four
    files are read side by side, each run's rows taken as they come.  Rows of a run_id that
    the runs table does not name next are left for a later run, and whatever is left at the
    end is read (for `digests`) and dropped: restore has no place for such rows, so a round
    trip loses them, as it would from a tree on disk."""
    runs_path = package.table_path("runs")
    groups = {name: _RunGroups(_table_rows(package, name, digests.get(name)))
              for name in ("environment", "blocks", "samples")}
    previous = None
    for rows in _table_rows(package, "runs", digests.get("runs")):
        for row in rows:
            run_id = row[0]
            if previous is not None and run_id <= previous:
                raise UserError(f"run_id {run_id!r} follows {previous!r}: the runs table is not "
                                "in run_id order, or names a run twice", path=runs_path,
                                code="row-order")
            previous = run_id
            yield (row, groups["environment"].take(run_id), groups["blocks"].take(run_id),
                   groups["samples"].take(run_id))
    for group in groups.values():
        group.drain()


class _RunGroups:
    """A table's rows, in run_id order, taken one run at a time from its batches."""

    def __init__(self, batches: Iterator[list[list[str]]]):
        self._batches = batches
        self._groups: deque[tuple[str, list[list[str]]]] = deque()  # (run_id, its rows) read

    def _read(self) -> bool:
        """Split the next batch into runs; False at the end of the table."""
        for rows in self._batches:
            at = 0
            for run_id, same in groupby(map(itemgetter(0), rows)):
                size = len(list(same))
                self._groups.append((run_id, rows[at:at + size]))
                at += size
            if self._groups:
                return True
        return False

    def take(self, run_id: str) -> list[list[str]]:
        """The rows of `run_id` if they come next, else none."""
        taken: list[list[str]] = []
        while self._groups or self._read():
            if self._groups[0][0] != run_id:
                break
            taken.extend(self._groups.popleft()[1])
        return taken

    def drain(self) -> None:
        self._groups.clear()
        for _ in self._batches:
            pass


def _table_rows(package: Package, name: str, digest=None) -> Iterator[list[list[str]]]:
    """The rows of table `name` in batches (`tables.stream_rows`), its header checked against
    the schema and each row as many cells as the header."""
    path = package.table_path(name)
    if path.is_symlink():
        raise UserError("is a symbolic link; a package holds plain files only", path=path,
                        code="symlink")
    expected = load_schema(name).field_names
    width = len(expected)
    header = None
    for number, rows in stream_rows(path, digest):
        if header is None:
            header, rows, number = rows[0], rows[1:], number + 1
            if header != expected:
                raise UserError(f"header is {','.join(header)}; expected {','.join(expected)}",
                                path=path, row=1, code="header-error")
        if rows and set(map(len, rows)) != {width}:
            at, row = next((i, r) for i, r in enumerate(rows) if len(r) != width)
            raise UserError(f"{len(row)} cells, expected {width}", path=path, row=number + at,
                            code="field-count")
        yield rows
    if header is None:
        raise UserError("the table is empty: no header row", path=path, code="empty-table")


def restore(location, out: Path, *, overwrite: bool = False, dry_run: bool = False) -> dict:
    """Write the run tree of the package at `location` to `out` (atomically), one run
    directory at a time.

    The package is validated first; an invalid package restores nothing.
    Returns a summary {runs, files, bytes}.
    """
    from deepgreen_audit.package.validate import validate

    validate(location).refuse_invalid()
    package = Package.open(location)
    atomic.refuse_overlap(out, package.input_paths())
    if dry_run:
        atomic.check_output(out, overwrite)
        return _restore_into(package, None, out)
    with atomic.StagedDirectory(Path(out), overwrite, inputs=package.input_paths()) as staged:
        summary = _restore_into(package, staged.path, out)
    return summary


def _restore_into(package: Package, root: Path | None, out: Path) -> dict:
    """Write the run tree under `root` (or nothing, for None: a dry run); its summary."""
    meta = _json_text(package.meta)
    runs, files, size = 0, 1, len(meta)
    if root is not None:
        write_files(root, {PACKAGE_META: meta})
    for campaign, run_id, run_files in restored_runs(package):
        runs += 1
        files += len(run_files)
        size += sum(map(len, run_files.values()))
        if root is not None:
            write_files(root, {f"{campaign}/{run_id}/{name}": data
                               for name, data in run_files.items()})
    return {"runs": runs, "files": files, "bytes": size, "out": str(out)}


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
        if not dirnames and not filenames and Path(dirpath) != root:
            raise _empty_folder(root, Path(dirpath))
    return found


def _empty_folder(root: Path, folder: Path) -> UserError:
    """The refusal of an empty folder in a run tree, which flatten would otherwise pass over
    without a word: an empty campaign folder is a campaign none of whose runs completed."""
    if len(folder.relative_to(root).parts) == 1:
        return UserError("is an empty campaign folder: no run of this campaign completed (collect "
                         "keeps a failed run in OUT/failed/, outside the run tree); remove it, "
                         "or collect again to retry the failed runs", path=folder,
                         code="no-runs")
    return UserError(f"is an empty folder where a run directory holds "
                     f"{', '.join(sorted(_run_file_names()))}: not a completed run; remove it",
                     path=folder, code="layout-error")


def _refuse_no_runs(run_dirs: list[tuple[str, str]], root: Path) -> None:
    """A tree without one run directory would flatten to a package of no run: refused."""
    if not run_dirs:
        raise UserError("holds no run directory (<campaign>/<run_id>/): no run completed, so "
                        "there is nothing to flatten (collect keeps a failed run in OUT/failed/, "
                        "outside the run tree; collect again to retry it)", path=root,
                        code="no-runs")


def _read_csv(data: bytes, path: Path, expected: list[str]) -> list[list[str]]:
    table = text_table(data, path)
    if table.header != expected:
        raise UserError(f"header is {','.join(table.header)}; expected {','.join(expected)}",
                        path=path, row=1, code="header-error")
    if table.rows and set(map(len, table.rows)) != {len(expected)}:
        number, row = next((n, r) for n, r in zip(table.lines(), table.rows)
                           if len(r) != len(expected))
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
    _refuse_other_folders(root)
    found = _walk(root)
    with cycle_collection_paused():
        meta = _read_meta(paths.read_bytes(found.pop(PACKAGE_META)), root) \
            if PACKAGE_META in found else {}
        run_dirs = _run_dirs(found, root)
        _refuse_no_runs(run_dirs, root)
        _refuse_mixed_campaigns(meta, run_dirs, root)
        rows: dict[str, list] = {name: [] for name in TABLES}
        for n, (run_id, rel_dir) in enumerate(run_dirs, start=1):
            if progress:
                progress(n, len(run_dirs), run_id)
            campaign = rel_dir.split("/")[0]
            run_files = {name: paths.read_bytes(found[f"{rel_dir}/{name}"]) for name in _run_file_names()}
            for name, part in flatten_run(run_files, campaign, run_id, root / rel_dir).items():
                rows[name].extend(part)
    tables = {name: TextTable(header=load_schema(name).field_names, rows=rows[name]) for name in TABLES}
    return tables, meta


def _refuse_other_folders(root: Path) -> None:
    """Say what a folder given as a run tree is when it is a package or a collect output folder
    (whose run tree is its runs/), instead of a layout error about its first file."""
    if (root / outputs.DESCRIPTOR_NAME).is_file():
        raise UserError(f"is a package ({outputs.DESCRIPTOR_NAME}), not a run tree: 'deepgreen "
                        f"restore {root} --out RUNS' writes its run directories", path=root,
                        code="layout-error")
    if (root / outputs.COLLECT_MARK).is_file() or (root / "runs" / PACKAGE_META).is_file():
        raise UserError(f"is a collect output folder, not a run tree: its run tree is "
                        f"{root / 'runs'} ('deepgreen flatten {root / 'runs'} --out PKG')",
                        path=root, code="layout-error")


def _refuse_mixed_campaigns(meta: dict, run_dirs: list[tuple[str, str]], root: Path) -> None:
    """Refuse, in words, a tree that mixes campaigns where a package cannot: one run id in two
    campaigns' folders (the runs table names each run once), or a campaign folder beside the
    one a collected tree's package.json describes (its scope, host and seed are that one's)."""
    campaigns: dict[str, list[str]] = defaultdict(list)
    for run_id, rel_dir in run_dirs:
        campaigns[run_id].append(rel_dir.split("/")[0])
    twice = next(((run_id, found) for run_id, found in campaigns.items() if len(found) > 1), None)
    if twice is not None:
        raise UserError(f"mixes campaigns: run {twice[0]} lies in the folders of "
                        f"{' and '.join(repr(c) for c in twice[1])}, and a package names each run "
                        "once; flatten each campaign's runs from a tree of their own", path=root,
                        code="layout-error")
    provenance = meta.get("provenance")
    if not isinstance(provenance, dict) or provenance.get("collected_by") != "deepgreen collect":
        return
    others = sorted({c for found in campaigns.values() for c in found} - {meta.get("name")})
    if others:
        raise UserError(f"mixes campaigns: its {PACKAGE_META} describes campaign "
                        f"{meta.get('name')!r}, which 'deepgreen collect' measured, and it also "
                        f"holds {', '.join(repr(c) for c in others)}; flatten each campaign's "
                        "runs from a tree of their own", path=root, code="layout-error")


def _read_meta(data: bytes, root: Path) -> dict:
    """The package metadata of a tree's package.json."""
    meta_path = root / PACKAGE_META
    meta = parse_json(data, meta_path, "manifest-error")
    if not isinstance(meta, dict):
        raise UserError("is not a JSON object of package metadata", path=meta_path,
                        code="manifest-error")
    return meta


def _run_file_names() -> set[str]:
    return {MANIFEST, SAMPLES_FILE, *block_files()}


def _run_dirs(files: dict[str, Path], root: Path) -> list[tuple[str, str]]:
    """(run_id, "<campaign>/<run_id>") of each run directory of a tree's files (less
    package.json), in run_id order: each holds exactly the files of a run directory."""
    names_in: dict[str, set[str]] = defaultdict(set)
    for rel in files:
        folder, _, name = rel.rpartition("/")
        names_in[folder].add(name)
    expected_names = _run_file_names()
    runs_seen: list[tuple[str, str]] = []
    for rel_dir in sorted(names_in):
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
    return sorted(runs_seen)


def flatten_run(files: dict[str, bytes], campaign: str, run_id: str,
                base: Path) -> dict[str, list[list[str]]]:
    """{table: the run's rows as text cells} of one run directory given as {file name: bytes}
    (read from `base`, which errors name): the one reader of a run directory, for
    `deepgreen flatten` and for the audit's round trip."""
    schemas = {name: load_schema(name) for name in TABLES}
    rel_dir = f"{campaign}/{run_id}"
    manifest_path = base / MANIFEST
    manifest = parse_json(files[MANIFEST], manifest_path, "manifest-error")
    if not isinstance(manifest, dict) or set(manifest) != {"run", "environment"}:
        raise UserError("a manifest holds exactly the keys 'run' and 'environment'",
                        path=manifest_path, code="manifest-error")
    run_cells = _cells_from_json(manifest["run"], schemas["runs"].fields, manifest_path, "run")
    if run_cells[0] != run_id or run_cells[1] != campaign:
        raise UserError(f"run_id/campaign {run_cells[0]!r}/{run_cells[1]!r} differ from the "
                        f"folder {rel_dir!r}", path=manifest_path, code="manifest-error")
    env_cells = [run_id] + _cells_from_json(manifest["environment"], schemas["environment"].fields[1:],
                                            manifest_path, "environment")
    merged = None
    for name, cols in block_files().items():
        part = _read_csv(files[name], base / name, list(BLOCK_KEY) + list(cols))
        if merged is None:
            merged = [[run_id] + r for r in part]
            continue
        if len(part) != len(merged) or any(r[:2] != m[1:3] for r, m in zip(part, merged)):
            raise UserError("its (epoch, phase) rows differ from blocks.csv's", path=base / name,
                            code="layout-error")
        for m, r in zip(merged, part):
            m.extend(r[2:])
    merged_header = ["run_id", *BLOCK_KEY] + [c for cols in block_files().values() for c in cols]
    index = [merged_header.index(c) for c in schemas["blocks"].field_names]
    samples = _read_csv(files[SAMPLES_FILE], base / SAMPLES_FILE, schemas["samples"].field_names[1:])
    for row in samples:
        row.insert(0, run_id)
    return {"runs": [run_cells], "environment": [env_cells],
            "blocks": [[m[i] for i in index] for m in merged or []], "samples": samples}


@dataclass
class RoundTrip:
    """What `prove_round_trip` found: the runs and files it went through, what the round trip
    changes (tables with their digests before and after, "package metadata") and, when it
    could not be done, why."""

    runs: int = 0
    files: int = 0
    changes: list[str] = field(default_factory=list)
    error: str | None = None


def prove_round_trip(package: Package, *, pipelined: bool = False) -> RoundTrip:
    """Whether flatten(restore(package)) is the package byte for byte, in bounded memory.

    The tables are streamed side by side and taken one run at a time (`restored_runs`, the
    writer restore uses); each run directory's files are read back by the reader flatten uses
    (`flatten_run`), and the canonical text of the rows it gives feeds one SHA-256 per table
    (its header first), compared with the SHA-256 of the table file's bytes, hashed as they
    were read.  The package metadata goes through package.json the same way.  Nothing here
    raises on a bad package: what stops the round trip is `error`.

    `pipelined` reads the run directories back in a child process of its own (it forks: for
    a process that runs nothing else, the audit program's child), fed run by run through a
    pipe, so that writing them and reading them back take a core each once both are free."""
    proof = RoundTrip()
    read = {name: hashlib.sha256() for name in TABLES}
    try:
        meta = _read_meta(_json_text(package.meta), Path("<restored run tree>"))
    except (UserError, ValueError, OSError) as exc:
        proof.error = str(exc)
        return proof
    run_dirs = restored_runs(package, read)
    back = _read_back_beside(run_dirs) if pipelined and hasattr(os, "fork") else _read_back(run_dirs)
    proof.runs, proof.files, proof.error = back.runs, 1 + back.files, back.error
    if proof.error is not None:
        return proof
    for name in TABLES:
        before, after = read[name].hexdigest(), back.digests[name]
        if before != after:
            proof.changes.append(f"{name} (sha256 {before[:12]} -> {after[:12]})")
    if meta != package.meta:
        proof.changes.append("package metadata")
    return proof


@dataclass
class _ReadBack:
    """What reading run directories back gave: the runs and files read, the SHA-256 of each
    table's canonical text (its header's, then its rows'), or what stopped it."""

    runs: int = 0
    files: int = 0
    digests: dict[str, str] = field(default_factory=dict)
    error: str | None = None


def _read_back(run_dirs: Iterable[tuple[str, str, dict[str, bytes]]]) -> _ReadBack:
    """Read each (campaign, run_id, files) back with `flatten_run` and hash the rows it gives."""
    again = {name: hashlib.sha256(canonical_rows([load_schema(name).field_names]).encode())
             for name in TABLES}
    back = _ReadBack()
    root = Path("<restored run tree>")
    try:
        for campaign, run_id, run_files in run_dirs:
            back.runs += 1
            back.files += len(run_files)
            for name, rows in flatten_run(run_files, campaign, run_id,
                                          root / campaign / run_id).items():
                again[name].update(canonical_rows(rows).encode())
    except (UserError, ValueError, OSError) as exc:
        back.error = str(exc)
    back.digests = {name: digest.hexdigest() for name, digest in again.items()}
    return back


class _WriterStopped(ValueError):
    """What stopped the writer of the run directories, sent to their reader (`_read_back_from`)."""


def _read_back_beside(run_dirs: Iterator[tuple[str, str, dict[str, bytes]]]) -> _ReadBack:
    """`_read_back` in a child process, the run directories sent to it through a pipe as this
    process writes them: the pipe holds a few runs at most, so memory stays bounded."""
    read_fd, write_fd = os.pipe()
    reader = Beside(partial(_read_back_from, read_fd, write_fd), group=False)
    os.close(read_fd)
    try:
        with os.fdopen(write_fd, "wb") as pipe:
            try:
                for run_dir in run_dirs:
                    pickle.dump(run_dir, pipe, protocol=pickle.HIGHEST_PROTOCOL)
            except (UserError, ValueError, OSError) as exc:  # the reader says so where it stops
                if isinstance(exc, BrokenPipeError):  # the reader itself has gone
                    raise
                pickle.dump(_WriterStopped(str(exc)), pipe, protocol=pickle.HIGHEST_PROTOCOL)
        return reader.result()[0]
    except (OSError, ChildFailed) as exc:
        return _ReadBack(error=str(exc))
    finally:
        reader.cancel()


def _read_back_from(read_fd: int, write_fd: int) -> _ReadBack:
    """The reading child of `_read_back_beside`: the run directories as they arrive; after a
    stop of its own, the rest of the pipe is drained so that the writer never waits on it."""
    os.close(write_fd)  # the writer's end: this process holds only its own
    with os.fdopen(read_fd, "rb") as pipe:
        back = _read_back(_received(pipe))
        while pipe.read(1 << 16):
            pass
    return back


def _received(pipe) -> Iterator[tuple[str, str, dict[str, bytes]]]:
    while True:
        try:
            item = pickle.load(pipe)
        except EOFError:
            return
        if isinstance(item, _WriterStopped):
            raise item
        yield item


def flatten(root: Path, out: Path, *, overwrite: bool = False, descriptor_path: Path | None = None,
            progress=None) -> Path:
    """Flatten a run tree into a package at `out`; refuses to write an invalid package, and
    refuses an `out` it must not write before it reads anything (`outputs.refuse_package_out`)."""
    outputs.refuse_package_out(out, overwrite=overwrite, inputs=[root],
                               descriptor_path=descriptor_path)
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
