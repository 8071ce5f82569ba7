r"""The contrast cell's paragraph: what a contrast package (S7, collect/contrast.toml: both
networks on Imagenette at 224x224, batch 32) shows beside the main campaign.

The contrast package is analysed exactly as the main one (`analyse`, against the design its
scope declares), so each quantity the paragraph sets against the main campaign's has one
definition: the median training-block utilisation of an ecosystem (GPU where the package
measured it, else CPU), and the training spread (most over least expensive ecosystem, of
energy where measured, else of time) over all its ecosystems and inside the LibTorch control
group.  Its values reach numbers.tex as the main analysis's macros renamed ``Contrast...``;
the main campaign's own are quoted from its macros.  A package that is not S7's cell (a smoke
stand-in on digits) is analysed the same way, and the paragraph says what it is instead.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass

import numpy as np

from deepgreen_audit.analysis.data import Design, load_tables
from deepgreen_audit.analysis.results import Results, analyse
from deepgreen_audit.analysis.values import Count, NotMeasured, Number, Range, Text
from deepgreen_audit.package.descriptor import Package
from deepgreen_audit.spec import CONTRAST_CELL_KEYS, contrast_cell, declares_contrast_cell, load_spec, scoped

#: The prefix of the contrast package's macros in numbers.tex.
PREFIX = "Contrast"
#: The main analysis's values the paragraph quotes of the contrast package (when it has them).
QUOTED = ("RunsTotal", "EcosystemsCount", "RankedQuantity", "SpreadTrain", "ControlSpreadTrain",
          "GpuUtilTrainPct", "GpuUtilTrainMinEcosystem", "GpuUtilTrainMaxEcosystem",
          "CpuUtilTrainPct", "CpuUtilTrainMinEcosystem", "CpuUtilTrainMaxEcosystem",
          "GpuUtilNotMeasuredReason")
#: The main analysis's conditionals the paragraph branches on, for either package.
FLAGS = ("GpuMeasured", "CpuUtilMeasured", "UtilTrainSampled", "ControlGroup")


@dataclass(frozen=True)
class Contrast:
    """A contrast package: its identity, whether it is S7's cell, and its own analysis."""

    title: str
    synthetic: bool
    #: its scope declares the contrast cell and every run recorded S7's dataset, resolution, batch
    is_cell: bool
    #: what its runs recorded (several values joined), by S3_data.contrast_cell's key
    recorded: dict[str, str]
    results: Results

    @property
    def utilisation(self) -> str | None:
        """Which utilisation its paragraph quotes: 'Gpu' where measured, else 'Cpu', else None."""
        flags = self.results.flags
        if not flags.get("UtilTrainSampled"):
            return None
        return "Gpu" if flags.get("GpuMeasured") else "Cpu" if flags.get("CpuUtilMeasured") else None


def analyse_contrast(location) -> Contrast:
    """The contrast package at `location`, analysed against the design its scope declares."""
    package = Package.open(location)
    scope = package.descriptor.get("scope")
    spec = scoped(load_spec(), scope, package.descriptor_path)
    tables = load_tables(package)
    measured = package.descriptor.get("measured")
    results = analyse(tables, Design.from_spec(spec), spec, measured if isinstance(measured, dict) else None)
    cell = contrast_cell(spec)
    runs = package.table("runs").select(list(CONTRAST_CELL_KEYS)).to_pandas()
    recorded = {key: _values(runs[key]) for key in CONTRAST_CELL_KEYS}
    conforms = all(bool((runs[key] == cell[key]).all()) for key in CONTRAST_CELL_KEYS)
    descriptor = package.descriptor
    return Contrast(title=str(descriptor.get("title", descriptor.get("name", ""))),
                    synthetic=package.synthetic, is_cell=declares_contrast_cell(scope, spec) and conforms,
                    recorded=recorded, results=results)


def _values(column) -> str:
    """A column's distinct values as the paragraph names them ('224', or '32 and 224')."""
    found = sorted({int(v) if isinstance(v, (float, np.floating)) and float(v).is_integer() else v
                    for v in column.dropna()}, key=str)
    return " and ".join(str(v) for v in found)


def add_numbers(results: Results, contrast: Contrast | None) -> None:
    """The contrast package's quoted values, as `PREFIX` macros of the main `results`, its
    recorded cell and S7's; nothing when no contrast package was given."""
    if contrast is None:
        return
    for name in QUOTED:
        value = contrast.results.values.get(name)
        if value is not None:
            results.adopt(PREFIX + name, _of_contrast(value))
            if isinstance(value, Range):
                results.adopt(f"{PREFIX}{name}Min", _of_contrast(value.low))
                results.adopt(f"{PREFIX}{name}Max", _of_contrast(value.high))
    results.text(f"{PREFIX}Title", contrast.title, "title of the contrast package")
    cell = contrast_cell()
    for key, word in (("dataset", "Dataset"), ("input_resolution_px", "ResolutionPx"),
                      ("batch_size", "BatchSize")):
        results.text(f"{PREFIX}{word}", contrast.recorded[key],
                     f"the contrast package's {key}, as its runs recorded it",
                     kind="label" if key == "dataset" else "plain")
        results.text(f"{PREFIX}Cell{word}", str(cell[key]),
                     f"S7's {key} (S3_data.contrast_cell)", kind="label" if key == "dataset" else "plain")


def _of_contrast(value):
    """`value` described as the contrast package's."""
    if isinstance(value, Range):
        return Range(_of_contrast(value.low), _of_contrast(value.high), "contrast cell: " + value.description)
    if isinstance(value, (Number, Text, Count, NotMeasured)):
        return dataclasses.replace(value, description="contrast cell: " + value.description)
    raise TypeError(f"a value of {type(value).__name__} cannot be quoted from the contrast package")


def paragraph_context(contrast: Contrast | None, main: Results) -> dict:
    """What paper/templates/contrast.tex.j2 branches on: the contrast package's flags, the
    utilisation it quotes, and whether the main campaign holds the same quantity to set beside
    it (the same utilisation sampled in training, the same ranked quantity, a control group)."""
    if contrast is None:
        return {"contrast": None}
    mine, theirs = contrast.results.flags, main.flags
    word = contrast.utilisation
    main_word = ("Gpu" if theirs.get("GpuMeasured") else "Cpu") if theirs.get("UtilTrainSampled") else None
    return {"contrast": {
        "synthetic": contrast.synthetic, "is_cell": contrast.is_cell,
        "utilisation": word, "device": {"Gpu": "GPU", "Cpu": "CPU"}.get(word or ""),
        "extremes": word is not None and _extremes_differ(contrast.results, word),
        "main_utilisation": word is not None and main_word == word,
        "control": bool(mine.get("ControlGroup")),
        "main_control": bool(mine.get("ControlGroup") and theirs.get("ControlGroup")),
        "same_quantity": contrast.results.column == main.column,
        "flags": {name: bool(mine.get(name)) for name in FLAGS}}}


def _extremes_differ(results: Results, word: str) -> bool:
    """Whether the lowest and the highest median utilisation belong to different ecosystems
    (with one ecosystem, or a tie, the paragraph names none)."""
    low, high = (results.values.get(f"{word}UtilTrain{end}Ecosystem") for end in ("Min", "Max"))
    return low is not None and high is not None and low.value != high.value
