"""Edits of a package on disk that tests make on purpose."""

from __future__ import annotations

import json
from pathlib import Path

from deepgreen_audit.package.checksums import format_sums, sha256_bytes


def rehash(pkg: Path) -> None:
    """Describe the tables as they now are, so that only the damage itself is left to find."""
    desc = json.loads((pkg / "datapackage.json").read_text())
    sums = {}
    for res in desc["resources"]:
        data = (pkg / res["path"]).read_bytes()
        res["bytes"], res["hash"] = len(data), "sha256:" + sha256_bytes(data)
        sums[res["path"]] = sha256_bytes(data)
    (pkg / "datapackage.json").write_text(json.dumps(desc))
    (pkg / "SHA256SUMS").write_text(format_sums(sums))
