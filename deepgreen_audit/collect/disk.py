"""The disk a campaign needs, estimated before it starts, and the refusal when it cannot fit.

Three kinds of files, each estimated from what decides its size (GB: 10^9 bytes):

* **Weights** (`deepgreen data prepare`, under `<data_dir>/weights/`): one export per run, since
  every run has its own seed; each is a safetensors file and a TorchScript module (which the
  LibTorch stacks load), both float32 (`weights.TENSOR_DTYPE`), so each file is 4 bytes a
  trainable parameter of `collect/experiment.toml` S1_model.trainable_parameters, plus
  `OVERHEAD_FRACTION`.  Measured (`weights.export`, seed 7): ResNet-18 with 10, 100 and 200
  classes, safetensors 0.11 % and TorchScript 0.30 % above 4 bytes a parameter (BatchNorm's
  running statistics, the header, TorchScript's code), the manifest 19 kB more; VGG-16 (no
  BatchNorm), 0.001 % and 0.008 %, its manifest 6.5 kB.  ResNet-18 on 10 classes: 89.7 MB an
  export in all; VGG-16: 1.07 GB.
* **Datasets** (`deepgreen data convert`, or `prepare` for digits, under `<data_dir>/<dataset>/`):
  uint8 pixels (side x side x 3) and an int64 label for each of S3_data.train_samples and
  eval_samples, at the side the store is written at (`data.side_px`), plus `OVERHEAD_FRACTION`
  (the digits store: 490 bytes of npz header a file, its manifest 833 bytes).
* **Run directories** (`collect`, under `OUT/runs/`): at most `RUN_FIXED_BYTES` +
  `BLOCK_BYTES` a block (two a epoch) + `SAMPLE_BYTES` a sample, for a run that lasts its whole
  run_timeout_s at S5_measurement.sampler_rate_hz: an upper bound.  The constants are about
  twice the largest measured: on a real collection (4 stacks, ResNet-18 on digits, 8 runs, a CPU
  host without counters) manifest.json took 2.5 kB and the files' headers 706 bytes, a block
  551-559 bytes over blocks.csv, codecarbon.csv and metrics.csv (with both counters' reasons in
  energy_missing_reason), a sample 17-18 bytes (no GPU columns); in the shipped package
  restored (every counter and GPU cell filled) a block 447-454 bytes, a sample 28-29 bytes.
  A failed run's log (OUT/failed/) is not counted.
"""

from __future__ import annotations

import os
import shutil
from dataclasses import dataclass
from pathlib import Path

from deepgreen_audit.collect.plan import Plan
from deepgreen_audit.errors import UserError
from deepgreen_audit.package.schema import phases
from deepgreen_audit.spec import load_spec

#: Spare on top of 4 bytes a parameter (weights) or a pixel channel (datasets): above every
#: overhead measured (module docstring), so that the estimate is not short of the files.
OVERHEAD_FRACTION = 0.01
#: A run directory's manifest.json and the headers of its five files, at most.
RUN_FIXED_BYTES = 4_000
#: One block's rows in blocks.csv, codecarbon.csv and metrics.csv, at most.
BLOCK_BYTES = 1_000
#: One 1 Hz sample's row in samples.csv, at most.
SAMPLE_BYTES = 64
#: Bytes of one pixel channel (uint8) and of one label (int64) in a store (`data._npz_bytes`).
PIXEL_CHANNEL_BYTES, LABEL_BYTES, CHANNELS = 1, 8, 3


@dataclass(frozen=True)
class DiskItem:
    """One kind of file a campaign writes: where, how much in all, how much is not there yet."""

    what: str
    #: the command that writes it
    writer: str
    folder: Path
    total_bytes: int
    to_write_bytes: int
    #: how the estimate was made, in words
    how: str


def size_text(size_bytes: float) -> str:
    """A size in decimal units (kB, MB, GB)."""
    for unit, scale in (("GB", 1e9), ("MB", 1e6), ("kB", 1e3)):
        if size_bytes >= scale:
            return f"{size_bytes / scale:.1f} {unit}"
    return f"{size_bytes:.0f} bytes"


def _spare(size_bytes: float) -> int:
    return int(size_bytes * (1 + OVERHEAD_FRACTION)) + 1


