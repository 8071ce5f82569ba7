"""`deepgreen synth --copies N`: the drawn campaign written N times in a row, streamed
(deepgreen_audit.synth.copies, package.writer.write_package_streamed)."""

from __future__ import annotations

import datetime as dt
import hashlib
import json
import statistics

import numpy as np
import pytest

from deepgreen_audit.audit import audit
from deepgreen_audit.cli import main
from deepgreen_audit.errors import UserError
from deepgreen_audit.package.canonical import format_value
from deepgreen_audit.package.descriptor import Package
from deepgreen_audit.package.schema import TABLES
from deepgreen_audit.package.validate import validate
from deepgreen_audit.package.writer import write_package
from deepgreen_audit.spec import load_spec
from deepgreen_audit.synth import TRUTH_FILE, SynthModel, generate, write_synthetic
from deepgreen_audit.synth.copies import format_us
from deepgreen_audit.synth.model import initial_weights_sha256

ECOSYSTEMS = "python-pytorch,java-dl4j"
SMALL = ["--ecosystems", ECOSYSTEMS, "--repetitions", "2", "--epochs", "2"]
R, N = 2, 3


@pytest.fixture(scope="module")
def packages(tmp_path_factory):
    """The small campaign as drawn, and written three times in a row."""
    root = tmp_path_factory.mktemp("copies")
    assert main(["synth", "--out", str(root / "one"), *SMALL]) == 0
    assert main(["synth", "--out", str(root / "three"), *SMALL, "--copies", str(N)]) == 0
    return root / "one", root / "three"


def rows(pkg, name):
    table = Package.open(pkg).text(name)
    return [dict(zip(table.header, row)) for row in table.rows]


def ts(text: str) -> dt.datetime:
    return dt.datetime.fromisoformat(text.replace("Z", "+00:00"))


def test_copies_validate_and_audit_as_the_drawn_campaign(packages):
    one, three = packages
    for pkg in packages:
        report = validate(pkg)
        assert report.valid, report.format_text()
    drawn, copied = audit(one), audit(three)
    statuses = [{f.id: (f.status, f.basis) for f in r.findings} for r in (drawn, copied)]
    assert statuses[0] == statuses[1]
    # two epochs a run: S6.phase-work does not apply (a median of two is half the warm-up's)
    assert set(statuses[0].values()) == {("pass", None), ("skip", "not applicable")}
    assert drawn.finished and copied.finished


def test_rows_are_n_times_the_drawn(packages):
    one, three = packages
    for name in TABLES:
        assert len(rows(three, name)) == N * len(rows(one, name)), name


