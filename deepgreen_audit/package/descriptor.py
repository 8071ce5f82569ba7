"""`datapackage.json`: generated from the tables and the schemas, never edited by hand.

A package is a folder of canonical CSV tables and SHA256SUMS, described
by a Data Package (v2) descriptor that declares its kind (`kinds.KIND_KEY`:
which tables it holds, which verbs read it).  The descriptor usually lies in that
folder; the shipped package is described by the top-level
`datapackage.json` of the project, whose resource paths start with
`replication/`.  Each resource carries its `bytes` and `hash`
(`sha256:<hex>`) and an inline copy of its Table Schema from `schemas/`.
"""

from __future__ import annotations

import json
import os
import sys
from dataclasses import dataclass
from functools import cached_property
from pathlib import Path, PurePosixPath
from typing import TYPE_CHECKING

from deepgreen_audit.errors import UserError
from deepgreen_audit.package import paths, tables as _tables
from deepgreen_audit.package.checksums import FILENAME as SUMS_NAME
from deepgreen_audit.package.kinds import KIND_KEY, REPLICATION, Kind, kind_of
from deepgreen_audit.package.schema import TABLES, load_schema

if TYPE_CHECKING:
    import pyarrow as pa

DESCRIPTOR_NAME = "datapackage.json"
PACKAGE_PROFILE = "https://datapackage.org/profiles/2.0/datapackage.json"
#: Descriptor keys that are generated; everything else is package metadata.
GENERATED_KEYS = ("$schema", KIND_KEY, "checksums", "resources")


@dataclass(frozen=True)
class Written:
    """What was written of one table file: its size in bytes and its SHA-256 (hex), the one
    source of the descriptor's `bytes` and `hash` and of its SHA256SUMS line."""

    size: int
    sha256: str


def build(meta: dict, written: dict[str, Written], tables_rel: str,
          kind: Kind = REPLICATION) -> dict:
    """The descriptor of a `kind` package whose tables lie under `tables_rel` (relative to the
    descriptor), each table as `written` (by table name)."""
    prefix = "" if tables_rel in ("", ".") else tables_rel.rstrip("/") + "/"
    descriptor: dict[str, object] = {"$schema": PACKAGE_PROFILE, KIND_KEY: kind.name}
    descriptor.update({k: v for k, v in meta.items() if k not in GENERATED_KEYS})
    descriptor["checksums"] = prefix + SUMS_NAME
    descriptor["resources"] = [{
        "name": name,
        "type": "table",
        "path": f"{prefix}{name}.csv",
        "format": "csv",
        "mediatype": "text/csv",
        "encoding": "utf-8",
        "bytes": written[name].size,
        "hash": "sha256:" + written[name].sha256,
        "schema": load_schema(name).descriptor,
    } for name in kind.tables]
    return descriptor


def dumps(descriptor: dict) -> str:
    return json.dumps(descriptor, indent=2, ensure_ascii=False) + "\n"


def read_json(path: Path, code: str):
    """A JSON file's value (see `parse_json`)."""
    return parse_json(paths.read_bytes(path), path, code)


