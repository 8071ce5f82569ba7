"""Validation of a foreign Frictionless data package, by frictionless itself.

A package that is not of a deepgreen kind has tables whose schemas are its
own, not `schemas/`, so deepgreen's checks do not apply; frictionless checks
what the Data Package standard defines (descriptor, Table Schema types and
constraints, keys, bytes and hashes).  Its errors enter deepgreen's report
with the resource, row and field they name.  frictionless is imported here
only, so validating a package of ours never pays its import.
"""

from __future__ import annotations

import decimal
import re
from collections import Counter

from deepgreen_audit.errors import UserError
from deepgreen_audit.package import paths
from deepgreen_audit.package.descriptor import Package
from deepgreen_audit.report import Report
from deepgreen_audit.safe import json_text

#: frictionless error types that mean what a deepgreen code means; any other is
#: `frictionless-error`, its type named in the message.
SHARED_CODES = {
    "type-error": "type-error", "constraint-error": "constraint-error",
    "unique-error": "unique-error", "primary-key": "primary-key-error",
    "foreign-key": "foreign-key-error", "encoding-error": "encoding-error",
    "hash-count": "hash-mismatch", "byte-count": "bytes-mismatch",
    "missing-label": "missing-column", "extra-label": "extra-column",
    "missing-cell": "field-count", "extra-cell": "field-count",
}


def validate_foreign(package: Package, report: Report) -> None:
    """Add frictionless's findings on `package` to `report`, and each resource's rows and bytes.

    Resource paths must stay inside the package folder and on this machine, and name
    regular files: a remote or escaping path (a symbolic link out of the folder too), a
    FIFO, socket or device, or a remote schema or dialect, is reported and nothing is read."""
    if not package.descriptor["resources"]:
        report.add("descriptor-error", "lists no resources: there is nothing to validate")
        return
    if not _paths_confined(package, report):
        return
    import frictionless

    if not _constraints_applicable(frictionless, package, report):
        return
    try:
        # frictionless reads a number cell as a Decimal, "sNaN" included, and compares and
        # hashes it: untrapped, a NaN comparison is False (a constraint error) instead of an
        # exception; what still raises (hashing a signalling NaN for a key) is reported.
        with decimal.localcontext() as context:
            context.traps[decimal.InvalidOperation] = False
            result = frictionless.validate(str(package.descriptor_path))
    except (ArithmeticError, TypeError, ValueError) as exc:
        report.add("frictionless-error", f"frictionless stopped validating the package "
                   f"({type(exc).__name__}: {str(exc)[:200]}), so it is not called valid")
        return
    report.stats["checked_by"] = f"frictionless {frictionless.__version__}"
    for error in result.errors:
        _add(report, error, resource=None)
    names = []
    for task in result.tasks:
        names.append(task.name)
        report.stats[task.name] = {"rows": task.stats.get("rows", 0),
                                   "bytes": task.stats.get("bytes", 0)}
        for error in task.errors:
            _add(report, error, resource=task.name)
    report.stats["tables"] = names
    report.stats["bytes"] = sum(report.stats[name]["bytes"] for name in names)


def _add(report: Report, error, resource: str | None) -> None:
    code = SHARED_CODES.get(error.type, "frictionless-error")
    message = error.message if code != "frictionless-error" else f"[{error.type}] {error.message}"
    report.add(code, message, resource=resource, row=getattr(error, "row_number", None),
               field=getattr(error, "field_name", None))


#: Constraints whose value is read as a value of the field's type (Table Schema).
BOUNDS = ("minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum")


def _constraints_applicable(frictionless, package: Package, report: Report) -> bool:
    """Whether every constraint of every field can be applied, else reported.

    frictionless reads a bound with the field's own reader and compiles a pattern
    as it validates; a bound its type cannot read (``"maximum": ""`` on a number)
    or a pattern that is no regular expression ends its validation in an
    exception, so such a schema is reported here and no row is read."""
    try:
        resources = frictionless.Package(str(package.descriptor_path)).resources
    except frictionless.FrictionlessException:
        return True  # a malformed descriptor: frictionless.validate reports it
    applicable = True
    for resource in resources:
        try:
            schema = getattr(resource, "schema", None)  # a non-tabular resource has none
            fields = schema.fields if schema is not None else []
        except frictionless.FrictionlessException:
            continue  # an unreadable schema: frictionless.validate reports it
        for field in fields:
            for problem in _inapplicable(field):
                report.add("bad-constraint", problem, resource=resource.name, field=field.name)
                applicable = False
    return applicable


def _inapplicable(field) -> list[str]:
    """What is wrong with the constraints of one frictionless field, in words."""
    constraints = field.constraints if isinstance(field.constraints, dict) else {}
    read = field.create_value_reader()
    problems = [f"constraint {name} {constraints[name]!r} is not a {field.type} value it can be "
                "compared with"
                for name in BOUNDS if constraints.get(name) is not None
                and _unreadable(read, constraints[name])]
    pattern = constraints.get("pattern")
    if isinstance(pattern, str):
        try:
            re.compile(f"^{pattern}$")
        except (re.error, RecursionError, OverflowError) as exc:
            problems.append(f"constraint pattern {pattern!r} is not a regular expression ({exc})")
    return problems


def _unreadable(read, value) -> bool:
    """Whether a bound cannot be compared with: unreadable as its type, or NaN, which
    frictionless compares as a Decimal and so raises on."""
    try:
        bound = read(value)
        return bound is None or bound != bound
    except (TypeError, ValueError, ArithmeticError):
        return True


def _paths_confined(package: Package, report: Report) -> bool:
    confined = _names_are_text(package, report)
    names = Counter(resource.get("name") for resource in package.descriptor["resources"]
                    if isinstance(resource, dict) and isinstance(resource.get("name"), str))
    for name, count in names.items():
        if isinstance(name, str) and count > 1:  # the second would escape the first's checks
            report.add("duplicate-resource", f"{count} resources are named {name!r}",
                       resource=name)
            confined = False
    for resource in package.descriptor["resources"]:
        name = resource.get("name") if isinstance(resource, dict) else None
        if not isinstance(name, str) or names[name] > 1:
            continue  # frictionless reports a resource without a name; a shared name is refused
        for key in ("path", "schema", "dialect"):
            value = resource.get(key)
            parts = value if isinstance(value, list) else [value]  # a multipart path is a list
            for part in parts:
                if isinstance(part, str) and not _confined_file(package, part, key, name, report):
                    confined = False
    return confined


def _names_are_text(package: Package, report: Report) -> bool:
    """Whether every resource's name, where it has one, is text (a JSON list or object names
    nothing, and frictionless would crash on it), else each such name reported."""
    text = True
    for number, resource in enumerate(package.descriptor["resources"], start=1):
        name = resource.get("name", "") if isinstance(resource, dict) else ""
        if not isinstance(name, str):
            report.add("descriptor-error", f"resource {number}'s name is a JSON "
                       f"{type(name).__name__.replace('dict', 'object')} "
                       f"({json_text(name, indent=None)[:60]}), not a string: a resource is named by text")
            text = False
    return text


def _confined_file(package: Package, path: str, key: str, name: str, report: Report) -> bool:
    """Whether one path of a resource is a local regular file inside the package (else reported)."""
    if "://" in path:
        report.add("unsafe-path", f"{key} {path!r} is remote; deepgreen validates the files of a "
                   "package on this machine only", resource=name)
        return False
    try:  # frictionless would block on a FIFO and read a device without end
        paths.regular_file(package.confined(path))
    except UserError as exc:
        report.add(exc.code, exc.message, resource=name)
        return False
    return True
