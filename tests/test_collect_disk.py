"""The disk a campaign needs (issue 36): estimated before it starts, checked against the files
the real writers write, and refused up front where the file system cannot hold it."""

from __future__ import annotations

import shutil
from pathlib import Path
from types import SimpleNamespace

import pytest

from deepgreen_audit.cli import main
from deepgreen_audit.collect.disk import (
    OVERHEAD_FRACTION,
    campaign_items,
    dataset_item,
    run_dir_bytes,
    size_text,
    weight_items,
)
from deepgreen_audit.collect.plan import load_plan
from deepgreen_audit.collect.prepare import prepare_plan
from deepgreen_audit.package.rundirs import restore
from deepgreen_audit.stacks.weights import Export, weights_dir

ROOT = Path(__file__).resolve().parents[1]


def _plan(tmp_path: Path, repetitions: int = 1) -> Path:
    path = tmp_path / "plan.toml"
    path.write_text(f'campaign = "disk"\nmaster_seed = 11\nrun_timeout_s = 600\n'
                    f'data_dir = "{tmp_path / "data"}"\n'
                    '[stacks.cpp-libtorch]\nkind = "external"\ncommand = ["/bin/false"]\n'
                    '[scope]\necosystems = ["cpp-libtorch"]\narchitectures = ["resnet18"]\n'
                    f'datasets = ["digits"]\nrepetitions = {repetitions}\nepochs = 2\n')
    return path


def _sizes(folder: Path) -> int:
    return sum(p.stat().st_size for p in folder.rglob("*") if p.is_file())


def test_the_estimates_bound_what_prepare_writes_within_their_spare(tmp_path):
    """A real export of ResNet-18 (10 classes) and the real digits store: each estimate is at
    least the files' size and at most the spare above it."""
    plan = load_plan(_plan(tmp_path))
    before = {item.what: item for item in [*weight_items(plan), dataset_item(plan)]}
    assert all(item.to_write_bytes == item.total_bytes > 0 for item in before.values())
    prepare_plan(plan)
    job = plan.jobs[0]
    export = Export.at(weights_dir(job.data_dir), job.architecture, job.classes, job.seed)
    real = {"weights (safetensors)": export.path.stat().st_size + export.manifest_path.stat().st_size,
            "TorchScript modules": export.torchscript_path.stat().st_size,
            "datasets": _sizes(Path(job.data_dir) / "digits")}
    for what, size in real.items():
        estimate = before[what].total_bytes
        assert size <= estimate <= size * (1 + 2 * OVERHEAD_FRACTION), (what, size, estimate)
    after = [*weight_items(plan), dataset_item(plan)]
    assert [item.to_write_bytes for item in after] == [0, 0, 0]


def test_the_run_directory_bound_holds_for_real_and_shipped_runs(tmp_path):
    """Every run directory of the shipped package restored (counters and GPU columns filled)
    lies within the bound for its blocks and samples, and not far below it."""
    restore(ROOT / "datapackage.json", tmp_path / "runs")
    runs = [p for p in (tmp_path / "runs").glob("*/*") if p.is_dir()]
    assert len(runs) == 210
    for run in runs:
        blocks = len((run / "blocks.csv").read_text().splitlines()) - 1
        samples = len((run / "samples.csv").read_text().splitlines()) - 1
        size = _sizes(run)
        assert size <= run_dir_bytes(blocks, samples) <= 3 * size, run.name


def test_the_plan_preview_states_the_disk_and_the_room(tmp_path, capsys):
    path = _plan(tmp_path, repetitions=3)
    plan = load_plan(path)
    assert main(["plan", "--plan", str(path), "--out", str(tmp_path / "out")]) == 0
    out = capsys.readouterr().out
    items = {item.what: item for item in campaign_items(plan, tmp_path / "out")}
    for what in ("weights (safetensors)", "TorchScript modules", "datasets", "run directories"):
        assert f"    {what}, {size_text(items[what].total_bytes)} (" in out, what
    assert "3 exports, one per run's seed, float32: 4 bytes a trainable parameter " \
           "(S1_model.trainable_parameters: resnet18 11.2M parameters) plus 1%" in out
    assert "3 runs, each at most 4.0 kB + 4 blocks x 1.0 kB + 600 samples x 64 bytes" in out
    total = sum(item.total_bytes for item in items.values())
    assert f"  disk, estimated (GB = 10^9 bytes): {size_text(total)} in all, {size_text(total)} of " \
           "it not written yet" in out
    assert "  free: " in out and "enough for the" in out


@pytest.fixture
def nearly_full_disk(monkeypatch):
    """Every file system reports 1,000 bytes free (the statvfs answer shutil gives)."""
    monkeypatch.setattr(shutil, "disk_usage",
                        lambda path: SimpleNamespace(total=10**12, used=10**12 - 1000, free=1000))


def test_collect_refuses_a_file_system_that_cannot_hold_its_runs(tmp_path, nearly_full_disk, capsys):
    path, out = _plan(tmp_path), tmp_path / "out"
    assert main(["collect", "--plan", str(path), "--out", str(out), "--allow-missing-counters"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "Traceback" not in err
    runs = run_dir_bytes(4, 600)
    assert (f"the campaign still has {size_text(runs)} to write on this file system (run "
            f"directories {size_text(runs)} in {out / 'runs'}), which has 1.0 kB free") in err
    assert f"'deepgreen plan --plan {path}' shows the estimate" in err
    assert not out.exists()


def test_prepare_refuses_a_file_system_that_cannot_hold_the_weights(tmp_path, nearly_full_disk,
                                                                   capsys):
    path = _plan(tmp_path)
    plan = load_plan(path)
    assert main(["data", "prepare", "--plan", str(path)]) == 2
    err = capsys.readouterr().err
    weights = sum(item.to_write_bytes for item in weight_items(plan))
    digits = dataset_item(plan).to_write_bytes
    assert f"the campaign still has {size_text(weights + digits)} to write on this file system" in err
    assert "weights (safetensors)" in err and "TorchScript modules" in err and "datasets" in err
    assert not (tmp_path / "data").exists()
