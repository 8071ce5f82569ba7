"""The experiment specification (`collect/experiment.toml`), loaded once.

It is the single source of the study's recipe and measurement contract:
the synthetic generator, the campaign plan, the stacks and the audit read
their values from here rather than writing them down again.
"""

from __future__ import annotations

import os
import tomllib
from collections.abc import Mapping
from dataclasses import dataclass, fields
from functools import cache
from pathlib import Path
from types import MappingProxyType
from typing import ClassVar

from deepgreen_audit.errors import UserError, unknown_name
from deepgreen_audit.package import paths
from deepgreen_audit.pins import SPEC_FILE
from deepgreen_audit.resources import require_checkout


def spec_path() -> Path:
    return SPEC_FILE


def read_toml(path: Path, *, missing: str, code: str = "user-error") -> dict:
    """A TOML file the user gave (specification, plan, model); any fault in it is a UserError."""
    if not os.path.lexists(path):
        raise UserError(missing, path=path, code="missing-input")
    try:
        return tomllib.loads(paths.read_text(path))
    except tomllib.TOMLDecodeError as exc:
        raise UserError(f"is not valid TOML: {exc}", path=path, code=code) from None


@cache
def load_spec(path: str | None = None) -> dict:
    """The specification as a dict of sections S1_model ... S6_replication."""
    target = Path(path) if path else spec_path()
    return read_toml(target, missing="the experiment specification is missing")


def recipe(spec: dict | None = None) -> dict:
    """The per-run recipe values, keyed by their column names in the runs table."""
    spec = spec or load_spec()
    s2, s3, s4 = spec["S2_optimisation"], spec["S3_data"], spec["S4_backend"]
    return {
        "optimizer": s2["optimizer"], "learning_rate": s2["learning_rate"],
        "batch_size": s2["batch_size"], "epochs": s2["epochs"],
        "lr_schedule": s2["lr_schedule"], "weight_decay": s2["weight_decay"],
        "input_resolution_px": s3["input_resolution_px"], "input_scaling": s3["input_scaling"],
        "input_normalisation": s3["input_normalisation"], "loader_workers": s3["loader_workers"],
        "eval_batch_size": s3["eval_batch_size"], "precision_policy": s4["precision_policy"],
    }


@dataclass(frozen=True)
class AuditTolerances:
    """The specification's [audit] section, typed and read once: every tolerance a check holds
    data to (collect/experiment.toml says why each has its value).  A key the section lacks, or
    one it holds that no check reads, is the specification's fault, named with its key."""

    counter_relative_tolerance: float
    codecarbon_agreement_tolerance: float
    codecarbon_overhang_max_s: float
    codecarbon_nested_shortfall_max_s: float
    constant_power_relative_spread: float
    load_model_mode_share: float
    gpu_power_min_w: float
    cpu_power_range_w: tuple[float, float]
    rapl_max_package_power_w: float
    ram_power_range_w: tuple[float, float]
    carbon_intensity_relative_tolerance: float
    emissions_rate_relative_tolerance: float
    power_duration_relative_tolerance: float
    power_duration_window_slack_s: float
    codecarbon_window_gap_max_s: float
    repeated_power_min_w: float
    codecarbon_v2_window_excess_max_s: float
    load_model_bound_relative_tolerance: float
    max_ecosystem_offset_days: float
    phase_work_log_tolerance: float
    gpu_power_limit_factor: float
    nvml_sample_period_max_s: float
    kwh_suspect_power_w: float
    kwh_conversion_relative_tolerance: float
    codecarbon_domain_sum_relative_tolerance: float
    recipe_relative_tolerance: float
    sampler_step_tolerance_fraction: float
    outlier_duration_ratio: float
    warmup_duration_ratio: float
    warmup_majority_share: float
    max_block_gap_s: float
    max_run_gap_s: float
    architecture_profile_log_tolerance: float
    architecture_collapse_log_tolerance: float
    batchnorm_min_horizons: float
    train_eval_gap_max_chance_fraction: float
    slurm_energy_min_ratio: float
    #: each GPU model's board power limit, watts, by the model name NVML reports
    gpu_board_power_limit_w: Mapping[str, float]

    #: keys of [audit] that are words for the reader, not tolerances
    PROSE: ClassVar[tuple[str, ...]] = ("title", "notes")

    @classmethod
    def of(cls, spec: dict) -> AuditTolerances:
        """The tolerances of `spec` (its [audit] section)."""
        section = spec.get("audit")
        if not isinstance(section, dict):
            raise UserError("the specification has no [audit] table of tolerances", field="audit")
        names = [f.name for f in fields(cls)]
        unknown = sorted(set(section) - set(names) - set(cls.PROSE))
        if unknown:
            raise UserError(unknown_name(unknown[0], names, "a tolerance of [audit]"),
                            field=f"audit.{unknown[0]}")
        values = {}
        for name in names:
            if name not in section:
                raise UserError("the specification's [audit] table lacks this tolerance",
                                field=f"audit.{name}")
            values[name] = _tolerance(name, section[name])
        return cls(**values)


