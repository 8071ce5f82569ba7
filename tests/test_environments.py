"""One environment per Python framework on a GPU host: detecting the accelerator, the plan's
interpreter per stack (runner, preflight), the dry run's report (on recorded resolutions, and
live against PyPI), and set-up's install step (with a stand-in uv)."""

from __future__ import annotations

import os
import subprocess
import sys
import urllib.request
from pathlib import Path

import pytest

from collect_fakes import FakeNvmlState, fake_pynvml
from deepgreen_audit.cli import main
from deepgreen_audit.collect import environments as envs, preflight
from deepgreen_audit.collect.plan import load_plan
from deepgreen_audit.errors import UserError

ROOT = Path(__file__).resolve().parents[1]
FAKES = ROOT / "tests" / "fakes"
RECORDED = FAKES / "resolver"


# ------------------------------------------------------------------ the accelerator

def test_the_variable_wins_over_what_the_host_has():
    gpu = fake_pynvml(FakeNvmlState())
    assert envs.detect_accelerator({"DEEPGREEN_ACCELERATOR": "cpu"}, gpu) == \
        envs.Accelerator("cpu", "DEEPGREEN_ACCELERATOR=cpu")
    absent = fake_pynvml(FakeNvmlState(present=False))
    got = envs.detect_accelerator({"DEEPGREEN_ACCELERATOR": "cuda"}, absent, nvidia_smi="/nonexistent")
    assert got.kind == "cuda"
    with pytest.raises(envs.EnvsError, match="DEEPGREEN_ACCELERATOR='gpu' is not one of cuda, cpu"):
        envs.detect_accelerator({"DEEPGREEN_ACCELERATOR": "gpu"})


def test_nvml_or_nvidia_smi_means_cuda_and_neither_means_cpu():
    got = envs.detect_accelerator({}, fake_pynvml(FakeNvmlState(energy_mj=(1, 2), names=("H100", "H100"))))
    assert got.kind == "cuda" and "NVML reports 2 GPU(s): H100, H100 (driver 550.54.15)" in got.reason
    absent = fake_pynvml(FakeNvmlState(present=False))
    got = envs.detect_accelerator({}, absent, nvidia_smi=str(FAKES / "nvidia" / "nvidia-smi"))
    assert got.kind == "cuda" and got.reason.startswith("nvidia-smi -L: NVIDIA-SMI fake")
    got = envs.detect_accelerator({}, absent, nvidia_smi="/nonexistent/nvidia-smi")
    assert got.kind == "cpu"
    assert "NVML Shared Library Not Found" in got.reason and "nvidia-smi is not on PATH" in got.reason


def test_setup_detects_through_the_fake_nvml_on_disk():
    """What scripts/setup.sh runs: the module reads pynvml from PYTHONPATH (tests/fakes/nvidia)."""
    env = {k: v for k, v in os.environ.items() if k != "DEEPGREEN_ACCELERATOR"}
    env["PYTHONPATH"] = os.pathsep.join([str(FAKES / "nvidia"), str(ROOT)])
    proc = subprocess.run([sys.executable, "-m", "deepgreen_audit.collect.environments", "--detect"],
                          capture_output=True, text=True, env=env, cwd=ROOT)
    assert proc.returncode == 0 and proc.stdout == "cuda\n"
    assert "NVML reports 1 GPU(s): FAKE NVML device" in proc.stderr
    env["DEEPGREEN_ACCELERATOR"] = "tpu"
    proc = subprocess.run([sys.executable, "-m", "deepgreen_audit.collect.environments", "--detect"],
                          capture_output=True, text=True, env=env, cwd=ROOT)
    assert proc.returncode == 2 and proc.stderr == "setup: DEEPGREEN_ACCELERATOR='tpu' is not one of cuda, cpu\n"


def test_a_cpu_host_keeps_the_one_venv(monkeypatch, capsys):
    monkeypatch.setenv("DEEPGREEN_ACCELERATOR", "cpu")
    assert main(["envs", "--dry-run"]) == 0          # nothing to resolve: no uv, no network
    out = capsys.readouterr().out
    assert out.startswith("accelerator: cpu (DEEPGREEN_ACCELERATOR=cpu)\n")
    assert ".venv: -e .[dev,render,collect,pytorch,tensorflow,jax]" in out
    assert "no per-framework environments on a cpu host" in out and ".venv-jax" not in out
    before = _prebuilt()
    assert main(["envs", "--install"]) == 0
    assert _prebuilt() == before and "only .venv" in capsys.readouterr().err


def _prebuilt() -> set[str]:
    return {e.folder for e in envs.FRAMEWORK_ENVS if (ROOT / e.folder).exists()}


