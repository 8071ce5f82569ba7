"""Importing the Greenlight/FECoM records (read from ../shared, never copied)."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import pytest

from conftest import shared_data
from deepgreen_audit.cli import main
from deepgreen_audit.errors import UserError
from deepgreen_audit.greenlight.discover import read_tree
from deepgreen_audit.greenlight.fecom import call_figures
from deepgreen_audit.greenlight.importer import import_greenlight, records_from_package
from deepgreen_audit.greenlight.package import open_api_package, validate_api_package

GREENLIGHT = Path(__file__).resolve().parents[1].parent / "shared" / "greenlight"
FRAME = json.dumps({"columns": ["time_elapsed", "energy (J)"], "index": [0, 1, 2, 3],
                    "data": [[0.5, 17.0], [1.0, 17.0], [1.5, 30.0], [2.0, 17.0]]})
GPU = json.dumps({"columns": ["timestamp", "power_draw (W)", "time_elapsed", "temperature"],
                  "index": [0, 1, 2], "data": [[1.0, 20.0, 0.5, 30], [1.5, 40.0, 1.0, 30],
                                               [2.0, 20.0, 1.5, 30]]})


#: A plausible date (2023) in epoch nanoseconds: the schema refuses a call before 2000.
NS_2023 = 1_700_000_000_000_000_000


def record(**override) -> dict:
    body = {"energy_data": {"cpu": FRAME, "ram": FRAME, "gpu": GPU},
            "times": {"start_time_execution": NS_2023, "end_time_execution": NS_2023 + 1_000_000_000,
                      "start_time_perf": 1.0, "end_time_perf": 2.0, "start_time_nvidia": 1.0,
                      "end_time_nvidia": 1.5},
            "settings": {"wait_per_stable_check_loop_s": 0.5, "measurement_interval_s": 0.5},
            "input_sizes": {"args_size": 64, "kwargs_size": None, "object_size": None}}
    for path, value in override.items():
        section, key = path.split("__")
        body[section][key] = value
    return {"tensorflow.add(a, b)": body}


@pytest.fixture(scope="module")
def imported(tmp_path_factory):
    out = tmp_path_factory.mktemp("gl") / "pkg"
    counts = import_greenlight(shared_data("greenlight"), out)
    return out, counts


def test_every_shared_record_imports_into_a_valid_package(imported):
    out, counts = imported
    assert counts["calls"] == 372 and counts["samples"] == 222_859 and counts["projects"] == 6
    assert validate_api_package(out).valid
    calls = open_api_package(out).table("api_calls").to_pylist()
    kinds = {(c["source"], c["experiment_kind"]) for c in calls}
    assert kinds == {("fecom", "method-level"), ("fecom", "project-level"), ("fecom", "data-size"),
                     ("greenlight", "method-level")}
    sizes = [c["args_size_bytes"] for c in calls if c["experiment_kind"] == "data-size"
             and c["experiment"] == 1]
    assert sizes == sorted(sizes) and sizes[0] == 37638238  # input sizes kept, in bytes
    assert all(c["energy_missing_reason"] for c in calls if c["cpu_samples_in_execution"] == 0)
    assert any(c["in_skip_calls"] for c in calls)


def test_package_gives_back_the_records_figures(imported):
    out, _ = imported
    direct = {r.call_id: call_figures(r) for r in read_tree(GREENLIGHT / "SMART-Dal_greenlight")}
    again = [r for r in records_from_package(out) if r.source == "greenlight"]
    assert len(again) == len(direct) == 162
    for r in again:
        assert call_figures(r) == direct[r.call_id]


def test_import_verb_writes_and_refuses_to_overwrite(tmp_path, capsys):
    src = tmp_path / "records" / "dataset" / "proj"
    src.mkdir(parents=True)
    (src / "experiment-1.json").write_text(json.dumps([record()]))
    records = str(tmp_path / "records")
    assert main(["import", "greenlight", records, "--out", str(tmp_path / "pkg")]) == 0
    assert "imported 1 calls" in capsys.readouterr().out
    assert main(["import", "greenlight", records, "--out", str(tmp_path / "pkg")]) == 2
    assert "--overwrite" in capsys.readouterr().err


@pytest.mark.parametrize("content, expected", [
    ("{not json", "is not valid JSON"),
    (json.dumps({"a": 1}), "must hold a JSON list"),
    (json.dumps([record(times__start_time_perf="soon")]),
     "record 1 (call 'tensorflow.add(a, b)'): times.start_time_perf is missing or not a number"),
    (json.dumps([record(), record(energy_data__cpu=json.dumps(
        {"columns": ["time_elapsed"], "index": [0], "data": [[0.5]]}))]),
     "record 2 (call 'tensorflow.add(a, b)'): energy_data.cpu lacks column 'energy (J)'"),
    (json.dumps([record(energy_data__gpu=GPU.replace("40.0", '"high"'))]),
     "energy_data.gpu row 1 column 'power_draw (W)': 'high' is not a number"),
    (json.dumps([record(settings__wait_per_stable_check_loop_s=None)]),
     "settings.wait_per_stable_check_loop_s is missing"),
    (json.dumps([{"a()": {}, "b()": {}}]), "record 1: a record must be an object with exactly one key"),
])
def test_malformed_records_name_the_file_and_the_call(tmp_path, capsys, content, expected):
    folder = tmp_path / "dataset" / "proj"
    folder.mkdir(parents=True)
    path = folder / "experiment-1.json"
    path.write_text(content)
    before = hashlib.sha256(path.read_bytes()).hexdigest()
    with pytest.raises(UserError) as err:
        import_greenlight(tmp_path, tmp_path / "pkg")
    assert str(path) in str(err.value) and expected in str(err.value)
    assert main(["import", "greenlight", str(tmp_path), "--out", str(tmp_path / "pkg")]) == 2
    stderr = capsys.readouterr().err
    assert expected in stderr and "Traceback" not in stderr
    assert hashlib.sha256(path.read_bytes()).hexdigest() == before  # input never modified
    assert not (tmp_path / "pkg").exists()                           # nothing half-written


def test_a_folder_without_records_is_refused(tmp_path):
    with pytest.raises(UserError, match="no experiment-N.json"):
        import_greenlight(tmp_path, tmp_path / "pkg")


def test_tampered_package_fails_validation(imported, tmp_path):
    import shutil

    out, _ = imported
    copy = tmp_path / "copy"
    shutil.copytree(out, copy)
    path = copy / "api_calls.csv"
    path.write_bytes(path.read_bytes().replace(b",greenlight,", b",greenlite,", 1))
    codes = {f.id for f in validate_api_package(copy).findings}
    assert {"checksum-mismatch", "constraint-error"} <= codes
