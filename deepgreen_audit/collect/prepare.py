"""Preparing a plan's inputs on disk before collection: stores and weight exports.

The Python stacks can derive the digits store and a missing weight export in
memory (the same bytes, the same hashes); the non-Python stacks cannot, so a
campaign is prepared once: for every job of the plan, the digits store (other
datasets must have been converted from their archives), and the canonical
export of (architecture, classes, seed) with its TorchScript module (in an
initialiser trial, the export of each run's initialiser).
"""

from __future__ import annotations

from pathlib import Path

from deepgreen_audit.errors import UserError
from deepgreen_audit.stacks import data, weights


def prepare_plan(plan, torchscript: bool = True, progress=None) -> list[Path]:
    """Write what the plan's jobs read under its data_dir; returns the files written or found.
    Refuses, before writing anything, when the data_dir's file system cannot hold what is not
    written yet (`collect.disk`)."""
    from deepgreen_audit.collect.disk import dataset_item, refuse_unless_room, weight_items

    refuse_unless_room([*weight_items(plan, torchscript),
                        dataset_item(plan, "deepgreen data prepare", only=frozenset({"digits"}))],
                       plan)
    written = []
    for dataset in sorted({j.dataset for j in plan.jobs}):
        folder = Path(plan.jobs[0].data_dir) / dataset
        if (folder / "manifest.json").is_file():
            data.load_store(folder.parent, dataset)          # verifies the fingerprint
        elif dataset == "digits":
            data.convert_digits(folder.parent)
        else:
            raise UserError(f"the {dataset} store is missing; convert it first with "
                            f"'deepgreen data convert {dataset} ARCHIVE... --out {folder.parent}'",
                            path=folder, code="missing-input")
        written.append(folder)
    exports = sorted({(j.architecture, j.classes, j.seed, Path(j.data_dir), j.initialiser)
                      for j in plan.jobs})
    for i, (arch, classes, seed, data_dir, initialiser) in enumerate(exports, 1):
        exp = weights.export(weights.weights_dir(data_dir), arch, classes, seed, torchscript=torchscript,
                             initialiser=initialiser)
        written.append(exp.path)
        if progress:
            progress(i, len(exports), exp.path.name)
    return written
