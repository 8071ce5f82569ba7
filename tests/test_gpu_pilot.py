"""The GPU pilot's rehearsal: scripts/gpu-pilot.sh, the same script and checks as on the GPU
machine, run here with a fake NVML module and nvidia-smi (tests/fakes/nvidia) first on
PYTHONPATH and PATH, and no RAPL (this host has none).  Then the audit against the pilot's
declared scope, and the paper's pilot section rendered from what it wrote."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from deepgreen_audit.collect.plan import load_plan, write_scoped_plan
from deepgreen_audit.package.descriptor import Package
from deepgreen_audit.package.validate import validate

ROOT = Path(__file__).resolve().parents[1]
SCRIPT = ROOT / "scripts" / "gpu-pilot.sh"
FAKES = ROOT / "tests" / "fakes" / "nvidia"
REASON = "rehearsal on a fake NVML device"
#: what the device tool brings back from its $OUT: at most 8 files, at most 2 folders down
DEVICE_OUT_MAX_FILES = 8


def _env(with_fakes: bool) -> dict:
    env = dict(os.environ, PYTHON=sys.executable)
    if with_fakes:
        env["PATH"] = f"{FAKES}{os.pathsep}{env['PATH']}"
        env["PYTHONPATH"] = os.pathsep.join(p for p in (str(FAKES), env.get("PYTHONPATH")) if p)
    return env


@pytest.fixture(scope="module")
def rehearsal(tmp_path_factory):
    """The script run once over a small rehearsal plan: both pilot stacks, ResNet-18, one
    repetition of two epochs, one batch a phase, on the CPU this host has (the GPU is a fake
    NVML device; the real pilot, collect/pilot.toml, declares the specification's cuda)."""
    base = tmp_path_factory.mktemp("pilot")
    plan = write_scoped_plan(base / "rehearsal.toml", "rehearsal", base / "data", {
        "ecosystems": ["python-pytorch", "python-jax"], "architectures": ["resnet18"],
        "datasets": ["digits"], "repetitions": 1, "epochs": 2,
        "max_train_batches": 1, "max_eval_batches": 1, "device": "cpu"})
    out = base / "out"
    done = subprocess.run(["bash", str(SCRIPT), str(out), "--plan", str(plan), "--work",
                           str(base / "work"), "--wheels", str(base / "no-wheels"),
                           "--rehearsal", REASON],
                          env=_env(with_fakes=True), capture_output=True, text=True, timeout=900)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    return out, done.stdout


def test_rehearsal_writes_a_valid_package_and_what_the_device_can_bring_back(rehearsal):
    out, stdout = rehearsal
    report = validate(out / "pilot")
    assert report.valid, report.findings[:3]
    files = [p for p in out.rglob("*") if p.is_file()]
    assert len(files) <= DEVICE_OUT_MAX_FILES
    assert all(len(p.relative_to(out).parts) <= 3 for p in files)
    assert {"pilot.log", "audit.json"} <= {p.name for p in files}
    for step in ("the GPU and its energy counter", "preflight", "collect", "audit against the declared scope"):
        assert step in stdout
    assert "nvmlDeviceGetTotalEnergyConsumption over 1 s" in stdout
    assert "RAPL: not readable here" in stdout


def test_rehearsal_says_it_is_synthetic_and_states_its_boundary(rehearsal):
    out, _ = rehearsal
    package = Package.open(out / "pilot")
    assert package.synthetic and REASON in package.notice()
    measured = package.descriptor["measured"]
    # the rehearsal declares cpu (this host's frameworks run there): its boundary is the CPU
    # packages, unmeasured without RAPL, and the fake GPU is read outside it
    assert measured["boundary"] == ("none: not measured: CPU packages (GPU boards outside the "
                                    "boundary of a cpu campaign)")
    assert set(measured["counters_missing"]) == {"RAPL"}
    assert measured["gpus"] == ["FAKE NVML device (rehearsal, not a GPU)"]
    assert package.descriptor["scope"]["epochs"] == 2


def test_missing_cpu_counter_is_recorded_never_invented(rehearsal):
    out, _ = rehearsal
    package = Package.open(out / "pilot")
    blocks = package.table("blocks").to_pandas()
    assert (blocks["gpu_energy_j"] > 0).all()
    assert blocks["cpu_energy_j"].isna().all() and blocks["energy_j"].isna().all()
    assert blocks["energy_missing_reason"].str.contains("RAPL").all()
    env = package.table("environment").to_pandas()
    assert env["gpu_model"].str.startswith("FAKE NVML").all()
    assert not env["rapl_available"].any()


def test_audit_holds_the_rehearsal_to_its_declared_scope(rehearsal):
    out, _ = rehearsal
    report = json.loads((out / "audit.json").read_text())
    status = {f["id"]: f for f in report["findings"]}
    assert report["stats"]["scope"]["repetitions"] == 1
    for check_id in ("S6.completeness-runs", "S6.completeness-blocks", "S2.recipe",
                     "S5.codecarbon-duration", "S4.device"):
        assert status[check_id]["status"] == "pass", status[check_id]
    agreement = status["S5.codecarbon-agreement"]
    assert agreement["status"] == "pass" and "on the GPU alone" in agreement["message"]
    # the collection declared RAPL missing (--allow-missing-counters): a warning with its reason
    assert status["S5.both-readings"]["status"] == "warn"
    assert "declared the CPU packages (RAPL) unreadable" in status["S5.both-readings"]["message"]


def test_the_pilot_section_renders_from_the_rehearsal_and_says_synthetic(rehearsal, tmp_path):
    from deepgreen_audit.render.build import make_environment, paper_dir, pilot_tex

    out, _ = rehearsal
    env = make_environment(paper_dir() / "templates")
    text = pilot_tex(env, out / "pilot")
    assert "its figures are not measurements" in text
    assert "FAKE NVML device" in text and r"\qty{" in text
    assert text.count(r"\\") >= 2 + 1   # the header row's two lines and one row per cell
    none = pilot_tex(env, None)
    assert "No measured pilot package accompanies this manuscript yet" in none
    assert r"\qty" not in none and r"\num" not in none


def test_the_script_refuses_a_host_without_nvidia_smi(tmp_path):
    env = _env(with_fakes=False)
    env["PATH"] = os.pathsep.join(p for p in env["PATH"].split(os.pathsep)
                                  if not (Path(p) / "nvidia-smi").exists())
    done = subprocess.run(["bash", str(SCRIPT), str(tmp_path / "out"), "--wheels",
                           str(tmp_path / "none")], env=env, capture_output=True, text=True,
                          timeout=300)
    assert done.returncode == 1
    assert "nvidia-smi is not on PATH" in done.stdout   # the script logs both streams to its log
    assert not (tmp_path / "out" / "pilot").exists()


def test_the_pilot_plan_declares_its_scope():
    plan = load_plan(ROOT / "collect" / "pilot.toml")
    assert plan.scope == {"ecosystems": ["python-pytorch", "python-jax"],
                          "architectures": ["resnet18", "vgg16"], "datasets": ["digits"],
                          "repetitions": 2, "epochs": 3}
    assert len(plan.jobs) == 8 and {j.epochs for j in plan.jobs} == {3}
    assert all(j.max_train_batches is None for j in plan.jobs)


def test_a_shipped_pilot_validates_and_audits_or_the_paper_says_there_is_none(capsys):
    from deepgreen_audit.cli import main
    from deepgreen_audit.render.build import default_pilot

    shipped = ROOT / "pilot" / "datapackage.json"
    if shipped.is_file():
        assert default_pilot() == shipped
        assert main(["validate", str(shipped)]) == 0
        assert main(["audit", str(shipped)]) == 0
        assert not Package.open(shipped).synthetic
    else:
        assert default_pilot() is None