def test_copies_renumber_and_shift_what_identifies_a_run(packages):
    one, three = packages
    drawn = {r["run_id"]: r for r in rows(one, "runs")}
    runs = {r["run_id"]: r for r in rows(three, "runs")}
    n = len(drawn)
    first = min(ts(r["started_at_utc"]) for r in drawn.values())
    last = max(ts(r["ended_at_utc"]) for r in drawn.values())
    by_pos = sorted(drawn.values(), key=lambda r: int(r["schedule_position"]))
    gaps_us = [(ts(b["started_at_utc"]) - ts(a["ended_at_utc"])) // dt.timedelta(microseconds=1)
               for a, b in zip(by_pos, by_pos[1:])]
    shift = (last - first) + dt.timedelta(microseconds=int(statistics.median(gaps_us)))
    info = json.loads((three / "datapackage.json").read_text())["provenance"]["copies"]
    assert info["time_shift_s"] == shift.total_seconds()
    classes = load_spec()["S3_data"]["classes"]
    pid_shift = info["process_id_shift"]
    pids = sorted(int(r["process_id"]) for r in drawn.values())
    assert pid_shift > pids[-1] - pids[0]
    for k in range(N):
        for run_id, src in drawn.items():
            config, rep = run_id.rsplit(".r", 1)
            new = runs[f"{config}.r{int(rep) + k * R}"]
            assert int(new["repetition"]) == int(src["repetition"]) + k * R
            assert int(new["schedule_position"]) == int(src["schedule_position"]) + k * n
            assert int(new["process_id"]) == int(src["process_id"]) + k * pid_shift
            for col in ("started_at_utc", "ended_at_utc"):
                assert ts(new[col]) == ts(src[col]) + k * shift
            job, task = src["slurm_job_id"].split("_")
            assert new["slurm_job_id"] == f"{job}_{int(task) + k * n}"
            assert new["initial_weights_sha256"] == initial_weights_sha256(
                src["architecture"], classes[src["dataset"]], int(new["seed"]))
            if k == 0:
                assert new == src
            changed = {"run_id", "repetition", "seed", "schedule_position", "process_id",
                       "started_at_utc", "ended_at_utc", "initial_weights_sha256", "slurm_job_id"}
            assert {c: v for c, v in new.items() if c not in changed} == \
                {c: v for c, v in src.items() if c not in changed}
    assert len({r["seed"] for r in runs.values()}) == len({r["process_id"] for r in runs.values()}) \
        == len(runs) == N * n
    assert all(0 <= int(r["seed"]) < 2**31 - 1 for r in runs.values())
    # copies follow one another: positions run 1..3n in start order, no two runs overlap
    order = sorted(runs.values(), key=lambda r: int(r["schedule_position"]))
    assert [int(r["schedule_position"]) for r in order] == list(range(1, N * n + 1))
    assert all(ts(a["ended_at_utc"]) < ts(b["started_at_utc"]) for a, b in zip(order, order[1:]))


def test_blocks_samples_and_environment_are_the_drawn_rows(packages):
    one, three = packages
    shift = dt.timedelta(seconds=json.loads((three / "datapackage.json").read_text())
                         ["provenance"]["copies"]["time_shift_s"])

    def per_run(pkg, name):
        out: dict[str, list[dict]] = {}
        for r in rows(pkg, name):
            out.setdefault(r.pop("run_id"), []).append(r)
        return out

    for name in ("blocks", "samples", "environment"):
        drawn, copied = per_run(one, name), per_run(three, name)
        for run_id, src in drawn.items():
            config, rep = run_id.rsplit(".r", 1)
            for k in range(N):
                new = copied[f"{config}.r{int(rep) + k * R}"]
                if name == "blocks":
                    for a, b in zip(src, new):
                        assert ts(b.pop("started_at_utc")) == ts(a["started_at_utc"]) + k * shift
                    src_rest = [{c: v for c, v in r.items() if c != "started_at_utc"} for r in src]
                    assert new == src_rest
                else:
                    assert new == src


def test_descriptor_and_truth_say_the_package_is_replicated(packages):
    one, three = packages
    desc = json.loads((three / "datapackage.json").read_text())
    truth_bytes = (three / TRUTH_FILE).read_bytes()
    truth = json.loads(truth_bytes)
    assert desc["synthetic"] is True and "REPLICATED" in desc["description"]
    info = desc["provenance"]["copies"]
    assert info == truth["copies"]
    assert info["copies"] == N and info["drawn"]["repetitions"] == R
    assert info["written"]["runs"] == N * info["drawn"]["runs"] == truth["campaign"]["runs"]
    assert desc["scope"]["repetitions"] == N * R
    assert desc["provenance"]["truth_sha256"] == hashlib.sha256(truth_bytes).hexdigest()
    wraps = truth["rapl_wraps"]
    drawn_wraps = json.loads((one / TRUTH_FILE).read_text())["rapl_wraps"]
    assert wraps["blocks"] == len(wraps["rows"]) == N * drawn_wraps["blocks"] > 0
    blocks = {(r["run_id"], r["epoch"], r["phase"]): r for r in rows(three, "blocks")}
    for row in wraps["rows"]:
        assert blocks[(row["run_id"], str(row["epoch"]), row["phase"])]["rapl_wraps"] != "0;0"
    assert f"{N} copies" in Package.open(three).notice()