def weight_items(plan: Plan, torchscript: bool = True) -> list[DiskItem]:
    """The safetensors exports and (`torchscript`) their TorchScript modules `deepgreen data
    prepare` writes."""
    import numpy as np

    from deepgreen_audit.stacks.weights import TENSOR_DTYPE, Export, weights_dir

    counts = load_spec()["S1_model"]["trainable_parameters"]
    dtype = np.dtype(TENSOR_DTYPE)
    exports = sorted({(j.architecture, j.classes, j.seed, Path(j.data_dir), j.initialiser)
                      for j in plan.jobs})
    file_bytes = {key: _spare(dtype.itemsize * counts[key[0]][str(key[1])]) for key in exports}
    folder = weights_dir(plan.jobs[0].data_dir)
    spans = {arch: sorted(counts[arch][str(c)] for a, c, *_ in exports if a == arch)
             for arch in sorted({e[0] for e in exports})}
    parameters = ", ".join(f"{arch} {_millions(n[0])}" + (f"-{_millions(n[-1])}" if n[-1] != n[0] else "")
                           for arch, n in spans.items())
    hows = {"weights (safetensors)":
            (lambda e: e.path, f"{_count(len(exports), 'export')}, one per run's seed, {dtype.name}: "
                               f"{dtype.itemsize} bytes a trainable parameter "
                               f"(S1_model.trainable_parameters: {parameters} parameters) plus "
                               f"{OVERHEAD_FRACTION:.0%}"),
            "TorchScript modules":
            (lambda e: e.torchscript_path, "the same weights again, one module per export, for "
                                           "the LibTorch stacks (C++, Rust)")}
    if not torchscript:
        del hows["TorchScript modules"]
    items = []
    for what, (path_of, how) in hows.items():
        missing = [key for key in exports
                   if not path_of(Export.at(weights_dir(key[3]), *key[:3], key[4])).is_file()]
        items.append(DiskItem(what, "deepgreen data prepare", folder, sum(file_bytes.values()),
                              sum(file_bytes[key] for key in missing), how))
    return items


def _count(n: int, noun: str) -> str:
    return f"{n:,} {noun}{'' if n == 1 else 's'}"


def _millions(count: int) -> str:
    return f"{count / 1e6:.1f}M"


def dataset_item(plan: Plan, writer: str = "deepgreen data convert, or prepare for digits",
                 only: frozenset[str] | None = None) -> DiskItem:
    """The stores the plan's runs read (`only`: those of these datasets, e.g. the one
    `deepgreen data prepare` writes itself, digits)."""
    from deepgreen_audit.stacks.data import side_px

    s3 = load_spec()["S3_data"]
    data_dir = Path(plan.jobs[0].data_dir)
    datasets = sorted(ds for ds in {j.dataset for j in plan.jobs} if only is None or ds in only)
    sizes = {ds: _spare((s3["train_samples"][ds] + s3["eval_samples"][ds])
                        * (side_px(ds) ** 2 * CHANNELS * PIXEL_CHANNEL_BYTES + LABEL_BYTES))
             for ds in datasets}
    missing = [ds for ds in datasets if not (data_dir / ds / "manifest.json").is_file()]
    how = (", ".join(f"{ds} {size_text(sizes[ds])} at {side_px(ds)} px" for ds in datasets)
           + "; uint8 pixels and an int64 label for each of S3_data.train_samples and eval_samples"
           f", plus {OVERHEAD_FRACTION:.0%}")
    return DiskItem("datasets", writer, data_dir, sum(sizes.values()),
                    sum(sizes[ds] for ds in missing), how)


def run_dir_bytes(blocks: int, samples: int) -> int:
    """At most the bytes of one run directory of `blocks` blocks and `samples` samples."""
    return RUN_FIXED_BYTES + blocks * BLOCK_BYTES + samples * SAMPLE_BYTES