# ------------------------------------------------------------------ the GPU extras

def test_each_framework_env_asks_for_its_gpu_build():
    extras = {e.ecosystem: envs.extra_requirements(ROOT, e.extras) for e in envs.FRAMEWORK_ENVS}
    assert "torch" in extras["python-pytorch"]
    assert "tensorflow[and-cuda]" in extras["python-tensorflow"]
    assert any(r.startswith("jax[cuda") for r in extras["python-jax"])
    assert all("nvidia-ml-py>=12" in reqs for reqs in extras.values())   # the collect extra
    with pytest.raises(envs.EnvsError, match="pyproject.toml has no extra 'nope'"):
        envs.extra_requirements(ROOT, ("nope",))


# ------------------------------------------------------------------ the report, on recorded resolutions

def _recorded(name: str, folder: str) -> envs.Resolution:
    text = (RECORDED / f"pylock.{name}.toml").read_text()
    return envs.Resolution(folder, ("collect", name), envs.parse_pylock(text))


def _recorded_all():
    alone = [_recorded(e.folder.removeprefix(".venv-"), e.folder) for e in envs.FRAMEWORK_ENVS]
    return alone, _recorded("together", "together")


def test_the_report_names_each_envs_cuda_libraries_and_the_conflicts_together():
    alone, together = _recorded_all()
    text = envs.format_resolutions(alone, together, "uv 0.13.9", "CPython 3.11 on x86_64-manylinux_2_28")
    lines = text.splitlines()
    assert lines[0] == "resolved with uv 0.13.9 for CPython 3.11 on x86_64-manylinux_2_28, nothing installed:"
    assert lines[1].startswith("  .venv-pytorch: 19 packages, 2.7 GB to download (2.0 GB of them NVIDIA")
    header = next(line for line in lines if line.strip().startswith("library"))
    assert header.split() == ["library", ".venv-pytorch", ".venv-tensorflow", ".venv-jax", "together"]
    cudnn = next(line for line in lines if line.strip().startswith("cudnn")).split("  ")
    cells = [c.strip() for c in cudnn if c.strip()]
    assert cells == ["cudnn", "9.20.0.48 (cu13)", "9.28.0.42 (cu12)", "9.28.1.4 (cu13)",
                     "9.28.0.42 (cu12) + 9.20.0.48 (cu13)"]
    assert "together (the three frameworks in one environment): resolves (" in text
    assert "  two builds: cudnn: nvidia-cudnn-cu12 9.28.0.42 and nvidia-cudnn-cu13 9.20.0.48" in lines
    assert "  differs: nvidia-cudnn-cu13 9.20.0.48 together, 9.28.1.4 in .venv-jax alone" in lines
    assert "nvidia-ml-py" not in text                      # NVML's binding is no CUDA library


def test_an_env_without_a_cuda_runtime_is_called_out_and_an_unresolvable_together_too():
    alone, _ = _recorded_all()
    alone[1] = _recorded("plain-tensorflow", ".venv-tensorflow")
    failed = envs.Resolution("together", (), None, "No solution found when resolving dependencies: ...")
    text = envs.format_resolutions(alone, failed, "uv", "CPython 3.11")
    assert ".venv-tensorflow: 3 packages, 0.6 GB to download (0.0 GB of them NVIDIA libraries)  " \
           "NO CUDA RUNTIME: would train on the CPU" in text
    assert text.endswith("together (the three frameworks in one environment): does not resolve: "
                         "No solution found when resolving dependencies: ...\n")


def test_identical_resolutions_agree():
    alone, _ = _recorded_all()
    together = alone[0]
    found = envs.compare(alone[:1], together)
    assert found.two_builds == [] and found.differs == []


# ------------------------------------------------------------------ the dry run, live

def _pypi_reachable() -> bool:
    try:
        urllib.request.urlopen("https://pypi.org/simple/jax/", timeout=10).close()
        return True
    except OSError:
        return False


@pytest.mark.skipif(not _pypi_reachable(), reason="the live dry run resolves against PyPI, which is "
                                                   "not reachable from here (the report's formatting is "
                                                   "tested on recorded resolutions above)")
