"""The last gate of an importer: the staged package must pass the project's own validator.

An importer checks what it reads as it reads it; whatever a source holds that the schemas
still refuse (a date out of the plausible range, a name no pattern admits, a text too long)
is found here, on the staged package, before it is published.  The first finding is then
reported where the user can fix it: the source file, line (or record) and column that the
cell came from, as `locate` finds them, so an import never exits 0 having written a package
that `deepgreen validate` refuses, and never blames a row of a package that was not written.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from deepgreen_audit.errors import UserError
from deepgreen_audit.package.kinds import REPLICATION, Kind
from deepgreen_audit.report import Finding

#: (source file, line, source column, what else places it, e.g. "record 3: times.x: ") of a
#: finding, or None when no source cell produced it.
Locator = Callable[[Finding], "tuple[str, int | None, str | None, str] | None"]


def refuse_invalid(locate: Locator, kind: Kind = REPLICATION) -> Callable[[Path], None]:
    """A `write_package` check that raises a UserError at the first finding's source cell."""
    def check(staged_descriptor: Path) -> None:
        from deepgreen_audit.package.validate import validate

        report = validate(staged_descriptor, kind.tables)
        if report.valid:
            return
        first = report.findings[0]
        source = locate(first) if first.resource and first.row else None
        if source is None:
            raise UserError(f"the import does not make a valid package ({report.error_count} "
                            f"error(s); first: [{first.id}] {first.where()}: {first.message})",
                            code="invalid-package")
        path, row, column, where = source
        cell = f"{first.resource}.{first.field}" if first.field else f"in {first.resource}"
        raise UserError(f"{where}{first.message} (it would be {cell} of the package, which the "
                        "schema refuses; nothing was written)",
                        path=path, row=row, field=column, code="invalid-source")
    return check
