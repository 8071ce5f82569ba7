"""The built stacks keep the protocol's promise (docs/protocol.md): a phase starts only after
the harness answered its BEGIN, and a harness that dies mid-phase fails the run, with nothing
half-written and no stack left hanging.  Each stack runs for real, under the real runner and
driver, with tests/clients/protocol_proxy.py between it and its harness."""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path

import pytest

from deepgreen_audit.collect.driver import collect
from deepgreen_audit.collect.plan import load_plan, write_scoped_plan
from deepgreen_audit.collect.prepare import prepare_plan
from deepgreen_audit.stacks import native

PROXY = Path(__file__).parent / "clients" / "protocol_proxy.py"
BUILT = tuple(native.NATIVE_STACKS)
HOLD_S = 2.0


def proxied_plan(tmp_path: Path, ecosystem: str, mode: str):
    stack = native.NATIVE_STACKS[ecosystem]
    if not stack.product_path.is_file() or stack.stale_inputs():
        pytest.fail(f"{ecosystem} is not built or out of date: {stack.fix()}")
    path = write_scoped_plan(tmp_path / "plan.toml", "proto", tmp_path / "data", {
        "ecosystems": [ecosystem], "architectures": ["resnet18"], "datasets": ["digits"], "repetitions": 1,
        "epochs": 1, "max_train_batches": 1, "max_eval_batches": 1})
    report = tmp_path / "proxy.json"
    text = path.read_text().replace(
        f'command = ["{stack.source}/{stack.launcher}", "train"]',
        f'command = {json.dumps([sys.executable, str(PROXY), "--mode", mode, "--report", str(report), "--hold-s", str(HOLD_S), "--", str(stack.executable), "train"])}')
    path.write_text(text)
    plan = load_plan(path)
    prepare_plan(plan)
    return plan, report


@pytest.mark.parametrize("ecosystem", BUILT)
def test_a_phase_waits_for_the_harness_answer(tmp_path, ecosystem):
    plan, report_path = proxied_plan(tmp_path, ecosystem, "delay")
    summary = collect(plan, tmp_path / "out", allow_missing_counters=True)
    assert summary.ok, summary.failed
    report = json.loads(report_path.read_text())
    assert [h["reply"].split()[2:4] for h in report["holds"]] == [["1", "train"], ["1", "eval"]]
    assert all(h["bytes_sent_during_hold"] == 0 for h in report["holds"]), report   # it waited
    assert summary.completed == [plan.jobs[0].run_id]
    assert (tmp_path / "out" / "runs" / "proto" / plan.jobs[0].run_id).is_dir()


@pytest.mark.parametrize("ecosystem", BUILT)
def test_a_harness_killed_mid_phase_fails_the_run_and_the_stack_exits(tmp_path, ecosystem):
    plan, report_path = proxied_plan(tmp_path, ecosystem, "kill")
    out = tmp_path / "out"
    summary = collect(plan, out, allow_missing_counters=True)
    run_id = plan.jobs[0].run_id
    assert not summary.ok and "SIGKILL" in summary.failed[run_id]
    assert not (out / "runs" / "proto" / run_id).exists() and not (out / "work" / run_id).exists()
    failure = json.loads((out / "failed" / f"{run_id}.1" / "failure.json").read_text())
    assert "SIGKILL" in failure["reason"]
    for _ in range(600):                       # the orphaned stack notices and exits by itself
        if report_path.is_file():
            break
        time.sleep(0.1)
    report = json.loads(report_path.read_text())
    assert report["killed_harness_at_s"] is not None
    assert report["stack_returncode"] not in (0, "hung")            # it failed, it did not hang