def test_one_copy_is_the_package_as_before(tmp_path):
    """--copies 1 (the default) streams the very bytes write_package writes of the drawn
    campaign, descriptor, checksums and truth included."""
    kwargs = dict(ecosystems=ECOSYSTEMS.split(","), repetitions=R, epochs=2)
    result = generate(**kwargs)
    write_package(result.tables, tmp_path / "before", result.meta,
                  extra_files={TRUTH_FILE: result.truth_bytes()})
    write_synthetic(tmp_path / "streamed", copies=1, **kwargs)
    assert main(["synth", "--out", str(tmp_path / "cli"), *SMALL, "--copies", "1"]) == 0
    names = sorted(p.name for p in (tmp_path / "before").iterdir())
    for other in ("streamed", "cli"):
        assert sorted(p.name for p in (tmp_path / other).iterdir()) == names
        for name in names:
            assert (tmp_path / other / name).read_bytes() == \
                (tmp_path / "before" / name).read_bytes(), (other, name)


def test_datetimes_are_formatted_canonically():
    moments = ["2026-03-02T08:00:00Z", "2026-03-02T08:00:00.5Z", "2026-03-02T08:00:00.000001Z",
               "2026-12-31T23:59:59.12345Z"]
    us = np.array([t[:-1] for t in moments], dtype="datetime64[us]").astype(np.int64)
    assert format_us(us) == moments
    assert format_us(us + 3_600_000_000) == [
        format_value(dt.datetime.fromisoformat(t.replace("Z", "+00:00")) + dt.timedelta(hours=1),
                     "datetime") for t in moments]


@pytest.mark.parametrize("args", [["--copies", "0"], ["--copies", "-2"], ["--copies", "two"],
                                  ["--copies", "1.5"]])
def test_copies_must_be_a_positive_integer(args, tmp_path, capsys):
    with pytest.raises(SystemExit) as exc:
        main(["synth", "--out", str(tmp_path / "pkg"), *SMALL, *args])
    assert exc.value.code == 2
    assert "--copies" in capsys.readouterr().err
    assert not (tmp_path / "pkg").exists()


@pytest.mark.parametrize("args", [["--defect", "short-blocks"],
                                  ["--precision-change", "python-pytorch=2"]])
def test_copies_refuse_defects_and_precision_changes(args, tmp_path, capsys):
    assert main(["synth", "--out", str(tmp_path / "pkg"), *SMALL, "--copies", "2", *args]) == 2
    err = capsys.readouterr().err
    assert "--copies does not combine" in err and "Traceback" not in err
    assert not (tmp_path / "pkg").exists()
    with pytest.raises(UserError):
        write_synthetic(tmp_path / "pkg", defects=["short-blocks"], copies=2,
                        ecosystems=ECOSYSTEMS.split(","), repetitions=R, epochs=2)
    with pytest.raises(UserError):
        write_synthetic(tmp_path / "pkg", copies=2, repetitions=R, epochs=2,
                        model=SynthModel().with_overrides({"precision_change": {"java-dl4j": 2.0}}),
                        ecosystems=ECOSYSTEMS.split(","))
    with pytest.raises(UserError):
        write_synthetic(tmp_path / "pkg", copies=0, repetitions=R, epochs=2)


def test_copies_refuse_a_campaign_that_would_repeat_a_configuration_at_each_seam(tmp_path):
    """One configuration: the drawn campaign ends with the configuration it starts with, so
    its copies would run it twice in a row (S6.interleaving) where they meet."""
    with pytest.raises(UserError, match="twice in a row"):
        write_synthetic(tmp_path / "pkg", copies=2, ecosystems=["python-pytorch"],
                        architectures=["resnet18"], datasets=["cifar100"], repetitions=2, epochs=1)
    assert not (tmp_path / "pkg").exists()