def test_setup_dry_run_on_a_cuda_host_resolves_every_env_and_the_three_together():
    """`bash scripts/setup.sh --dry-run` with the fake NVML and DEEPGREEN_ACCELERATOR=cuda: uv
    resolves from PyPI's metadata, nothing is downloaded or installed."""
    env = dict(os.environ, DEEPGREEN_ACCELERATOR="cuda", PYTHONPATH=str(FAKES / "nvidia"))
    before = _prebuilt()
    proc = subprocess.run(["bash", "scripts/setup.sh", "--dry-run"], capture_output=True, text=True,
                          env=env, cwd=ROOT, timeout=300)
    assert proc.returncode == 0, proc.stderr
    out = proc.stdout
    assert out.startswith("accelerator: cuda (DEEPGREEN_ACCELERATOR=cuda)\n")
    for e in envs.FRAMEWORK_ENVS:
        assert f"{e.folder} ({e.ecosystem}, " in out and f"  {e.folder}: " in out
    assert "NO CUDA RUNTIME" not in out                 # each env resolves its framework's GPU build
    assert "\n  cudnn " in out and "\n  cuda-runtime " in out
    assert "together (the three frameworks in one environment): " in out
    assert _prebuilt() == before                        # nothing installed


# ------------------------------------------------------------------ installing (a stand-in uv)

def test_install_creates_each_env_once_and_installs_its_extra(tmp_path):
    root = tmp_path / "checkout"
    (root / "collect").mkdir(parents=True)
    (root / "pyproject.toml").write_text("[project]\nname = 'x'\n")
    (root / "collect" / "experiment.toml").write_text("")
    calls = tmp_path / "uv-calls"
    uv = tmp_path / "uv"
    uv.write_text(f'#!/bin/sh\necho "$*" >> {calls}\n')
    uv.chmod(0o755)
    done = envs.install(root, str(uv), say=lambda line: None)
    assert done == [".venv-pytorch", ".venv-tensorflow", ".venv-jax"]
    lines = calls.read_text().splitlines()
    for e, line in zip(envs.FRAMEWORK_ENVS, lines):
        assert f"pip install --quiet --python {root / e.folder / 'bin' / 'python'} --constraint " in line
        assert line.endswith(f"-e .[collect,{e.extra}]")
        assert (root / e.folder / "constraints.txt").read_text() == envs.constraints_text()
        assert envs.own_interpreter(e.ecosystem, root) == root / e.folder / "bin" / "python"
    assert envs.install(root, str(uv), say=lambda line: None) == []       # up to date: nothing redone
    failing = tmp_path / "uv-fails"
    failing.write_text("#!/bin/sh\nexit 3\n")
    failing.chmod(0o755)
    os.utime(root / "pyproject.toml")
    (root / ".venv-pytorch" / envs.STAMP).unlink()
    with pytest.raises(envs.EnvsError, match="exited 3"):
        envs.install(root, str(failing), say=lambda line: None)


# ------------------------------------------------------------------ the plan's interpreter

def _plan(tmp_path, stack_lines: str, device: str | None = None) -> Path:
    path = tmp_path / "plan.toml"
    scope = 'ecosystems = ["python-jax"]\narchitectures = ["resnet18"]\ndatasets = ["digits"]\nrepetitions = 1\n'
    if device:
        scope += f'device = "{device}"\n'
    path.write_text(f'campaign = "envs"\ndata_dir = "{tmp_path / "data"}"\n'
                    f'[stacks.python-jax]\nkind = "python"\nprogram = "stacks/python_jax/train.py"\n'
                    f'{stack_lines}\n[scope]\n{scope}')
    return path


def test_the_runner_starts_in_the_interpreter_the_plan_names(tmp_path):
    plan = load_plan(_plan(tmp_path, 'python = ".venv-jax/bin/python"'))
    stack = plan.stacks["python-jax"]
    assert stack.python == ROOT / ".venv-jax" / "bin" / "python" and stack.python_from == "plan"
    cmd = plan.runner_command(plan.jobs[0], tmp_path / "work", False)
    assert cmd[:3] == [str(ROOT / ".venv-jax" / "bin" / "python"), "-m", "deepgreen_audit.collect.runner"]
    absolute = load_plan(_plan(tmp_path, f'python = "{sys.executable}"'))
    assert absolute.runner_command(absolute.jobs[0], tmp_path, False)[0] == sys.executable


def test_without_the_key_a_stack_runs_in_its_own_env_when_setup_built_it(tmp_path, monkeypatch):
    own = tmp_path / ".venv-jax" / "bin" / "python"
    monkeypatch.setattr(envs, "own_interpreter", lambda eco, root: own if eco == "python-jax" else None)
    plan = load_plan(_plan(tmp_path, ""))
    assert plan.stacks["python-jax"].python_from == "own environment"
    assert plan.runner_command(plan.jobs[0], tmp_path, False)[0] == str(own)
    monkeypatch.setattr(envs, "own_interpreter", lambda eco, root: None)
    plan = load_plan(_plan(tmp_path, ""))                # a cpu host: only .venv
    assert plan.stacks["python-jax"].python is None
    assert plan.runner_command(plan.jobs[0], tmp_path, False)[0] == sys.executable