def _tolerance(name: str, value):
    """One [audit] value in its field's type: a number, a [low, high] range, or a table of
    numbers by name."""
    try:
        if name.endswith("_range_w"):
            low, high = (float(v) for v in value)
            return (low, high)
        if isinstance(value, dict):
            return MappingProxyType({str(k): float(v) for k, v in value.items()})
        if isinstance(value, bool):
            raise TypeError(value)
        return float(value)
    except (TypeError, ValueError):
        raise UserError(f"{value!r} is not a number (or, for a range, [low, high])",
                        field=f"audit.{name}") from None


#: Keys of a plan's [scope] table: how a campaign may narrow the full design (a pilot, a smoke
#: run, a re-collection on the hardware a user has, the contrast cell); `reason` says why, in
#: one sentence the paper quotes; the batch limits are for smoke runs only; `schedule` says how
#: the runs are ordered (SCHEDULES); `initialisers` makes the campaign an initialiser trial
#: (deepgreen_audit.trial): each run once per initialiser.
SCOPE_KEYS = ("ecosystems", "architectures", "datasets", "repetitions", "epochs",
              "batch_size", "input_resolution_px", "device", "reason", "max_train_batches",
              "max_eval_batches", "schedule", "initialisers")
#: How a campaign orders its runs: interleaved (the design, S6_replication.interleaved), or a
#: between-window calibration (collect/calibration.toml): one reference configuration repeated
#: at points in time across and outside another campaign's window, so its runs follow one
#: another and wait between points by design (analysis/calibration.py bounds the drift).
SCHEDULES = ("interleaved", "calibration")
#: Where each narrowing scope key replaces a value of the specification.
SCOPED_VALUES = {"ecosystems": ("S6_replication", "ecosystems"),
                  "architectures": ("S1_model", "architectures"),
                  "datasets": ("S3_data", "datasets"),
                  "repetitions": ("S6_replication", "repetitions"),
                  "epochs": ("S2_optimisation", "epochs"),
                  "batch_size": ("S2_optimisation", "batch_size"),
                  "input_resolution_px": ("S3_data", "input_resolution_px"),
                  "device": ("S4_backend", "device")}


#: The scope keys that name labels, with the noun a message names one by.
SCOPE_LABELS = {"ecosystems": "an ecosystem", "architectures": "an architecture",
                "datasets": "a dataset"}


def scope_labels(spec: dict, key: str) -> list[str]:
    """The labels a declared scope may name under `key` (a key of `SCOPE_LABELS`): the
    specification's, and for datasets also the contrast cell's and the smoke dataset (sized
    in S3_data, never part of the design).  A scope narrows the design; it never widens it."""
    section, name = SCOPED_VALUES[key]
    extra = ([spec["S3_data"]["contrast_cell"]["dataset"], spec["S3_data"]["smoke_dataset"]]
             if key == "datasets" else [])
    return list(dict.fromkeys([*spec[section][name], *extra]))


def out_of_scope_reasons(spec: dict) -> dict[str, str]:
    """{label: why the study leaves it out} for a message that refuses it
    (S6_replication.out_of_scope, e.g. MATLAB)."""
    return {label: f"{label} is outside the study: {reason} (S6_replication.out_of_scope)"
            for label, reason in spec["S6_replication"].get("out_of_scope", {}).items()}


def scoped(spec: dict, scope: dict | None, where: Path | str = "scope") -> dict:
    """The specification as a campaign that declares `scope` set out to run it: a pilot of
    2 repetitions x 3 epochs is held to 2 x 3, not to the full design's 5 x 30.  The scope
    itself is kept under the key "scope" so every report can say what was narrowed."""
    if not scope:
        return spec
    if not isinstance(scope, dict) or set(scope) - set(SCOPE_KEYS):
        raise UserError(f"the declared scope must be a table of {', '.join(SCOPE_KEYS)}; got "
                        f"{scope!r}", path=where, field="scope", code="scope-error")
    narrowed = {key: dict(value) if isinstance(value, dict) else value for key, value in spec.items()}
    outside = {}
    for key, (section, name) in SCOPED_VALUES.items():
        if key not in scope:
            continue
        value = scope[key]
        if isinstance(spec[section][name], list):
            # a scope narrows the design, never widens it: a label the specification does not
            # hold (scope_labels) is left out, so the runs that carry it fail the label checks
            allowed = scope_labels(spec, key)
            if not isinstance(value, list):
                raise UserError(f"the declared scope's {key} must be a list; got {value!r}",
                                path=where, field=f"scope.{key}", code="scope-error")
            outside.update({key: [v for v in value if v not in allowed]} if
                           any(v not in allowed for v in value) else {})
            value = [v for v in value if v in allowed]
        narrowed[section] = {**narrowed[section], name: value}
    _check_initialisers(spec, scope, where)
    narrowed["scope"] = dict(scope)
    if outside:
        narrowed["scope_outside_spec"] = outside
    return narrowed


