"""package/compute.py calls pyarrow's kernels by name without importing pyarrow.compute: each
of its functions gives what the pyarrow.compute function of that name gives."""

from __future__ import annotations

import math
import subprocess
import sys
from pathlib import Path

import pyarrow as pa
import pyarrow.compute as pc

from deepgreen_audit.package import compute

TEXTS = pa.array(["1.5", "-0.0", None, "true", "2026-03-02T16:12:28Z", "a;b;c", "1e400", ""])


def test_each_function_is_pyarrows():
    numbers = pa.array([1.5, None, math.inf, -2.0])
    flags = pa.array([True, False, None, True])
    cases = [
        (compute.cast(pa.array(["1", None, "3"]), pa.int64()), pc.cast(pa.array(["1", None, "3"]), pa.int64())),
        (compute.cast(numbers, pa.string()), pc.cast(numbers, pa.string())),
        (compute.fill_null(numbers, math.nan), pc.fill_null(numbers, math.nan)),
        (compute.fill_null(TEXTS, ""), pc.fill_null(TEXTS, "")),
        (compute.match_substring(TEXTS, "true"), pc.match_substring(TEXTS, "true")),
        (compute.match_substring_regex(TEXTS, "^-?[0-9]"), pc.match_substring_regex(TEXTS, "^-?[0-9]")),
        (compute.replace_substring_regex(TEXTS, pattern="[0-9]", replacement="#"),
         pc.replace_substring_regex(TEXTS, pattern="[0-9]", replacement="#")),
        (compute.is_in(TEXTS, value_set=pa.array(["", "true"])), pc.is_in(TEXTS, value_set=pa.array(["", "true"]))),
        (compute.split_pattern(TEXTS, ";"), pc.split_pattern(TEXTS, ";")),
        (compute.binary_join_element_wise(TEXTS, TEXTS, separator="\x1f"),
         pc.binary_join_element_wise(TEXTS, TEXTS, "\x1f")),
        (compute.utf8_length(TEXTS), pc.utf8_length(TEXTS)),
        (compute.equal(TEXTS, "-0.0"), pc.equal(TEXTS, "-0.0")),
        (compute.not_equal(TEXTS, TEXTS), pc.not_equal(TEXTS, TEXTS)),
        (compute.or_(flags, flags), pc.or_(flags, flags)),
        (compute.is_finite(numbers), pc.is_finite(numbers)),
        (compute.is_null(numbers), pc.is_null(numbers)),
        (compute.if_else(flags, TEXTS[:4], pa.nulls(4, pa.string())),
         pc.if_else(flags, TEXTS[:4], pa.nulls(4, pa.string()))),
        (compute.unique(TEXTS), pc.unique(TEXTS)),
        (compute.filter(TEXTS[:4], flags), pc.filter(TEXTS[:4], flags)),
        (compute.dictionary_encode(TEXTS), pc.dictionary_encode(TEXTS)),
        (compute.list_value_length(pc.split_pattern(TEXTS, ";")), pc.list_value_length(pc.split_pattern(TEXTS, ";"))),
        (compute.list_flatten(pc.split_pattern(TEXTS, ";")), pc.list_flatten(pc.split_pattern(TEXTS, ";"))),
    ]
    for ours, theirs in cases:  # (repr: a NaN equals a NaN)
        assert ours.type == theirs.type and repr(ours.to_pylist()) == repr(theirs.to_pylist())


def test_a_value_that_does_not_convert_raises_as_pyarrows_cast():
    for cast in (compute.cast, pc.cast):
        try:
            cast(pa.array(["x"]), pa.float64())
        except pa.ArrowInvalid:
            continue
        raise AssertionError(f"{cast} converted 'x'")


def test_validate_and_audit_do_not_import_pyarrow_compute():
    """The point of the module: the `deepgreen` program never pays for pyarrow.compute (nor
    for pandas, which the audit no longer uses)."""
    package = Path(__file__).resolve().parents[1] / "datapackage.json"
    for verb in ("validate", "audit"):
        done = subprocess.run([sys.executable, "-X", "importtime", "-m", "deepgreen_audit", verb,
                               str(package)], capture_output=True, text=True)
        assert done.returncode == 0, done.stderr[-2000:]
        imported = {line.split("|")[-1].strip() for line in done.stderr.splitlines()
                    if line.startswith("import time:")}
        assert "pyarrow._compute" in imported and "pyarrow.compute" not in imported, verb
        # (pyarrow asks for pandas, which the program hides: the refused import is listed,
        # and would be followed by its submodules had it been imported)
        assert not any(name.startswith("pandas.") for name in imported), verb
