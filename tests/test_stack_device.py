"""The device report a stack gives (DeviceReport) and the probe that asks a stack for it,
against stacks that answer, fail or lie; the real stacks are asked in test_collect_driver.py,
test_native_stacks.py and test_stacks_train.py."""

from __future__ import annotations

import stat

import pytest

from deepgreen_audit.collect.device_probe import ProbeFailed, main, probe
from deepgreen_audit.collect.plan import load_plan
from deepgreen_audit.stacks.runtime import DeviceReport, DeviceReportError


def test_the_line_round_trips_and_names_are_percent_encoded():
    report = DeviceReport("cuda", "NVIDIA H200 (compute capability 9.0)", True, False)
    line = report.line()
    assert line == ("device=cuda device_name=NVIDIA%20H200%20%28compute%20capability%209.0%29 "
                    "cudnn_enabled=true tf32_enabled=false")
    assert DeviceReport.parse_line(line) == report


@pytest.mark.parametrize("line,error", [
    ("device=gpu device_name=x cudnn_enabled=true tf32_enabled=false", "device 'gpu' is not one of"),
    ("device=cpu cudnn_enabled=false tf32_enabled=false", "lacks device_name"),
    ("device=cpu device_name= cudnn_enabled=false tf32_enabled=false", "names no device"),
    ("device=cpu device_name=cpu cudnn_enabled=yes tf32_enabled=false", "cudnn_enabled='yes' is not true"),
])
def test_a_bad_line_is_refused_naming_what_is_wrong(line, error):
    with pytest.raises(DeviceReportError, match=error):
        DeviceReport.parse_line(line)


def _plan(tmp_path, stack_table: str):
    path = tmp_path / "plan.toml"
    path.write_text(f'campaign = "dev"\n{stack_table}\n[scope]\necosystems = ["cpp-libtorch"]\n'
                    'architectures = ["resnet18"]\ndatasets = ["digits"]\nrepetitions = 1\n')
    return load_plan(path)


def _executable(tmp_path, body: str):
    exe = tmp_path / "stack.sh"
    exe.write_text("#!/bin/sh\n" + body + "\n")
    exe.chmod(exe.stat().st_mode | stat.S_IEXEC)
    return _plan(tmp_path, f'[stacks.cpp-libtorch]\nkind = "external"\ncommand = ["{exe}", "train"]')


def test_a_built_stack_is_asked_through_its_device_subcommand(tmp_path):
    plan = _executable(tmp_path, '[ "$1" = device ] || exit 9\necho "loading..."\n'
                                 'echo "device=cuda device_name=cuda cudnn_enabled=true tf32_enabled=false"')
    assert probe(plan, "cpp-libtorch") == DeviceReport("cuda", "cuda", True, False)


@pytest.mark.parametrize("body,error", [
    ("echo 'no such subcommand' >&2; exit 2", "exited with status 2: no such subcommand"),
    ("echo hello", "printed 0 device= lines"),
    ("echo 'device=gpu device_name=x cudnn_enabled=true tf32_enabled=false'", "device 'gpu' is not one of"),
])
def test_a_built_stack_that_cannot_say_fails_in_one_line(tmp_path, body, error):
    with pytest.raises(ProbeFailed, match=error):
        probe(_executable(tmp_path, body), "cpp-libtorch")


@pytest.mark.parametrize("program,error", [
    ("def check(job): pass\ndef run(h, j): pass\n", "defines no device"),
    ("def check(job): pass\ndef run(h, j): pass\ndef device(): raise RuntimeError('no CUDA plugin')\n",
     "RuntimeError: no CUDA plugin"),
    ("def check(job): pass\ndef run(h, j): pass\ndef device(): return {'device': 'cuda'}\n",
     "returned dict, not a DeviceReport"),
])
def test_a_python_stack_that_cannot_say_fails_in_one_line(tmp_path, capsys, program, error):
    (tmp_path / "stack.py").write_text(program)
    plan = _plan(tmp_path, f'[stacks.cpp-libtorch]\nkind = "python"\nprogram = "{tmp_path / "stack.py"}"')
    with pytest.raises(ProbeFailed, match=error):
        probe(plan, "cpp-libtorch")
    assert main(["--plan", str(plan.path), "--ecosystem", "cpp-libtorch"]) == 2
    err = capsys.readouterr().err
    assert error in err and "Traceback" not in err and len(err.strip().splitlines()) == 1