def _check_initialisers(spec: dict, scope: dict, where: Path | str) -> None:
    """An initialiser trial's initialisers: a non-empty list of S1_model.initialisers."""
    from deepgreen_audit.trial import known_initialisers

    if "initialisers" not in scope:
        return
    value, known = scope["initialisers"], known_initialisers(spec)
    if not isinstance(value, list) or not value or len(set(map(str, value))) != len(value) \
            or any(v not in known for v in value):
        raise UserError(f"the declared scope's initialisers must be a list of distinct "
                        f"initialisers of S1_model.initialisers ({', '.join(known)}); got "
                        f"{value!r}", path=where, field="scope.initialisers", code="scope-error")


#: Which specification section each recipe column of the runs table belongs to.
RECIPE_SECTIONS = {
    "S2_optimisation": ("optimizer", "learning_rate", "batch_size", "epochs", "lr_schedule",
                        "weight_decay"),
    "S3_data": ("input_resolution_px", "input_scaling", "input_normalisation", "loader_workers",
                "eval_batch_size"),
    "S4_backend": ("precision_policy",),
}


#: The values of S3_data.contrast_cell (the study's S7) a contrast package's runs must record,
#: each in the runs column of its name.
CONTRAST_CELL_KEYS = ("dataset", "input_resolution_px", "batch_size")


def contrast_cell(spec: dict | None = None) -> dict:
    """The study's declared contrast cell (S7): its dataset, input resolution and batch size."""
    spec = spec or load_spec()
    return dict(spec["S3_data"]["contrast_cell"])


def declares_contrast_cell(scope: dict | None, spec: dict | None = None) -> bool:
    """Whether a campaign's declared scope is the contrast cell's: it names the contrast
    cell's dataset, which belongs to no other part of the design (collect/contrast.toml)."""
    datasets = (scope or {}).get("datasets")
    return isinstance(datasets, list) and contrast_cell(spec)["dataset"] in datasets


def section_ids(spec: dict | None = None) -> list[str]:
    """The section keys S1_model ... S6_replication, in order."""
    spec = spec or load_spec()
    return [key for key in spec if key[:1] == "S" and key[1:2].isdigit()]


def short_section(key: str) -> str:
    """'S5_measurement' -> 'S5'."""
    return key.split("_", 1)[0]


#: The devices a campaign may declare (S4_backend.device, or its [scope]).
DEVICES = ("cuda", "cpu")


def declared_device(spec: dict | None = None) -> str:
    """The device the (scoped) specification says every run places its work on."""
    spec = spec or load_spec()
    return str(spec["S4_backend"]["device"])


@dataclass(frozen=True)
class Counter:
    """An energy counter of S5_measurement.counters: the name collection reports it under, what
    it measures, the blocks column its energy is written to and the environment column saying
    whether the run could read it."""

    name: str
    covers: str
    column: str
    available: str

    @property
    def label(self) -> str:
        """'CPU packages (RAPL)'."""
        return f"{self.covers} ({self.name})"


#: The energy counters, by their names in S5_measurement.counters.
COUNTERS = {"nvml-total-energy": Counter("NVML", "GPU boards", "gpu_energy_j", "nvml_energy_available"),
            "rapl-package": Counter("RAPL", "CPU packages", "cpu_energy_j", "rapl_available")}


def boundary_counters(device: str, spec: dict | None = None) -> tuple[Counter, ...]:
    """The counters whose energies make up energy_j on `device` (S5_measurement.boundary): the
    GPU boards and the CPU packages on cuda, the CPU packages on cpu.  A specification without
    a boundary table (an older one given with --spec) has every counter on every device."""
    s5 = (spec or load_spec())["S5_measurement"]
    return tuple(COUNTERS[name] for name in s5.get("boundary", {}).get(device, s5["counters"]))


def dl4j_backend(device: str, spec: dict | None = None) -> str:
    """The ND4J backend (Maven artifact) the Java/DL4J stack runs on `device`
    (S4_backend.dl4j_backend): what `deepgreen build` builds and the audit expects a run to load."""
    spec = spec or load_spec()
    return str(spec["S4_backend"]["dl4j_backend"][device])


def tf32_allowed(spec: dict | None = None) -> bool:
    """Whether the (scoped) specification's precision policy leaves TF32 on: a policy named
    '...-tf32-off' turns TF32 matmuls and convolutions off, so its GPU runs record tf32_enabled
    false."""
    spec = spec or load_spec()
    return not str(spec["S4_backend"]["precision_policy"]).endswith("tf32-off")


