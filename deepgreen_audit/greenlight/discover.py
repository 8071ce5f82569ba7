"""Find experiment files under a folder and say what each is (source, kind, project).

Layouts understood (the two public repositories; see docs/greenlight.md):

* FECoM: `.../energy-dataset/<kind>/<project...>/experiment-N.json` with
  `<kind>` one of method-level, project-level, data-size;
* Greenlight: `.../dataset/<project...>/experiment-N.json` (method-level).

Elsewhere the kind is `project-level` for a record keyed "project-level" and
method-level otherwise, and the project is the folder's path below the
imported one.  The source is `greenlight` when records carry
`project_metadata` (CodeGreen's addition) and `fecom` otherwise.  A
`skip_calls.json` beside the experiment files lists calls skipped in later
experiments; `execution_log.json` (captured stdout) is not a record.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, replace
from pathlib import Path

from deepgreen_audit.errors import UserError, path_text
from deepgreen_audit.greenlight.records import (
    EXPERIMENT_RE,
    PROJECT_LEVEL_KEY,
    CallRecord,
    RecordError,
    read_experiment,
)
from deepgreen_audit.package import paths

KINDS = ("method-level", "project-level", "data-size")
SKIP_CALLS_NAME = "skip_calls.json"


@dataclass(frozen=True)
class ProjectFolder:
    folder: Path
    repository: str     # first folder below the imported root ('' if files lie directly in it)
    kind: str | None    # None: decided from the records
    project: str


def project_folders(root: Path) -> list[ProjectFolder]:
    """Every folder under `root` holding experiment-N.json files, in path order."""
    root = Path(root)
    if not root.is_dir():
        raise UserError("is not a folder of experiment records", path=root, code="not-a-folder")
    folders = sorted({p.parent for p in paths.files_under(root, "experiment-*.json")
                      if EXPERIMENT_RE.match(p.name)})
    if not folders:
        raise UserError("holds no experiment-N.json record files", path=root, code="no-records")
    out = []
    for folder in folders:
        if any(p.is_symlink() for p in [folder, *folder.parents] if p != root and root in p.parents):
            raise UserError("is a symbolic link; import plain folders only", path=folder)
        parts = folder.relative_to(root).parts
        kind, project = None, parts
        for i, part in enumerate(parts):
            if part in KINDS and i + 1 < len(parts):
                kind, project = part, parts[i + 1:]
                break
            if part == "dataset" and i + 1 < len(parts):
                project = parts[i + 1:]
        # (a name that is not UTF-8 is held with its bytes shown escaped: errors.path_text)
        out.append(ProjectFolder(folder, path_text(parts[0]) if len(parts) > 1 else "", kind,
                                 path_text("/".join(project) or folder.name)))
    return out


def load_skip_calls(folder: Path) -> frozenset:
    path = folder / SKIP_CALLS_NAME
    if not path.is_file():
        return frozenset()
    try:
        data = json.loads(paths.read_bytes(path).decode("utf-8"))
    except (ValueError, RecursionError) as exc:  # not UTF-8, not JSON, too many digits
        raise UserError(f"is not valid JSON: {exc}", path=path, code="malformed-record") from None
    if not isinstance(data, list) or not all(isinstance(x, str) for x in data):
        raise UserError("must be a JSON list of call signatures", path=path, code="malformed-record")
    return frozenset(data)


def read_folder(root: Path, where: ProjectFolder) -> list[CallRecord]:
    """The records of one project folder, every experiment, in experiment then call order."""
    skip = load_skip_calls(where.folder)
    numbered = [(int(m.group(1)), p) for p in where.folder.iterdir() if (m := EXPERIMENT_RE.match(p.name))]
    files = [p for _, p in sorted(numbered, key=lambda t: t[0])]
    records: list[CallRecord] = []
    for path in files:
        rel = path_text(path.relative_to(root).as_posix())
        first = read_experiment(path, source="fecom", experiment_kind="method-level",
                                project=where.project, source_file=rel, skip_calls=skip)
        for record in first:
            kind = where.kind or ("project-level" if record.api_call == PROJECT_LEVEL_KEY
                                  else "method-level")
            if kind == "project-level" and record.api_call != PROJECT_LEVEL_KEY:
                raise RecordError(path, record.position, record.api_call,
                                  f"a project-level record must be keyed {PROJECT_LEVEL_KEY!r}")
            source = "greenlight" if record.metadata else "fecom"
            records.append(replace(record, source=source, experiment_kind=kind))
    return records


def read_tree(root: Path) -> list[CallRecord]:
    """Every record under `root`; the first malformed one stops the import with its name."""
    root = Path(root)
    records = []
    for where in project_folders(root):
        records.extend(read_folder(root, where))
    seen: dict[str, CallRecord] = {}
    for record in records:
        if record.call_id in seen:
            raise UserError(f"call {record.api_call!r} has the same identity ({record.call_id}) as "
                            f"one in {seen[record.call_id].source_file}", path=record.source_file,
                            code="duplicate-call")
        seen[record.call_id] = record
    return records