def run_dirs_item(plan: Plan, out: Path) -> DiskItem:
    """The run directories collect writes under OUT/runs/, each at most as long as its timeout."""
    from deepgreen_audit.collect.staging import is_completed

    rate_hz = float(load_spec()["S5_measurement"]["sampler_rate_hz"])
    samples = int(plan.run_timeout_s * rate_hz)
    per_run = {job.run_id: run_dir_bytes(job.epochs * len(phases()), samples) for job in plan.jobs}
    todo = [job.run_id for job in plan.jobs if not is_completed(out, job)]
    epochs = sorted({job.epochs for job in plan.jobs})
    how = (f"{_count(len(plan.jobs), 'run')}, each at most {size_text(RUN_FIXED_BYTES)} + "
           f"{'/'.join(str(e * len(phases())) for e in epochs)} blocks x {size_text(BLOCK_BYTES)} + "
           f"{samples:,} samples x {SAMPLE_BYTES} bytes (a run as long as run_timeout_s, "
           f"{rate_hz:g} Hz)")
    return DiskItem("run directories", "deepgreen collect", Path(out) / "runs",
                    sum(per_run.values()), sum(per_run[r] for r in todo), how)


def campaign_items(plan: Plan, out: Path) -> list[DiskItem]:
    """Everything the campaign writes: weights, datasets, run directories."""
    return [*weight_items(plan), dataset_item(plan), run_dirs_item(plan, out)]


def _existing(folder: Path) -> Path:
    """The folder, or its nearest ancestor that exists: where it would be created."""
    folder = Path(os.path.abspath(folder))
    return next(p for p in (folder, *folder.parents) if p.exists())


@dataclass(frozen=True)
class FileSystem:
    """The items one file system is to hold, and its free space now."""

    where: Path
    free_bytes: int
    items: tuple[DiskItem, ...]

    @property
    def to_write_bytes(self) -> int:
        return sum(item.to_write_bytes for item in self.items)

    @property
    def short_bytes(self) -> int:
        return max(0, self.to_write_bytes - self.free_bytes)


def file_systems(items: list[DiskItem]) -> list[FileSystem]:
    """The items grouped by the file system their folder is (or would be) on."""
    groups: dict[int, list[DiskItem]] = {}
    for item in items:
        groups.setdefault(os.stat(_existing(item.folder)).st_dev, []).append(item)
    found = []
    for members in groups.values():
        where = _existing(members[0].folder)
        found.append(FileSystem(where, shutil.disk_usage(where).free, tuple(members)))
    return found


def refuse_unless_room(items: list[DiskItem], plan: Plan) -> None:
    """Refuse, before anything is written, when a file system cannot hold what is still to be
    written on it: one line with the numbers."""
    for fs in file_systems(items):
        if fs.short_bytes:
            parts = ", ".join(f"{item.what} {size_text(item.to_write_bytes)} in {item.folder}"
                              for item in fs.items if item.to_write_bytes)
            raise UserError(f"the campaign still has {size_text(fs.to_write_bytes)} to write on "
                            f"this file system ({parts}), which has {size_text(fs.free_bytes)} "
                            f"free: free {size_text(fs.short_bytes)} or more, or write elsewhere "
                            f"(the plan's data_dir, --out); 'deepgreen plan --plan {plan.path}' "
                            "shows the estimate", path=fs.where, code="disk-full")


def format_disk(items: list[DiskItem]) -> list[str]:
    """The preview's lines: each item with how it was estimated, then each file system's room."""
    total = sum(item.total_bytes for item in items)
    todo = sum(item.to_write_bytes for item in items)
    lines = [f"  disk, estimated (GB = 10^9 bytes): {size_text(total)} in all, "
             + (f"{size_text(todo)} of it not written yet" if todo else "all of it written already")]
    for item in items:
        written = ("" if item.to_write_bytes == item.total_bytes else ", all written already"
                   if not item.to_write_bytes else
                   f", {size_text(item.to_write_bytes)} of it not written yet")
        lines.append(f"    {item.what}, {size_text(item.total_bytes)}{written} ({item.writer} -> "
                     f"{item.folder}): {item.how}")
    for fs in file_systems(items):
        verdict = (f"NOT ENOUGH for the {size_text(fs.to_write_bytes)} not written yet, "
                   f"{size_text(fs.short_bytes)} short" if fs.short_bytes else
                   f"enough for the {size_text(fs.to_write_bytes)} not written yet"
                   if fs.to_write_bytes else "nothing left to write there")
        lines.append(f"  free: {size_text(fs.free_bytes)} on the file system of {fs.where} "
                     f"({', '.join(item.what for item in fs.items)}): {verdict}")
    return lines