def master_seed(spec: dict | None = None) -> int:
    """The study's one master seed (S6_replication.master_seed): the plan's seeds and order,
    the synthetic generator's default seed and the analysis's bootstrap derive from it."""
    spec = spec or load_spec()
    return int(spec["S6_replication"]["master_seed"])


def trainable_parameters(architecture: str, classes: int, spec: dict | None = None) -> int:
    """The specified trainable-parameter count of an architecture for `classes` classes."""
    spec = spec or load_spec()
    return int(spec["S1_model"]["trainable_parameters"][architecture][str(classes)])


# ---------------------------------------------------------------- Markdown

MARKDOWN_PATH = ("docs", "spec.md")


def markdown_path() -> Path:
    """docs/spec.md of the checkout (an installed copy has no docs/ to keep current)."""
    return require_checkout("writing or checking docs/spec.md").joinpath(*MARKDOWN_PATH)


def _cell(value) -> str:
    if isinstance(value, bool):
        return "yes" if value else "no"
    if isinstance(value, list):
        return ", ".join(_cell(v) for v in value)
    if isinstance(value, float):
        return repr(value)
    return str(value).replace("|", "\\|")


def _section_markdown(key: str, section: dict) -> list[str]:
    notes = section.get("notes", {})
    title = section.get("title", key)
    head = f"{short_section(key)} {title}" if key[:1] == "S" else title
    lines = [f"## {head}", "", f"`[{key}]`", "", "| key | value | note |", "|---|---|---|"]
    tables = []
    for name, value in section.items():
        if name in ("title", "notes"):
            continue
        if isinstance(value, dict):
            tables.append((name, value))
            continue
        lines.append(f"| `{name}` | {_cell(value)} | {_cell(notes.get(name, ''))} |")
    for name, table in tables:
        lines += ["", f"### `{name}`", ""]
        if notes.get(name):
            lines += [_cell(notes[name]), ""]
        nested = all(isinstance(v, dict) for v in table.values())
        if nested:
            columns = sorted({k for v in table.values() for k in v}, key=lambda k: (len(k), k))
            lines += ["| | " + " | ".join(columns) + " |", "|---" * (len(columns) + 1) + "|"]
            for row, values in table.items():
                lines.append(f"| `{row}` | " + " | ".join(
                    f"{values[c]:,}" if isinstance(values.get(c), int) else _cell(values.get(c, ""))
                    for c in columns) + " |")
        else:
            lines += ["| key | value |", "|---|---|"]
            for k, v in table.items():
                lines.append(f"| `{k}` | {v:,} |" if isinstance(v, int) and not isinstance(v, bool)
                             else f"| `{k}` | {_cell(v)} |")
    return lines + [""]


def to_markdown(spec: dict | None = None) -> str:
    """The human-readable specification, generated from the TOML (docs/spec.md)."""
    spec = spec or load_spec()
    lines = ["# The experiment specification", "",
             "<!-- Generated from collect/experiment.toml by `deepgreen spec --markdown`; "
             "do not edit by hand. -->", "",
             "The one machine-readable source is `collect/experiment.toml`. The stacks, the "
             "campaign plan, the synthetic generator and the audit read their values from it; "
             "`deepgreen audit` enforces sections S1-S6 with the tolerances in `[audit]`, and "
             "S7, the contrast cell (`S3_data.contrast_cell`), on a package whose declared "
             "scope names its dataset (see docs/audit.md for what each check means).", ""]
    lines += ["| section | title |", "|---|---|"]
    for key in section_ids(spec):
        lines.append(f"| {short_section(key)} | {spec[key].get('title', key)} |")
    lines.append("")
    recipe_cols = recipe(spec)
    lines += ["The recipe each run records in the `runs` table (one column each):", "",
              "| column | section | value |", "|---|---|---|"]
    for section, cols in RECIPE_SECTIONS.items():
        for col in cols:
            lines.append(f"| `{col}` | {short_section(section)} | {_cell(recipe_cols[col])} |")
    lines.append("")
    for key, section in spec.items():
        if isinstance(section, dict):
            lines += _section_markdown(key, section)
    return "\n".join(lines).rstrip("\n") + "\n"


def write_markdown(path: Path | None = None, spec: dict | None = None) -> Path:
    """Write docs/spec.md (atomically); returns its path."""
    from deepgreen_audit.package import atomic

    target = Path(path) if path else markdown_path()
    atomic.write_text(target, to_markdown(spec))
    return target


def markdown_is_current(path: Path | None = None) -> bool:
    target = Path(path) if path else markdown_path()
    return target.is_file() and target.read_text(encoding="utf-8") == to_markdown()
