"""What an existing output folder holds, and the check a package writer makes of its --out
before any work (`flatten`, `synth`).

A writer replaces only what it writes itself: `--overwrite` replaces a package (or an empty
folder), never a run tree, a collect output folder or a folder of other files, whose
contents would be lost.  Each refusal is one line naming the folder and what it holds.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

from deepgreen_audit.errors import OutputExists, UserError
from deepgreen_audit.package import atomic, paths
from deepgreen_audit.package.checksums import FILENAME as SUMS_NAME
from deepgreen_audit.package.descriptor import DESCRIPTOR_NAME

#: The file by which `deepgreen collect` marks its output folder as its campaign's
#: (deepgreen_audit/collect/outfolder.py writes and reads it).
COLLECT_MARK = "campaign.json"
#: The run tree's package-level metadata (package.rundirs.PACKAGE_META).
RUN_TREE_MARK = "package.json"
#: A key every descriptor deepgreen writes holds (descriptor.PACKAGE_PROFILE is its value).
DESCRIPTOR_KEY = "$schema"
#: Names listed when a folder holds unrelated files.
_SHOWN = 3


def _named(path: Path, key: str) -> str | None:
    """The `key` of the small JSON object in `path` (a name, a title), or None if unreadable."""
    try:
        value = json.loads(paths.read_bytes(path, limit_bytes=1 << 20))
    except (UserError, ValueError):
        return None
    found = value.get(key) if isinstance(value, dict) else None
    return found if isinstance(found, str) else None


def holdings(path: Path) -> str | None:
    """What the existing output `path` holds, in words; None for a new path or an empty folder."""
    path = Path(path)
    if not os.path.lexists(path):
        return None
    if path.is_symlink():
        return f"a symbolic link to {os.readlink(path)}"
    if not path.is_dir():
        return "a file"
    entries = sorted(p.name for p in path.iterdir())
    if not entries:
        return None
    if (path / DESCRIPTOR_NAME).is_file():
        title = _named(path / DESCRIPTOR_NAME, "title")
        return f"a package ({DESCRIPTOR_NAME}" + (f": {title!r})" if title else ")")
    if (path / SUMS_NAME).is_file():
        return f"the tables of a package ({SUMS_NAME})"
    for mark, key in ((COLLECT_MARK, "campaign"), (f"runs/{RUN_TREE_MARK}", "name")):
        if (path / mark).is_file():
            name = _named(path / mark, key)
            return "the collect output folder of " + (f"campaign {name!r}" if name else "a campaign") \
                + f" ({mark})"
    if (path / RUN_TREE_MARK).is_file():
        name = _named(path / RUN_TREE_MARK, "name")
        return "a run tree" + (f" of {name!r}" if name else "") + f" ({RUN_TREE_MARK})"
    shown = ", ".join(entries[:_SHOWN]) + (", ..." if len(entries) > _SHOWN else "")
    return f"{len(entries)} unrelated file(s) or folder(s) ({shown})"


def is_package_folder(path: Path) -> bool:
    """A folder a package writer wrote: its descriptor or its SHA256SUMS lies in it."""
    return any((Path(path) / name).is_file() for name in (DESCRIPTOR_NAME, SUMS_NAME))


def refuse_package_out(out: Path, *, overwrite: bool, inputs=(),
                       descriptor_path: Path | None = None) -> None:
    """Refuse, before any work, an --out (and a --descriptor outside it) that a package writer
    must not write: one over its inputs, one that exists without --overwrite, and, even with
    it, one that holds something other than a package."""
    out = Path(out)
    atomic.refuse_overlap(out, inputs)
    if os.path.lexists(out):
        held = holdings(out)
        if not out.is_dir():
            raise UserError(f"is {held}, not a folder; --out names the package folder to write: "
                            "choose another --out", path=out, code="output-exists")
        if held is not None and not is_package_folder(out):
            raise UserError(f"holds {held}, not a package: choose another --out (--overwrite "
                            "replaces a package only)", path=out, code="output-exists")
        if not overwrite:
            holds = f"and holds {held}" if held else "(an empty folder)"
            raise UserError(f"already exists {holds}; pass --overwrite to replace it", path=out,
                            code="output-exists")
    if descriptor_path is None or Path(descriptor_path).resolve().parent == out.resolve():
        return
    atomic.refuse_overlap(descriptor_path, inputs)
    if not os.path.lexists(descriptor_path):
        return
    if not overwrite:
        raise OutputExists(descriptor_path)
    if _named(Path(descriptor_path), DESCRIPTOR_KEY) is None:
        raise UserError("is not a package descriptor (no '$schema'), so --overwrite does not "
                        "replace it: choose another --descriptor", path=descriptor_path,
                        code="output-exists")