def test_the_shipped_plan_runs_in_this_interpreter_on_a_host_with_only_venv():
    plan = load_plan()
    for eco, stack in plan.stacks.items():
        if stack.kind == "python" and envs.own_interpreter(eco, ROOT) is None:
            assert stack.interpreter == sys.executable


@pytest.mark.parametrize("lines, field, message", [
    ("python = 3", "stacks.python-jax.python", "must be the path of a Python interpreter"),
    ('python = ""', "stacks.python-jax.python", "must be the path of a Python interpreter"),
])
def test_a_bad_python_key_is_a_plan_error(tmp_path, lines, field, message):
    with pytest.raises(UserError, match=message) as caught:
        load_plan(_plan(tmp_path, lines))
    assert caught.value.field == field and caught.value.code == "plan-error"


def test_python_applies_to_python_stacks_only(tmp_path):
    path = tmp_path / "plan.toml"
    path.write_text('campaign = "envs"\n[stacks.rust-tch]\nkind = "external"\ncommand = ["x"]\n'
                    'python = "/usr/bin/python3"\n')
    with pytest.raises(UserError, match='applies to kind = "python" stacks only'):
        load_plan(path)


def _findings(report) -> dict:
    return {f"{f.id}:{f.resource}": (f.status, f.message) for f in report.findings}


def test_preflight_refuses_a_missing_interpreter_naming_the_stack_and_setup(tmp_path, capsys):
    path = _plan(tmp_path, 'python = "no-such-env/bin/python"')
    got = _findings(preflight.run_checks(load_plan(path), allow_missing_counters=True))
    status, message = got["stack.interpreter:python-jax"]
    assert status == "fail"
    assert message == (f"python-jax: its interpreter {ROOT}/no-such-env/bin/python (plan) is missing: "
                       "bash scripts/setup.sh builds it on a cuda host (DEEPGREEN_ACCELERATOR=cuda on any host)")
    assert got["stack.ready:python-jax/digits"] == ("fail", message)     # no traceback, the same fix
    assert main(["preflight", "--plan", str(path), "--allow-missing-counters"]) == 1
    assert "FAIL  stack.interpreter" in capsys.readouterr().out


def test_preflight_warns_when_a_cuda_campaign_runs_a_stack_in_the_shared_env(tmp_path, monkeypatch):
    monkeypatch.setattr(envs, "own_interpreter", lambda eco, root: None)
    got = _findings(preflight.run_checks(load_plan(_plan(tmp_path, "", device="cuda")),
                                         allow_missing_counters=True))
    status, message = got["stack.interpreter:python-jax"]
    assert status == "warn" and "not in an environment of its own" in message and ".venv-jax" in message
    got = _findings(preflight.run_checks(load_plan(_plan(tmp_path, f'python = "{sys.executable}"',
                                                         device="cuda")), allow_missing_counters=True))
    assert got["stack.interpreter:python-jax"] == ("pass", f"runs in {sys.executable} (plan)")
    assert got["version.pinned:jax"][0] == "pass"        # asked of the stack's interpreter


def test_collect_runs_each_job_in_the_stacks_interpreter(tmp_path, monkeypatch):
    """The runner module starts in the plan's interpreter (here a stand-in that notes its
    arguments and hands over to this Python), and the run completes there."""
    from collect_fakes import fake_stack
    from deepgreen_audit.collect.driver import collect

    calls = tmp_path / "calls"
    python = tmp_path / "env" / "bin" / "python"
    python.parent.mkdir(parents=True)
    python.write_text(f'#!/bin/sh\necho "$*" >> {calls}\nexec {sys.executable} "$@"\n')
    python.chmod(0o755)
    (tmp_path / "stack.py").write_text(fake_stack("False", "pass"))
    monkeypatch.setenv("FAKE_STACK_MARKER", str(tmp_path))
    path = tmp_path / "plan.toml"
    path.write_text(f'campaign = "envs"\nrun_timeout_s = 120\n[stacks.python-jax]\nkind = "python"\n'
                    f'program = "{tmp_path / "stack.py"}"\npython = "{python}"\n[scope]\n'
                    'ecosystems = ["python-jax"]\narchitectures = ["resnet18"]\ndatasets = ["digits"]\n'
                    'repetitions = 1\nepochs = 1\n')
    summary = collect(load_plan(path), tmp_path / "out", allow_missing_counters=True)
    assert summary.ok and summary.completed == ["python-jax.resnet18.digits.r1"], summary.failed
    assert calls.read_text().startswith("-m deepgreen_audit.collect.runner --plan ")
