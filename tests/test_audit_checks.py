"""Each audit check: a planted defect fails it with the right row count; the clean package passes.

Defects come from the synthetic generator (its truth file gives the rows it touched) or are
planted by editing the typed tables of a small clean package and re-writing it.
"""

from __future__ import annotations

import copy
import json
import re
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from deepgreen_audit.audit import audit
from deepgreen_audit.audit.checks import audit_checks
from deepgreen_audit.package.descriptor import Package
from deepgreen_audit.package.schema import TABLES, load_schema
from deepgreen_audit.package.tables import TextTable, rows_from_columns
from deepgreen_audit.package.writer import write_package
from deepgreen_audit.safe import json_text
from deepgreen_audit.spec import load_spec
from deepgreen_audit.synth import write_synthetic

SMALL = dict(ecosystems=["python-pytorch", "java-dl4j"], architectures=["resnet18", "vgg16"],
             datasets=["fashion-mnist", "cifar100", "tiny-imagenet"], repetitions=2, epochs=3)


def small_spec(**changes) -> dict:
    """The specification with the small campaign's repetitions and epochs."""
    spec = copy.deepcopy(load_spec())
    spec["S6_replication"]["repetitions"] = SMALL["repetitions"]
    spec["S2_optimisation"]["epochs"] = SMALL["epochs"]
    for dotted, value in changes.items():
        section, key = dotted.split(".")
        spec[section][key] = value
    return spec


