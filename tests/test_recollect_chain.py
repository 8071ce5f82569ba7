"""A user's own re-collection becomes a paper, on a CPU host, as docs/recollect.md tells it.

The chain a new user runs, each step the `deepgreen` command in its own process, each
expected to exit 0: plan -> data prepare -> collect -> flatten -> validate -> audit -> render
-> paper, over a plan of three ecosystems (Python/PyTorch and the non-Python C++/LibTorch and
Rust/tch stacks), ResNet-18 on digits, two repetitions of two whole epochs, on the CPU.

* Without counters (this host has no NVML and no RAPL: `--allow-missing-counters`), the PDF's
  first page says that energy was not measured and why, and the text ranks the stacks by time.
* With a fake counter (a fake powercap tree that advances like a RAPL counter: the lowest
  layer, tests/fakes/rapl.py; a CPU campaign's boundary is its CPU packages), the same chain
  yields energy numbers in the text.
* `synth --plan` of the same plan, then the same chain from `flatten` on, also ends in a PDF.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from deepgreen_audit.collect.plan import write_scoped_plan

ROOT = Path(__file__).resolve().parents[1]
SCOPE = {"ecosystems": ["python-pytorch", "cpp-libtorch", "rust-tch"],
         "architectures": ["resnet18"], "datasets": ["digits"], "repetitions": 2, "epochs": 2,
         "device": "cpu", "reason": "a re-collection on a CPU host, as a new user makes one"}

pytestmark = pytest.mark.skipif(not (shutil.which("latexmk") and shutil.which("pdftotext")),
                                reason="TeX Live (latexmk) and poppler-utils build the PDF")


def deepgreen(*args: str, env: dict | None = None, exit_status: int = 0) -> str:
    """One step of the chain, as a user types it; it must exit `exit_status` (0)."""
    done = subprocess.run([sys.executable, "-m", "deepgreen_audit", *args], env=env,
                          capture_output=True, text=True, timeout=900)
    assert done.returncode == exit_status, (args, done.stdout[-3000:], done.stderr[-3000:])
    return done.stdout


def first_page(pdf: Path) -> str:
    text = subprocess.run(["pdftotext", "-f", "1", "-l", "1", "-layout", str(pdf), "-"],
                          capture_output=True, text=True, check=True).stdout
    return " ".join(text.split())


def chain_from_flatten(runs: Path | None, package: Path, work: Path,
                       audit_exit: int = 0) -> dict[str, str]:
    """flatten (when given a run tree) -> validate -> audit -> render -> paper --out."""
    said = {}
    if runs is not None:
        said["flatten"] = deepgreen("flatten", str(runs), "--out", str(package))
    said["validate"] = deepgreen("validate", str(package))
    said["audit"] = deepgreen("audit", str(package), "--json", exit_status=audit_exit)
    said["render"] = deepgreen("render", str(package), "--out", str(work / "generated"))
    said["paper"] = deepgreen("paper", str(package), "--out", str(work / "paper"))
    return said


def collect(tmp: Path, name: str, env: dict | None = None) -> tuple[Path, Path]:
    plan = write_scoped_plan(tmp / f"{name}.toml", name, tmp / "data", SCOPE)
    deepgreen("plan", "--plan", str(plan), env=env)
    deepgreen("data", "prepare", "--plan", str(plan), env=env)
    deepgreen("collect", "--plan", str(plan), "--out", str(tmp / name),
              "--allow-missing-counters", env=env)
    return plan, tmp / name / "runs"


@pytest.fixture(scope="module")
def without_counters(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("recollect")
    plan, runs = collect(tmp, "cpuhost")
    said = chain_from_flatten(runs, tmp / "pkg", tmp)
    return tmp, plan, said


def test_without_counters_the_first_page_says_energy_was_not_measured(without_counters):
    tmp, _, said = without_counters
    page = first_page(tmp / "paper" / "paper.pdf")
    assert "energy not measured" in page
    assert "What this package measured" in page
    assert re.search(r"Not measured: energy at the measurement boundary, because", page)
    assert re.search(r"Not measured: GPU utilisation, because the campaign ran on the CPU", page)
    assert "Measured: block durations" in page and "Measured: CPU utilisation" in page
    numbers = (tmp / "generated" / "numbers.tex").read_text()
    assert r"\EnergyMeasuredfalse" in numbers and r"\GpuMeasuredfalse" in numbers
    assert r"\newcommand{\EnergyTotal}{\emph{not measured}}" in numbers
    # the stacks are ranked by time, and the text says so; nothing reads as a broken template
    text = subprocess.run(["pdftotext", str(tmp / "paper" / "paper.pdf"), "-"],
                          capture_output=True, text=True, check=True).stdout
    flat = " ".join(text.split())
    assert "times as long as the fastest" in flat
    # a whole number each side ("1.3 to 3.2" is no collapsed range, though "3 to 3" is inside it)
    collapsed = re.search(r"(?<![\d.])(\d+(?:\.\d+)?) to \1(?!\d|\.\d)", flat)
    assert not collapsed, f"a range that collapses prints once: {flat[collapsed.start() - 200:collapsed.end() + 50]}"
    assert not re.search(r"\b1 (runs|convolutional networks|datasets|ecosystems)\b", flat)
    assert "0.000 1" not in flat and "nan" not in flat.lower().split()


def test_with_fake_counters_the_text_quotes_energy(tmp_path):
    from tests.fakes.rapl import advancing_powercap

    # a cpu campaign's boundary is the CPU packages: a fake RAPL counter is all it reads
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(
        p for p in (str(ROOT), os.environ.get("PYTHONPATH")) if p))
    with advancing_powercap(tmp_path / "powercap") as root:
        env["DEEPGREEN_POWERCAP_ROOT"] = str(root)
        _, runs = collect(tmp_path, "fakecounters", env=env)
    # CodeCarbon reads the real /sys/class/powercap, not the fake tree: on this host it models
    # the CPU while the run recorded RAPL readable, which the audit fails, rightly (exit 1)
    said = chain_from_flatten(runs, tmp_path / "pkg", tmp_path, audit_exit=1)
    report = json.loads(said["audit"][said["audit"].index("{"):])
    assert report["synthetic"] is True          # a fake counter's energy is not the host's
    failed = {f["id"] for f in report["findings"] if f["status"] == "fail"}
    assert failed and failed <= {"S5.modelled-cpu-power", "S5.codecarbon-agreement"}
    numbers = (tmp_path / "generated" / "numbers.tex").read_text()
    assert r"\EnergyMeasuredtrue" in numbers
    assert re.search(r"\\newcommand\{\\EnergyTotal\}\{\\qty\{[\d.]+\}\{\\(kilo\\)?joule\}\}", numbers)
    page = first_page(tmp_path / "paper" / "paper.pdf")
    assert "Measured: energy at the measurement boundary" in page
    assert "energy not measured" not in page


def test_synth_of_the_same_plan_ends_in_a_pdf(without_counters):
    tmp, plan, _ = without_counters
    work = tmp / "synthetic"
    work.mkdir()
    deepgreen("synth", "--plan", str(plan), "--out", str(work / "pkg"))
    chain_from_flatten(None, work / "pkg", work)
    page = first_page(work / "paper" / "paper.pdf")
    assert "SYNTHETIC DATA" in page
