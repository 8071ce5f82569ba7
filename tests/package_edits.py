"""Edits of a package on disk that tests make on purpose."""

from __future__ import annotations

import json
from pathlib import Path

from deepgreen_audit.package.checksums import format_sums, sha256_bytes


def rehash(pkg: Path) -> None:
    """Describe the tables as they now are, so that only the damage itself is left to find.

    SHA256SUMS is where the descriptor says (the shipped layout keeps it beside its tables,
    in `replication/`), so a copy of the shipped package can be rehashed too."""
    desc = json.loads((pkg / "datapackage.json").read_text())
    sums_path = pkg / desc.get("checksums", "SHA256SUMS")
    sums = {}
    for res in desc["resources"]:
        data = (pkg / res["path"]).read_bytes()
        res["bytes"], res["hash"] = len(data), "sha256:" + sha256_bytes(data)
        sums[str((pkg / res["path"]).relative_to(sums_path.parent))] = sha256_bytes(data)
    (pkg / "datapackage.json").write_text(json.dumps(desc))
    sums_path.write_text(format_sums(sums))
