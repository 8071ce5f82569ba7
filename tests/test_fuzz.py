"""A short, bounded fuzz run over the readers (issues 16, 27) and the writers (issue 38); the long
one is scripts/fuzz.py."""

from __future__ import annotations

import pytest
from hypothesis import HealthCheck, given, settings, strategies as st

from fuzz_outputs import TARGETS

#: Examples per reader in CI: a few seconds each on one core.
CI_EXAMPLES = {"csv tables": 40, "descriptor": 40, "run directories": 40, "protocol": 300,
               "codecarbon logs": 20, "legacy sources": 20, "greenlight records": 40,
               "file types": 30, "schema constraints": 40, "outputs over inputs": 15,
               "hostile outputs": 6, "file names": 15}


@pytest.mark.parametrize("reader", list(TARGETS))
def test_no_input_makes_a_reader_raise(reader):
    @settings(max_examples=CI_EXAMPLES[reader], deadline=None, derandomize=True, database=None,
              suppress_health_check=list(HealthCheck))
    @given(st.data())
    def fuzz(data):
        TARGETS[reader](data.draw)

    fuzz()
