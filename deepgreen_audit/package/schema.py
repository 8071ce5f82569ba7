"""The Table Schemas in `schemas/`, loaded once and turned into what the code needs.

The JSON files are the single source of truth for table names, column
order, types, units, constraints and keys.  Readers (pyarrow types), the
row checks (pandera) and the run-directory layout (the custom `rundir`
property of a field) are all derived here from those files.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from functools import cache
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import pyarrow as pa

from deepgreen_audit.errors import UserError
from deepgreen_audit.resources import project_file

#: The four tables of a replication package, in the order they are written.
TABLES: tuple[str, ...] = ("runs", "blocks", "samples", "environment")

#: The Table Schema types a field may have.
TYPES = ("string", "integer", "number", "boolean", "datetime")


@cache
def _arrow_types() -> dict[str, pa.DataType]:
    """The pyarrow type of each Table Schema type (pyarrow imported only by the typed readers:
    the text-level readers, e.g. the audit's round-trip proof, start without it)."""
    import pyarrow as pa

    return dict(zip(TYPES, (pa.string(), pa.int64(), pa.float64(), pa.bool_(),
                            pa.timestamp("us", tz="UTC")), strict=True))


def schema_dir() -> Path:
    path = project_file("schemas")
    if not (path / "runs.json").is_file():
        raise UserError("the Table Schemas are missing: this copy of deepgreen_audit was "
                        "installed without its package data; reinstall it", path=path)
    return path


@dataclass(frozen=True)
class Field:
    name: str
    type: str
    description: str
    required: bool = False
    unique: bool = False
    minimum: float | None = None
    maximum: float | None = None
    exclusive_minimum: float | None = None
    exclusive_maximum: float | None = None
    min_length: int | None = None
    max_length: int | None = None
    enum: tuple[str, ...] | None = None
    pattern: str | None = None
    rundir: str | None = None

    @property
    def arrow_type(self) -> pa.DataType:
        return _arrow_types()[self.type]

    @property
    def allowed(self) -> tuple[str, ...]:
        """The enum of a field the code relies on having one (the shipped schemas say it)."""
        if self.enum is None:
            raise ValueError(f"field {self.name} has no enum constraint")
        return self.enum

    @property
    def regex(self) -> str:
        """The pattern of a field the code relies on having one (the shipped schemas say it)."""
        if self.pattern is None:
            raise ValueError(f"field {self.name} has no pattern constraint")
        return self.pattern


@dataclass(frozen=True)
class TableSchema:
    name: str
    fields: tuple[Field, ...]
    primary_key: tuple[str, ...]
    foreign_keys: tuple[tuple[tuple[str, ...], str, tuple[str, ...]], ...]
    descriptor: dict

    @property
    def field_names(self) -> list[str]:
        return [f.name for f in self.fields]

    def field(self, name: str) -> Field:
        for f in self.fields:
            if f.name == name:
                return f
        raise KeyError(name)

    @property
    def arrow_schema(self) -> pa.Schema:
        import pyarrow as pa

        return pa.schema([(f.name, f.arrow_type) for f in self.fields])


def _parse(name: str, descriptor: dict) -> TableSchema:
    fields = []
    for raw in descriptor["fields"]:
        cons = raw.get("constraints", {})
        if raw["type"] not in TYPES:
            raise UserError(f"field {raw['name']!r} has unsupported type {raw['type']!r}",
                            path=f"schemas/{name}.json")
        fields.append(Field(
            name=raw["name"], type=raw["type"], description=raw.get("description", ""),
            required=bool(cons.get("required", False)), unique=bool(cons.get("unique", False)),
            minimum=cons.get("minimum"), maximum=cons.get("maximum"),
            exclusive_minimum=cons.get("exclusiveMinimum"), exclusive_maximum=cons.get("exclusiveMaximum"),
            min_length=cons.get("minLength"), max_length=cons.get("maxLength"),
            enum=tuple(cons["enum"]) if "enum" in cons else None,
            pattern=cons.get("pattern"), rundir=raw.get("rundir"),
        ))
    fks = tuple((tuple(fk["fields"]), fk["reference"]["resource"], tuple(fk["reference"]["fields"]))
                for fk in descriptor.get("foreignKeys", []))
    return TableSchema(name=name, fields=tuple(fields),
                       primary_key=tuple(descriptor.get("primaryKey", [])),
                       foreign_keys=fks, descriptor=descriptor)


@cache
def load_schema(name: str) -> TableSchema:
    """The schema of table `name` from `schemas/<name>.json`."""
    path = schema_dir() / f"{name}.json"
    try:
        descriptor = json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise UserError("no such Table Schema", path=path) from None
    return _parse(name, descriptor)


def pandera_schema(schema: TableSchema):
    """A pandera DataFrameSchema derived from the Table Schema's constraints.

    The analysis checks the typed frames it reads with it (required cells, ranges, enums,
    patterns, uniqueness); `validate` checks the same constraints, from the same schema,
    vectorised over the pyarrow columns it has already read.
    """
    import pandera.pandas as pa_

    columns = {}
    for f in schema.fields:
        checks = []
        if f.minimum is not None:
            checks.append(pa_.Check.ge(f.minimum, error=f"minimum {f.minimum}"))
        if f.maximum is not None:
            checks.append(pa_.Check.le(f.maximum, error=f"maximum {f.maximum}"))
        if f.exclusive_minimum is not None:
            checks.append(pa_.Check.gt(f.exclusive_minimum, error=f"exclusiveMinimum {f.exclusive_minimum}"))
        if f.exclusive_maximum is not None:
            checks.append(pa_.Check.lt(f.exclusive_maximum, error=f"exclusiveMaximum {f.exclusive_maximum}"))
        if f.min_length is not None or f.max_length is not None:
            checks.append(pa_.Check.str_length(f.min_length, f.max_length,
                                               error=f"length {f.min_length}..{f.max_length}"))
        if f.enum is not None:
            checks.append(pa_.Check.isin(list(f.enum), error=f"one of {', '.join(f.enum)}"))
        if f.pattern is not None:
            # fullmatch, not re.match: `$` would let a trailing newline through
            checks.append(pa_.Check(lambda s, p=f.pattern: s.str.fullmatch(p).fillna(False).astype(bool),
                                    error=f"pattern {f.pattern}"))
        columns[f.name] = pa_.Column(
            None, checks=checks, nullable=not f.required, unique=f.unique, coerce=False,
            required=True, description=f.description)
    return pa_.DataFrameSchema(columns, strict=True, ordered=True, name=schema.name)


def phases() -> tuple[str, ...]:
    """The phases of a block in their order within an epoch (train, eval): the blocks schema's
    enum is their one statement."""
    return load_schema("blocks").field("phase").allowed
