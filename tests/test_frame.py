"""audit/frame.py, the numpy layer the checks compute on, against pandas (which the checks
were written with and which stays the reference for what a group, a median, an order or a
count is)."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pyarrow as pa
import pytest

from deepgreen_audit.columnar.frame import Frame, Groups, counts, mode, order, plain_value

SEEDS = range(150)


def _random_frame(seed: int) -> pd.DataFrame:
    rng = np.random.default_rng(seed)
    n = int(rng.integers(0, 60))
    values = rng.normal(size=n)
    values[rng.random(n) < 0.2] = np.nan
    values[rng.random(n) < 0.1] = 0.5          # ties
    return pd.DataFrame({"key": np.array(rng.choice(["b", "a", "c", None], n), dtype=object),
                         "level": rng.integers(1, 3, n).astype(float),
                         "value": values})


@pytest.mark.parametrize("seed", SEEDS)
def test_groups_agree_with_pandas_groupby(seed):
    df = _random_frame(seed)
    groups = Groups(df["key"].to_numpy(), df["level"].to_numpy())
    by = df.groupby(["key", "level"])["value"]
    assert list(by.size().index) == list(zip(*groups.keys, strict=True))
    assert by.size().tolist() == groups.size.tolist()
    values = df["value"].to_numpy()
    for how in ("median", "min", "max", "sum", "mean", "first", "nunique"):
        expected = getattr(by, how)().to_numpy(dtype=float)
        assert np.allclose(expected, getattr(groups, how)(values).astype(float), equal_nan=True), how
    assert np.allclose(by.shift(1).to_numpy(dtype=float), groups.shift(values), equal_nan=True)
    spread = groups.spread(groups.median(values))
    assert np.allclose(by.transform("median").to_numpy(dtype=float), spread, equal_nan=True)


@pytest.mark.parametrize("seed", SEEDS)
def test_order_is_pandas_stable_sort(seed):
    df = _random_frame(seed)
    for column in ("value", "key"):
        for descending in (False, True):
            expected = df.sort_values(column, ascending=not descending, kind="stable").index
            assert list(expected) == list(order(df[column].to_numpy(), descending)), (column, descending)


def test_counts_and_mode_as_pandas_value_counts():
    labels = ["b", "a", None, "a", "c", "b", "d"]
    assert counts(labels) == list(pd.Series(labels).value_counts().items())
    assert mode(labels) == pd.Series(labels).mode().iloc[0] == "a"
    assert counts([]) == [] and mode([]) is None


def test_arrow_columns_map_to_one_numpy_type_per_schema_type():
    table = pa.table({
        "n": pa.array([1, None, 3], pa.int64()), "x": pa.array([0.5, None, 2.0]),
        "s": pa.array(["a", None, "c"]), "b": pa.array([True, None, False]),
        "d": pa.array([0, None, 1_000_000], pa.timestamp("us", tz="UTC")),
        "k": pa.array(["r1", "r1", None]).dictionary_encode()})
    frame = Frame.from_arrow(table)
    assert np.isnan(frame["n"][1]) and frame["n"].dtype == float and "n" in frame.integer
    assert frame["s"].tolist() == ["a", None, "c"]
    assert frame["b"].tolist() == [True, None, False]
    assert frame["k"].tolist() == ["r1", "r1", None]
    assert frame.missing("d").tolist() == [False, True, False]
    assert frame.records() == [
        {"n": 1, "x": 0.5, "s": "a", "b": True, "d": "1970-01-01T00:00:00+00:00", "k": "r1"},
        {"n": None, "x": None, "s": None, "b": None, "d": None, "k": "r1"},
        {"n": 3, "x": 2.0, "s": "c", "b": False, "d": "1970-01-01T00:00:01+00:00", "k": None}]
    taken = frame.take(np.array([False, True, True]))
    assert len(taken) == 2 and taken["s"].tolist() == [None, "c"]
    assert frame.select(["s", "n"]).assign(extra=1).records()[0] == {"s": "a", "n": 1, "extra": 1}


def test_plain_value_writes_json_values():
    assert plain_value(np.float64("nan")) is None and plain_value(float("inf")) is None
    assert plain_value(np.float64(1.23456789), digits=3) == 1.235
    assert plain_value(np.int64(4)) == 4 and plain_value(4.0, whole=True) == 4
    assert plain_value(pd.NA) is None
    assert plain_value(pd.Timestamp("2026-03-02T16:12:28Z")) == "2026-03-02T16:12:28+00:00"


def test_group_sums_are_pandas_compensated_sums_to_the_bit():
    rng = np.random.default_rng(7)
    runs = rng.choice([f"r{i}" for i in range(30)], 5000)
    energy = rng.lognormal(8, 2, 5000)
    expected = pd.Series(energy).groupby(runs).sum().to_numpy()
    assert Groups(runs.astype(object)).sum(energy).tolist() == expected.tolist()
