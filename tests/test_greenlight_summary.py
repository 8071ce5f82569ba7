"""FECoM's method and the published summaries, recomputed from the shared raw records."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from conftest import shared_data
from deepgreen_audit.greenlight.discover import read_tree
from deepgreen_audit.greenlight.fecom import domain_figures
from deepgreen_audit.greenlight.records import CallRecord, Series, function_name
from deepgreen_audit.greenlight.summary import (
    REASON_GPU_METHOD,
    REASON_OTHER_RECORDS,
    REASON_UNEXPLAINED,
    compare_published,
)

GREENLIGHT = Path(__file__).resolve().parents[1].parent / "shared" / "greenlight"


def series(times, values, column="energy_j"):
    return Series(np.arange(len(times)), {"time_elapsed_s": np.asarray(times, float),
                                          column: np.asarray(values, float)})


def one_call(cpu_values, start=2.0, end=3.0):
    t = [0.5 * i for i in range(len(cpu_values))]
    return CallRecord(
        source="fecom", experiment_kind="method-level", project="p", experiment=1, position=0,
        api_call="f(x)", source_file=None,
        times={"start_time_execution": 0, "end_time_execution": 10**9, "start_time_perf": start,
               "end_time_perf": end, "start_time_nvidia": start, "end_time_nvidia": end},
        settings={"wait_per_stable_check_loop_s": 1.0, "measurement_interval_s": 0.5},
        input_sizes={}, series={"cpu": series(t, cpu_values),
                                "gpu": series(t, cpu_values, "power_w")})


def test_fecom_window_baseline_and_lag_by_hand():
    # t:   0    .5   1    1.5  2    2.5  3    3.5  4    4.5  5    5.5  6    6.5
    v = [9.0, 9.0, 10., 10., 20., 30., 14., 12., 10., 10., 10., 10., 10., 10.]
    f = domain_figures(one_call(v), "cpu")
    assert f.samples_in_execution == 2 and f.total_j == 50.0          # t=2.0 and 2.5
    assert f.baseline_samples == 2 and f.baseline_value == 10.0        # last 1.0 s / 0.5 s
    assert f.total_normalised_j == 30.0 and f.baseline_power_w == 20.0
    # 8 samples from t=3; forward 5-sample means 11.2, 10.4, 10, 10 (>= 10), then NaN: run of 4
    assert f.lag_time_s == 1.5 and f.lag_j == 46.0 and f.lag_normalised_j == 6.0
    assert f.total_lag_normalised_j == 36.0
    assert f.value_mean == 25.0 and f.power_mean_w == 50.0
    g = domain_figures(one_call(v), "gpu")                            # watts, 2 W lag tolerance
    assert g.total_j == 25.0 and g.total_normalised_j == 15.0 and g.lag_time_s == 0.0


def test_call_shorter_than_an_interval_has_no_window():
    f = domain_figures(one_call([10.0] * 12, start=2.1, end=2.2), "cpu")
    assert f.samples_in_execution == 0 and f.total_j is None and f.total_normalised_j is None


def test_function_names_follow_fecom():
    assert function_name("tensorflow.keras.models.Sequential(x_train[:1]).numpy()") == \
        "tensorflow.keras.models.Sequential.numpy"


@pytest.fixture(scope="module")
def comparison():
    return compare_published(shared_data("greenlight"), read_tree(GREENLIGHT))


def test_fecom_rq2_rows_match_to_full_precision(comparison):
    rows = [r for r in comparison.rows
            if r.published_file == "SMART-Dal_FECoM/replication/rq2_analysis/rq2_analysis.csv"]
    assert [(r.function, r.outcome) for r in rows] == [
        ("tensorflow.keras.models.Sequential()", "match"),
        ("tensorflow.keras.models.Sequential(x_train[:1]).numpy()", "match"),
        ("tensorflow.keras.models.Sequential.fit()", "match"),
        ("tensorflow.keras.models.Sequential.evaluate()", "match")]


def test_greenlight_combined_summaries_match_where_their_records_are_present(comparison):
    combined = [r for r in comparison.rows if "/combined/" in r.published_file]
    matched = {(r.project.rsplit("/", 1)[1], r.function) for r in combined if r.outcome == "match"}
    assert len([r for r in combined if r.outcome == "match"]) == 36    # 6 functions x 6 files
    assert ("estimator", "tensorflow.estimator.LinearClassifier.train()") in matched
    assert ("beginner", "tensorflow.keras.models.Sequential(x_train[:1]).numpy()") in matched
    assert not [r for r in combined if r.outcome == "differs"]


def test_every_difference_is_explained(comparison):
    differs = [r for r in comparison.rows if r.outcome == "differs"]
    assert differs and all(r.reason != REASON_UNEXPLAINED for r in differs)
    assert {r.reason for r in differs} == {REASON_OTHER_RECORDS, REASON_GPU_METHOD}
    gpu_only = [r for r in differs if r.reason == REASON_GPU_METHOD]
    assert all("using-rq1-data" in r.published_file for r in gpu_only)
    assert all(d.startswith("GPU") for r in gpu_only for d in r.differences)
    other = [r for r in differs if r.reason == REASON_OTHER_RECORDS]
    assert all(any(d.startswith("exec time") for d in r.differences) for r in other)
    assert comparison.not_compared == {}