@pytest.fixture(scope="module")
def clean(tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("clean") / "pkg"
    write_synthetic(out, **SMALL)
    return out


def run(pkg: Path, check_id: str, spec: dict | None = None, **kw):
    report = audit(pkg, spec=spec or small_spec(), select=[check_id], **kw)
    return report.finding(check_id)


def edited(src: Path, out: Path, edit, **meta) -> Path:
    """A copy of package `src` whose typed tables went through `edit(frames)`, its descriptor
    given the keys of `meta`."""
    package = Package.open(src)
    frames = {name: package.table(name).to_pandas() for name in TABLES}
    edit(frames)
    tables = {}
    for name in TABLES:
        schema = load_schema(name)
        frame = frames[name]
        cols = {}
        for f in schema.fields:
            values = frame[f.name].astype(object).where(frame[f.name].notna(), None).tolist()
            if f.type == "integer":
                values = [None if v is None else int(v) for v in values]
            cols[f.name] = values
        tables[name] = TextTable(schema.field_names, rows_from_columns(schema, cols))
    write_package(tables, out, {**package.meta, **meta})
    return out


def test_clean_small_package_passes_every_check(clean, tmp_path):
    (tmp_path / "stacks").mkdir()
    (tmp_path / "stacks" / "train.py").write_text("lr = spec['learning_rate']\n")
    (tmp_path / "paper").mkdir()
    (tmp_path / "paper" / "paper.tex").write_text("\\section{Results}\nSee \\ref{fig:1}.\n")
    report = audit(clean, spec=small_spec(), sources_root=tmp_path)
    bad = [(f.id, f.status, f.message) for f in report.findings
           if f.status != "pass" and not f.id.startswith(CONTRAST_SECTION)]
    assert bad == []
    # the contrast cell's checks (S7) do not apply to a package that is not the contrast cell
    assert {f.basis for f in report.findings if f.id.startswith(CONTRAST_SECTION)} == {"not applicable"}
    assert report.finished and report.synthetic
    assert {f.id for f in report.findings} == {c.id for c in audit_checks()}


#: The contrast cell's checks: they apply to a contrast package only (tests/test_contrast.py).
CONTRAST_SECTION = "S7."


# ---------------------------------------------------------------- synth defects

SYNTH_DEFECTS = [
    # (defect, check, table whose rows the truth counts)
    ("mislabelled-architecture", "S1.architecture-identity", "blocks"),
    ("varying-environment", "S6.constancy", "runs"),
    ("another-window", "S6.contemporaneous", "runs"),
    ("late-reruns", "S6.calibration-window", "runs"),
    ("drifting-window", "S6.phase-work", "blocks"),
    ("broken-identity", "S5.carbon-intensity", "blocks"),
    ("short-blocks", "S5.short-blocks", "blocks"),
    ("missing-blocks", "S6.completeness-blocks", "blocks_removed"),
    ("modelled-cpu", "S5.modelled-cpu-power", "blocks"),
    ("kwh-as-joules", "S5.units", "blocks"),
    ("codecarbon-v2", "S5.codecarbon-version", "environment"),
    ("codecarbon-v2", "S5.tracking-mode", "environment"),
    ("recipe-drift", "S2.recipe", "runs"),
    ("duplicate-seed", "S6.distinct-seeds", "runs"),
    ("counter-mismatch", "S5.counter-recompute", "blocks"),
    ("cpu-fallback", "S4.device", "runs"),
]


@pytest.mark.parametrize("defect,check_id,rows_key", SYNTH_DEFECTS)
def test_synth_defect_fails_its_check_with_the_planted_rows(defect, check_id, rows_key, clean,
                                                            tmp_path):
    assert run(clean, check_id).status == "pass"
    pkg = tmp_path / "pkg"
    write_synthetic(pkg, defects=[defect], **SMALL)
    truth = json.loads((pkg / "synth-truth.json").read_text())["defects"][defect]
    finding = run(pkg, check_id)
    assert finding.status == "fail", finding.message
    assert finding.rows_affected == truth["rows"][rows_key]


@pytest.mark.parametrize("seed", [1, 2, 3, 4])
def test_mislabelled_architecture_names_the_configuration_and_the_label(seed, tmp_path):
    """Wherever the defect lands (any ecosystem, any dataset), the check names that
    configuration, the label that is wrong and the architecture that ran."""
    pkg = tmp_path / "pkg"
    write_synthetic(pkg, seed=seed, defects=["mislabelled-architecture"], **SMALL)
    truth = json.loads((pkg / "synth-truth.json").read_text())["defects"]["mislabelled-architecture"]
    eco, arch, ds = truth["configuration"].split(".")
    finding = run(pkg, "S1.architecture-identity")
    assert [(e["configuration"], e["ran"]) for e in finding.details["evidence"]] == \
        [(f"{eco}/{arch}/{ds}", truth["follows"])], finding.message


@pytest.mark.parametrize("seed", [1, 2, 3])
@pytest.mark.parametrize("defect,check_id,key", [
    ("varying-environment", "S6.constancy", "run_id"),
    ("another-window", "S6.contemporaneous", "ecosystem"),
    ("drifting-window", "S6.phase-work", "run_id"),
])
def test_new_defects_are_found_where_they_land(seed, defect, check_id, key, tmp_path):
    pkg = tmp_path / "pkg"
    write_synthetic(pkg, seed=seed, defects=[defect], **SMALL)
    truth = json.loads((pkg / "synth-truth.json").read_text())["defects"][defect]
    finding = run(pkg, check_id)
    assert finding.status == "fail"
    named = json_text(finding.details["evidence"])
    assert truth[key] in named, (truth[key], finding.message)


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_cpu_fallback_is_caught_naming_the_stack(seed, tmp_path):
    """Wherever the fallback lands, S4.device names the stack, its runs and the devices."""
    pkg = tmp_path / "pkg"
    write_synthetic(pkg, seed=seed, defects=["cpu-fallback"], **SMALL)
    truth = json.loads((pkg / "synth-truth.json").read_text())["defects"]["cpu-fallback"]
    finding = run(pkg, "S4.device")
    assert finding.status == "fail"
    assert finding.message == (f"{truth['ecosystem']}: {truth['rows']['runs']} run(s) on cpu, "
                               "the campaign declares cuda")
    assert {e["run_id"] for e in finding.details["evidence"]} == set(truth["run_ids"])


def test_a_cpu_campaign_is_held_to_cpu(clean):
    """The declared device comes from the (scoped) specification: a GPU package audited as a
    campaign that declares cpu fails every stack."""
    finding = run(clean, "S4.device", spec=small_spec(**{"S4_backend.device": "cpu"}))
    assert finding.status == "fail" and finding.rows_affected == 24
    assert "python-pytorch: 12 run(s) on cuda, the campaign declares cpu" in finding.message
    assert "java-dl4j: 12 run(s) on cuda" in finding.message


def test_every_failing_finding_of_the_new_checks_carries_its_evidence(tmp_path):
    pkg = tmp_path / "pkg"
    write_synthetic(pkg, defects=["varying-environment", "another-window", "drifting-window",
                                  "broken-identity", "mislabelled-architecture"], **SMALL)
    report = audit(pkg, spec=small_spec())
    for check_id in ("S6.constancy", "S6.contemporaneous", "S6.phase-work", "S5.carbon-intensity",
                     "S1.architecture-identity"):
        finding = report.finding(check_id)
        assert finding.status == "fail" and finding.details["evidence"], check_id
        assert json.loads(report.to_json())  # the evidence is plain JSON


# ---------------------------------------------------------------- planted by editing tables


def _first_run(frames) -> str:
    return frames["runs"]["run_id"].iloc[0]


def _set_run(frames, table, column, value, n_runs=1):
    ids = frames["runs"]["run_id"].iloc[:n_runs]
    mask = frames[table]["run_id"].isin(ids)
    frames[table].loc[mask, column] = value
    return int(mask.sum())


def _set_dl4j_backend(frames, backend, n_runs):
    """The first `n_runs` Java/DL4J runs record `backend` (a CPU build on the GPU host)."""
    runs = frames["runs"]
    ids = runs.loc[runs["ecosystem"] == "java-dl4j", "run_id"].iloc[:n_runs]
    env = frames["environment"]
    env.loc[env["run_id"].isin(ids), "framework_backend"] = backend
    return len(ids)


def _set_backend_and_device(frames, ecosystem, backend, device, n_runs):
    """The first `n_runs` runs of `ecosystem` record `backend` and, unless None, `device`."""
    runs = frames["runs"]
    ids = runs.loc[runs["ecosystem"] == ecosystem, "run_id"].iloc[:n_runs]
    env = frames["environment"]
    env.loc[env["run_id"].isin(ids), "framework_backend"] = backend
    if device is not None:
        runs.loc[runs["run_id"].isin(ids), "device"] = device
    return len(ids)


EDITS = {
    "S1.initial-weights": (lambda f: _set_run(f, "runs", "initial_weights_sha256", None, 3), 3),
    "S3.samples-processed": (lambda f: f["blocks"].loc[[0, 4], "samples_processed"].__setitem__(
        slice(None), 7) if False else f["blocks"].__setitem__(
        "samples_processed", f["blocks"]["samples_processed"].where(
            ~f["blocks"].index.isin([0, 4]), 7)), 2),
    "S4.precision-policy": (lambda f: _set_run(f, "runs", "precision_policy", "tf32-on", 2), 2),
    "S4.pinned-versions": (lambda f: _set_run(f, "environment", "framework_version", "2.4.0", 3), 3),
    "S4.dl4j-backend": (lambda f: _set_dl4j_backend(f, "nd4j-native", 3), 3),
    "S4.backend-device": (lambda f: _set_backend_and_device(f, "python-pytorch", "cpu", None, 2), 2),
    "S3.recipe": (lambda f: _set_run(f, "runs", "loader_workers", 8, 4), 4),
    "S5.both-readings": (lambda f: f["blocks"].__setitem__("codecarbon_energy_j", f["blocks"][
        "codecarbon_energy_j"].where(f["blocks"].index >= 5, None)), 5),
    "S5.codecarbon-config": (lambda f: _set_run(f, "environment", "codecarbon_config_sha256",
                                                "cd" * 32, 2), 2),
    "S5.sampler": (lambda f: f.__setitem__("samples", f["samples"][
        f["samples"]["run_id"] != _first_run(f)]), 1),
    "S6.independent-processes": (lambda f: _set_run(f, "runs", "process_id", 4242, 3), 3),
    "S4.device": (lambda f: _set_run(f, "runs", "device", None, 2), 2),
    "S5.gpu-count": (lambda f: _set_run(f, "environment", "codecarbon_gpu_count", 0, 3), 3),
}


def _energy_sum_defect(frames):
    b = frames["blocks"]
    b.loc[[1, 2, 3], "energy_j"] = b.loc[[1, 2, 3], "energy_j"] + 50.0


def _power_defect(frames):
    """Three blocks whose CodeCarbon RAM power reads 189 W (CodeCarbon 2.x's 3 W per 8 GB)."""
    b = frames["blocks"]
    rows = [0, 1, 2]
    b.loc[rows, "codecarbon_ram_power_w"] = 188.83806
    b.loc[rows, "codecarbon_ram_energy_kwh"] = 188.83806 * b.loc[rows, "codecarbon_duration_s"] / 3.6e6
    b.loc[rows, "codecarbon_energy_kwh"] = b.loc[rows, ["codecarbon_cpu_energy_kwh",
                                                        "codecarbon_gpu_energy_kwh",
                                                        "codecarbon_ram_energy_kwh"]].sum(axis=1)
    b.loc[rows, "codecarbon_energy_j"] = b.loc[rows, "codecarbon_energy_kwh"] * 3.6e6


def _duration_defect(frames):
    b = frames["blocks"]
    b.loc[[0, 1], "codecarbon_duration_s"] = b.loc[[0, 1], "duration_s"] - 0.5
    b.loc[[2], "codecarbon_duration_s"] = b.loc[[2], "duration_s"] + 30


def _agreement_defect(frames):
    b = frames["blocks"]
    rows = [3, 7]
    b.loc[rows, "codecarbon_gpu_energy_kwh"] = b.loc[rows, "codecarbon_gpu_energy_kwh"] * 1.5
    b.loc[rows, "codecarbon_energy_kwh"] = b.loc[rows, ["codecarbon_cpu_energy_kwh",
                                                        "codecarbon_gpu_energy_kwh",
                                                        "codecarbon_ram_energy_kwh"]].sum(axis=1)
    b.loc[rows, "codecarbon_energy_j"] = b.loc[rows, "codecarbon_energy_kwh"] * 3.6e6


def _missing_run(frames):
    """Drop the last run (repetition 2 of some configuration) from every table."""
    gone = frames["runs"]["run_id"].iloc[-1]
    for name in TABLES:
        frames[name] = frames[name][frames[name]["run_id"] != gone].reset_index(drop=True)


def _consecutive(frames):
    """Put both repetitions of one configuration next to each other in the schedule."""
    runs = frames["runs"].sort_values("schedule_position")
    first = runs.iloc[0]
    twin = runs[(runs["ecosystem"] == first["ecosystem"]) & (runs["architecture"] == first["architecture"])
                & (runs["dataset"] == first["dataset"]) & (runs["run_id"] != first["run_id"])].iloc[0]
    second = runs.iloc[1]
    r = frames["runs"]
    a, b = r.index[r["run_id"] == twin["run_id"]][0], r.index[r["run_id"] == second["run_id"]][0]
    r.loc[a, "schedule_position"], r.loc[b, "schedule_position"] = 2, int(twin["schedule_position"])
    for col in ("started_at_utc", "ended_at_utc"):
        r.loc[a, col], r.loc[b, col] = second[col], twin[col]


def _gap(frames):
    """The last run (in time) starts two hours late."""
    r = frames["runs"]
    last = r["started_at_utc"].idxmax()
    r.loc[last, ["started_at_utc", "ended_at_utc"]] += pd.Timedelta(hours=2)
    b = frames["blocks"]
    mask = b["run_id"] == r.loc[last, "run_id"]
    b.loc[mask, "started_at_utc"] += pd.Timedelta(hours=2)


def _no_warmup(frames):
    b = frames["blocks"]
    rid = _first_run(frames)
    later = b[(b["run_id"] == rid) & (b["phase"] == "train") & (b["epoch"] >= 2)]["duration_s"].median()
    b.loc[(b["run_id"] == rid) & (b["phase"] == "train") & (b["epoch"] == 1), "duration_s"] = later


def _labels(frames):
    r = frames["runs"]
    eco = r["ecosystem"]
    r["source_labels"] = np.where(eco == "python-pytorch", "language=PyTorch;model=resnet18", None)
    pick = r.index[eco == "python-pytorch"][:2]
    r.loc[pick, "source_labels"] = "language=pytorch;model=resnet18"


def _slurm_energy_defect(frames):
    """Two runs whose Slurm reading is below their block energy, one empty without a reason."""
    r = frames["runs"]
    r.loc[[0, 1], "slurm_consumed_energy_j"] = 1.0
    r.loc[2, "slurm_consumed_energy_j"] = None


def _other_hardware(frames, runs: int = 2):
    env = frames["environment"]
    env.loc[env.index[:runs], ["host", "gpu_model"]] = ["node-b", "NVIDIA H200"]


RANGE_UJ = 262143328850


def _set_rapl(b, row, start, end, wraps, duration_s):
    """Block `row` read `start` and `end` (two domains) with `wraps` recorded (None: not
    counted) over `duration_s`; its energies follow the readings with those wraps."""
    counted = [int(w) for w in wraps.split(";")] if wraps else [int(e < s) for s, e in zip(start, end)]
    cpu_j = sum((e - s + w * RANGE_UJ) / 1e6 for s, e, w in zip(start, end, counted))
    b.loc[row, ["rapl_start_uj", "rapl_end_uj", "rapl_wraps"]] = [
        ";".join(map(str, start)), ";".join(map(str, end)), wraps]
    b.loc[row, ["duration_s", "cpu_energy_j"]] = [duration_s, cpu_j]
    b.loc[row, "energy_j"] = b.loc[row, "gpu_energy_j"] + cpu_j


def _rapl_wraps_defect(frames):
    """A 40-minute block whose wraps were not counted (it could have wrapped twice), and a
    block whose counter went down with no wrap recorded."""
    b = frames["blocks"]
    _set_rapl(b, 0, (1_000, 5), (2_000, 5), None, 2_400.0)
    _set_rapl(b, 1, (2_000, 5), (1_000, 5), "1;0", 10.0)
    b.loc[1, "rapl_wraps"] = "0;0"


EDITS.update({
    "S5.rapl-wraps": (_rapl_wraps_defect, 2),
    "S5.slurm-energy": (_slurm_energy_defect, 3),
    "S6.host-design": (_other_hardware, 2),
    "S5.energy-domains": (_energy_sum_defect, 3),
    "S5.power-plausible": (_power_defect, 3),
    "S5.codecarbon-duration": (_duration_defect, 3),
    "S5.codecarbon-agreement": (_agreement_defect, 2),
    "S6.completeness-runs": (_missing_run, 1),
    "S6.interleaving": (_consecutive, 1),
    "S6.schedule-gaps": (_gap, 1),
    "S6.warmup": (_no_warmup, 1),
    "S6.labels": (_labels, 2),
})


@pytest.mark.parametrize("check_id", sorted(EDITS))
def test_planted_defect_fails_its_check_with_the_right_rows(check_id, clean, tmp_path):
    assert run(clean, check_id).status == "pass"
    edit, rows = EDITS[check_id]
    pkg = edited(clean, tmp_path / "pkg", edit)
    finding = run(pkg, check_id)
    assert finding.status == ("warn" if finding.severity == "warning" else "fail"), finding.message
    assert finding.rows_affected == rows, finding.message


def test_counted_rapl_wraps_are_recomputed_and_uncounted_ones_judged_by_duration(clean, tmp_path):
    """A 40-minute block wrapped twice: counted, its energy recomputes with both wraps; not
    counted, the fewest wraps its readings allow (none) miss 524 kJ and the block is flagged.
    Without recorded wraps, a block is judged by whether one more wrap fits its duration at
    rapl_max_package_power_w, read from the specification."""
    twice = edited(clean, tmp_path / "twice", lambda f: _set_rapl(
        f["blocks"], 0, (1_000, 5), (2_000, 5), "2;0", 2_400.0))
    assert run(twice, "S5.counter-recompute").status == "pass"
    counted = [int(re.search(r"(\d+) RAPL wrap\(s\) recorded", run(pkg, "S5.counter-recompute").message)[1])
               for pkg in (clean, twice)]
    assert counted[1] == counted[0] + 2
    assert run(twice, "S5.rapl-wraps").status == "pass"

    def uncounted(frames):
        _set_rapl(frames["blocks"], 0, (1_000, 5), (2_000, 5), "2;0", 2_400.0)
        frames["blocks"].loc[0, "rapl_wraps"] = None
    flagged = edited(clean, tmp_path / "uncounted", uncounted)
    assert run(flagged, "S5.counter-recompute").status == "fail"
    finding = run(flagged, "S5.rapl-wraps")
    assert (finding.status, finding.rows_affected) == ("fail", 1), finding.message
    assert finding.details["evidence"][0]["duration_s"] == 2_400.0
    assert run(flagged, "S5.rapl-wraps",
               spec=small_spec(**{"audit.rapl_max_package_power_w": 50.0})).status == "pass"

    # 500 s at 600 W is 300 kJ: room for one more wrap of 262 kJ after a small difference,
    # none in a domain whose counter went down (one wrap: nearly a whole range drawn already)
    small_diff = edited(clean, tmp_path / "small", lambda f: _set_rapl(
        f["blocks"], 0, (1_000, 5), (2_000, 5), None, 500.0))
    assert run(small_diff, "S5.rapl-wraps").status == "fail"
    large_diff = edited(clean, tmp_path / "large", lambda f: _set_rapl(
        f["blocks"], 0, (2_000, 5), (1_000, 4), None, 500.0))
    assert run(large_diff, "S5.rapl-wraps").status == "pass"


def test_each_runs_backend_agrees_with_its_device_and_the_declared_one(clean, tmp_path):
    """A CPU-only build whose runs say cuda fails (the records contradict each other),
    and so does a CUDA build whose runs say cpu in a cuda campaign (a fallback); in a cpu
    campaign a CUDA build on the CPU is what the campaign asks (PyPI's torch wheel is one) and
    passes, a CPU-only build too; an empty backend fails as not recorded."""
    cpu_spec = small_spec(**{"S4_backend.device": "cpu"})
    cpu_build = edited(clean, tmp_path / "cpu-build", lambda f: _set_backend_and_device(
        f, "python-pytorch", "cpu", "cuda", 3))
    finding = run(cpu_build, "S4.backend-device")
    assert finding.status == "fail" and finding.rows_affected == 3, finding.message
    assert "a CPU-only build, yet work on cuda (python-pytorch): 3" in finding.message
    assert {(e["framework_backend"], e["device"]) for e in finding.details["evidence"]} == {("cpu", "cuda")}
    assert finding.basis == "contradicted"
    assert run(cpu_build, "S4.backend-device", spec=cpu_spec).status == "fail"   # cuda device, cpu build
    gpu_build = edited(clean, tmp_path / "gpu-build", lambda f: _set_backend_and_device(
        f, "java-dl4j", "nd4j-cuda-11.6", "cpu", 2))
    finding = run(gpu_build, "S4.backend-device")
    assert finding.status == "fail" and finding.rows_affected == 2, finding.message
    assert "a GPU build that placed its work on the CPU in a cuda campaign (java-dl4j): 2" in finding.message
    on_cpu_host = edited(clean, tmp_path / "cpu-host", lambda f: [
        f["runs"].__setitem__("device", "cpu"),
        _set_backend_and_device(f, "python-pytorch", "cpu", None, 1000)])
    finding = run(on_cpu_host, "S4.backend-device", spec=cpu_spec)
    assert finding.status == "pass", finding.message
    unrecorded = edited(clean, tmp_path / "none", lambda f: _set_backend_and_device(
        f, "python-pytorch", None, None, 2))
    finding = run(unrecorded, "S4.backend-device")
    assert finding.status == "fail" and finding.basis == "not recorded", finding.message
    assert "no backend recorded (python-pytorch): 2" in finding.message


def test_dl4j_backend_follows_the_declared_device(clean, tmp_path):
    """A cuda campaign whose DL4J runs loaded nd4j-native fails, naming the backend and the
    runs; the same runs pass where the campaign declares cpu; no DL4J run: a skip."""
    cuda, cpu = (load_spec()["S4_backend"]["dl4j_backend"][d] for d in ("cuda", "cpu"))
    on_cpu = edited(clean, tmp_path / "cpu", lambda f: _set_dl4j_backend(f, cpu, 1000))
    finding = run(on_cpu, "S4.dl4j-backend")
    dl4j_runs = SMALL["repetitions"] * len(SMALL["architectures"]) * len(SMALL["datasets"])
    assert finding.status == "fail" and finding.rows_affected == dl4j_runs, finding.message
    assert f"did not load {cuda}, the backend for the declared device cuda ({cpu}: {dl4j_runs})" in finding.message
    assert {row["framework_backend"] for row in finding.details["evidence"]} == {cpu}
    assert run(on_cpu, "S4.dl4j-backend", spec=small_spec(**{"S4_backend.device": "cpu"})).status == "pass"
    unrecorded = edited(clean, tmp_path / "none", lambda f: _set_dl4j_backend(f, None, 2))
    assert "(not recorded: 2)" in run(unrecorded, "S4.dl4j-backend").message
    torch_only = edited(clean, tmp_path / "torch", lambda f: [
        f.__setitem__(name, f[name][f[name]["run_id"].str.startswith("python-pytorch")].reset_index(drop=True))
        for name in TABLES])
    assert run(torch_only, "S4.dl4j-backend").status == "skip"


def test_host_design_holds_a_package_to_the_replicates_it_declares(clean, tmp_path):
    def by_round(frames, off: int = 0):
        """Repetition 1 on node-a (L40S), repetition 2 on node-b (H200); `off` runs misplaced."""
        rounds = frames["runs"].set_index("run_id")["repetition"]
        env = frames["environment"]
        second = env["run_id"].map(rounds) == 2
        env.loc[second, ["host", "gpu_model"]] = ["node-b", "NVIDIA H200"]
        env.loc[~second, "host"] = "node-a"
        env.loc[env.index[~second][:off], "host"] = "node-b"

    mixed = edited(clean, tmp_path / "mixed", by_round)
    assert run(mixed, "S6.host-design").status == "fail"          # two kinds, no declared design
    for off, status in ((0, "pass"), (1, "fail")):
        pkg = edited(clean, tmp_path / f"declared{off}", lambda f, off=off: by_round(f, off),
                     hosts={"design": "replicates", "replicate_nodes": ["node-a", "node-b"]})
        finding = run(pkg, "S6.host-design")
        assert finding.status == status, finding.message
        assert finding.rows_affected == off, finding.message


def test_architectures_and_datasets_outside_the_spec_fail(clean):
    spec = small_spec(**{"S1_model.architectures": ["resnet18"],
                         "S3_data.datasets": ["cifar100", "fashion-mnist"]})
    runs = Package.open(clean).table("runs").to_pandas()
    arch = run(clean, "S1.architectures", spec)
    assert arch.status == "fail" and arch.rows_affected == int((runs.architecture == "vgg16").sum())
    ds = run(clean, "S3.datasets", spec)
    assert ds.status == "fail" and ds.rows_affected == int((runs.dataset == "tiny-imagenet").sum())


def test_round_trip_failure_is_reported(clean, monkeypatch):
    from deepgreen_audit.package import rundirs

    real = rundirs.run_dir_files
    calls = []

    def lossy(*args):
        files = real(*args)
        calls.append(1)
        if len(calls) == 1:  # the first run's metrics.csv loses the last character of a cell
            files["metrics.csv"] = files["metrics.csv"][:-2] + b"\n"
        return files

    monkeypatch.setattr(rundirs, "run_dir_files", lossy)
    finding = run(clean, "integrity.round-trip")
    assert finding.status == "fail" and "blocks" in finding.message
    assert not any(t in finding.message for t in ("runs", "samples", "environment"))


def test_source_check_finds_hard_coded_recipe_and_skips_without_sources(clean, tmp_path):
    assert run(clean, "source.recipe-not-hardcoded", sources_root=tmp_path).status == "skip"
    stack = tmp_path / "stacks" / "rust-tch"
    stack.mkdir(parents=True)
    (stack / "main.rs").write_text("let lr = 1e-4;\nlet batch_size = 128;\nlet epochs = n;\n")
    finding = run(clean, "source.recipe-not-hardcoded", sources_root=tmp_path)
    assert finding.status == "fail" and finding.rows_affected == 2


def test_outlier_blocks_warn_with_their_count(tmp_path):
    """Outliers need a run long enough for a robust median: one configuration, 8 epochs."""
    clean = tmp_path / "clean"
    write_synthetic(clean, ecosystems=["python-pytorch"], architectures=["resnet18"],
                    datasets=["cifar100"], repetitions=2, epochs=8)
    assert run(clean, "S6.outlier-blocks").status == "pass"

    def outliers(frames):
        b = frames["blocks"]
        rows = b.index[(b["epoch"].isin([4, 6])) & (b["phase"] == "eval")]
        b.loc[rows, "duration_s"] = b.loc[rows, "duration_s"] * 3

    finding = run(edited(clean, tmp_path / "pkg", outliers), "S6.outlier-blocks")
    assert finding.status == "warn" and finding.rows_affected == 4


def test_results_text_lint_counts_typed_numbers(clean, tmp_path):
    assert run(clean, "source.results-text-numbers", sources_root=tmp_path).status == "skip"
    (tmp_path / "paper").mkdir()
    (tmp_path / "paper" / "paper.tex").write_text(
        "\\section{Results}\nResNet-18 used \\EnergyTotal{} kJ, or 42 kJ.\nIt took 3.5 h.\n"
        "\\section{Discussion}\nIn 2026 we saw 7 cases.\n")
    finding = run(clean, "source.results-text-numbers", sources_root=tmp_path)
    assert finding.status == "fail" and finding.rows_affected == 2


@pytest.mark.parametrize("seed", [101, 202, 303, 404, 505])
def test_clean_campaigns_raise_no_false_alarm(seed, tmp_path):
    """A check that cries wolf is as bad as one that sleeps (benchmarks/bench_false_alarms.py
    runs 20 full-size seeds)."""
    pkg = tmp_path / "pkg"
    write_synthetic(pkg, seed=seed, **SMALL)
    alarms = [f"{f.id}: {f.message}" for f in audit(pkg, spec=small_spec()).findings
              if f.status in ("fail", "warn", "skip")
              and not (f.id.startswith(CONTRAST_SECTION) and f.basis == "not applicable")]
    assert not alarms


@pytest.fixture(scope="module")
def digits_cpu(tmp_path_factory) -> Path:
    """A synthetic smoke-scope campaign on the CPU: one architecture, digits."""
    out = tmp_path_factory.mktemp("digits") / "pkg"
    write_synthetic(out, ecosystems=["python-pytorch", "cpp-libtorch"], architectures=["resnet18"],
                    datasets=["digits"], repetitions=2, epochs=2, device="cpu")
    return out


def test_short_blocks_of_the_smoke_dataset_warn_and_say_why(digits_cpu, tmp_path):
    def shorten(frames):
        blocks = frames["blocks"]
        blocks.loc[blocks["phase"] == "eval", "duration_s"] = 0.1
    pkg = edited(digits_cpu, tmp_path / "short", shorten)
    finding = audit(pkg).finding("S5.short-blocks")
    assert finding.status == "warn" and "smoke dataset digits" in finding.message
    assert finding.rows_affected == 8 and finding.details["evidence_total"] == 8


def test_checks_that_do_not_apply_to_a_scope_leave_the_audit_finished(digits_cpu):
    """One architecture, a CPU host: the identity check of two architectures and the GPU count
    do not apply; they are named, and the audit still finished (and --strict passes)."""
    report = audit(digits_cpu)
    skipped = {f.id: f.basis for f in report.findings if f.status == "skip"}
    assert skipped["S1.architecture-identity"] == "not applicable"
    assert skipped["S5.gpu-count"] == "not applicable"
    assert set(skipped.values()) == {"not applicable"}
    assert report.finished and report.exit_status(strict=True) == 0
    assert report.to_dict()["not_applicable"] == list(skipped)