def parse_json(data: bytes, path: Path, code: str):
    r"""The JSON value of `data`, read from `path`; malformed JSON, non-UTF-8 bytes and
    `\ud800`-style escapes of lone surrogates (text no UTF-8 file can hold, so no writer
    could copy it) are UserErrors."""
    try:
        value = json.loads(data.decode("utf-8"))
    except (UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise UserError(f"is not valid JSON: {exc}", path=path, code=code) from None
    except ValueError:  # an integer of more digits than Python converts
        raise UserError(f"holds a number of more than {sys.get_int_max_str_digits()} digits, "
                        "more than deepgreen reads", path=path, code=code) from None
    except RecursionError:
        raise UserError("is not valid JSON: nested too deeply", path=path, code=code) from None
    try:
        json.dumps(value, ensure_ascii=False).encode("utf-8")
    except UnicodeEncodeError:
        raise UserError("holds a \\u escape of a lone surrogate, which is not text",
                        path=path, code=code) from None
    return value


def safe_relative(path_text: str, where: Path) -> PurePosixPath:
    """A resource path that stays inside the package folder, or a UserError."""
    path = PurePosixPath(path_text)
    if "\0" in path_text:
        raise UserError(f"resource path {path_text!r} holds a NUL byte, which no file name can "
                        "hold", path=where, code="unsafe-path")
    if path.is_absolute() or ".." in path.parts or "\\" in path_text or not path.parts:
        raise UserError(f"resource path {path_text!r} leaves the package folder",
                        path=where, code="unsafe-path")
    return path


class Package:
    """A replication package on disk, opened from its descriptor."""

    def __init__(self, descriptor_path: Path, descriptor: dict):
        self.descriptor_path = descriptor_path
        self.base = descriptor_path.parent
        self.descriptor = descriptor

    @classmethod
    def open(cls, location: str | Path | None = None) -> Package:
        """Open PKG: a folder holding datapackage.json, or the descriptor itself."""
        path = Path(location) if location is not None else Path(DESCRIPTOR_NAME)
        paths.check_text(path)
        if os.path.isdir(path):
            path = path / DESCRIPTOR_NAME
        if not os.path.lexists(path):
            raise UserError("no package descriptor here (expected a folder with "
                            f"{DESCRIPTOR_NAME}, or the descriptor itself)", path=path,
                            code="missing-descriptor")
        descriptor = read_json(path, "descriptor-error")
        if not isinstance(descriptor, dict) or not isinstance(descriptor.get("resources"), list):
            raise UserError("is not a Data Package descriptor (no 'resources' list)", path=path,
                            code="descriptor-error")
        return cls(path, descriptor)

    @property
    def meta(self) -> dict:
        """Package-level metadata: the descriptor less its generated keys."""
        return {k: v for k, v in self.descriptor.items() if k not in GENERATED_KEYS}

    @property
    def kind(self) -> Kind:
        """The kind the descriptor declares (see `kinds.kind_of`)."""
        return kind_of(self.descriptor, self.descriptor_path)

    @property
    def synthetic(self) -> bool:
        return bool(self.descriptor.get("synthetic", False))

    def resource(self, name: str) -> dict:
        """The resource named `name`; refused when there are two (which would a reader take?)."""
        found = [res for res in self.descriptor["resources"]
                 if isinstance(res, dict) and res.get("name") == name]
        if len(found) > 1:
            raise UserError(f"the descriptor has {len(found)} resources named {name!r}",
                            path=self.descriptor_path, code="duplicate-resource")
        if not found:
            raise UserError(f"the descriptor has no resource {name!r}", path=self.descriptor_path,
                            code="missing-resource")
        return found[0]

    def table_path(self, name: str) -> Path:
        res = self.resource(name)
        if not isinstance(res.get("path"), str):
            raise UserError(f"resource {name!r} has no path", path=self.descriptor_path,
                            code="descriptor-error")
        return self.confined(res["path"])

    def confined(self, path_text: str) -> Path:
        """A path inside the package folder, also once symbolic links (of its folders or
        of the file itself) are followed."""
        path = self.base / safe_relative(path_text, self.descriptor_path)
        base, target = Path(os.path.realpath(self.base)), Path(os.path.realpath(path))
        if base not in target.parents:
            raise UserError(f"{path_text!r} leads out of the package folder through a symbolic "
                            "link", path=self.descriptor_path, code="unsafe-path")
        return path

    @property
    def tables_dir(self) -> Path:
        return self.table_path(TABLES[0]).parent

    def input_paths(self) -> list[Path]:
        """What a command reading this package reads: no output may overlap these."""
        return [self.descriptor_path, self.checksums_path,
                *{self.table_path(name).parent for name in self.kind.tables}]

    @property
    def checksums_path(self) -> Path:
        text = self.descriptor.get("checksums")
        if isinstance(text, str):
            return self.confined(text)
        return self.tables_dir / SUMS_NAME

    def text(self, name: str) -> _tables.TextTable:
        if name not in self._text_cache:
            path = self.table_path(name)
            if path.is_symlink():
                raise UserError("is a symbolic link; a package holds plain files only", path=path,
                                code="symlink")
            if not os.path.lexists(path):
                raise UserError(f"table {name!r} is missing", path=path, code="missing-table")
            self._text_cache[name] = _tables.read_text(path)
        return self._text_cache[name]

    @cached_property
    def _text_cache(self) -> dict:
        return {}

    def table(self, name: str) -> pa.Table:
        """Table `name`, typed from its schema (validate the package first)."""
        return _tables.typed(load_schema(name), self.text(name))

    def notice(self) -> str | None:
        """The line every command prints about a synthetic package."""
        if not self.synthetic:
            return None
        prov = self.descriptor.get("provenance", {})
        prov = prov if isinstance(prov, dict) else {}
        copies = prov.get("copies")
        origin = ", ".join([f"{k} {prov[k]}" for k in ("generator", "seed") if k in prov]
                           + ([f"{copies['copies']} copies of one drawn campaign"]
                              if isinstance(copies, dict) and "copies" in copies else [])
                           + [str(self.descriptor[k]) for k in ("synthetic_reason",) if k in self.descriptor])
        return ("SYNTHETIC DATA: this package is synthetic" + (f" ({origin})" if origin else "")
                + "; its numbers are not measurements.")


def relpath(path: Path, start: Path) -> str:
    return PurePosixPath(os.path.relpath(path, start)).as_posix()
