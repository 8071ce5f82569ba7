"""The statistics against hand-computed values and library references."""

from __future__ import annotations

import numpy as np
import pytest
from scipy import stats as sps
from statsmodels.stats.multitest import multipletests
from statsmodels.stats.proportion import proportion_confint

from deepgreen_audit.analysis import stats


def test_holm_matches_hand_computation_and_statsmodels():
    reject, adjusted = stats.holm([0.01, 0.04, 0.03], alpha=0.05)
    # sorted: 0.01*3 = 0.03, 0.03*2 = 0.06, max(0.06, 0.04*1) = 0.06
    assert adjusted == pytest.approx([0.03, 0.06, 0.06])
    assert reject.tolist() == [True, False, False]
    p = np.random.default_rng(1).uniform(0, 0.2, 40) ** 2
    ref_reject, ref_adjusted, _, _ = multipletests(p, alpha=0.05, method="holm")
    reject, adjusted = stats.holm(p, 0.05)
    assert adjusted == pytest.approx(ref_adjusted)
    assert reject.tolist() == ref_reject.tolist()


def test_exact_mann_whitney_with_five_a_side():
    x, y = [1.0, 2.0, 3.0, 4.0, 5.0], [6.0, 7.0, 8.0, 9.0, 10.0]
    # complete separation: one arrangement of C(10, 5) = 252 at each tail
    assert stats.mann_whitney_exact(x, y) == pytest.approx(2 / 252)
    assert stats.smallest_exact_p(5, 5) == pytest.approx(2 / 252)
    rng = np.random.default_rng(7)
    for _ in range(20):
        a, b = rng.normal(0, 1, 5), rng.normal(0.5, 1, 5)
        ref = sps.mannwhitneyu(a, b, alternative="two-sided", method="exact").pvalue
        assert stats.mann_whitney_exact(a, b) == pytest.approx(ref)
    # interleaved ranks: U = 12.5 is not extreme at all
    assert stats.mann_whitney_exact([1, 3, 5, 7, 9], [2, 4, 6, 8, 10]) > 0.5


@pytest.mark.parametrize("n", [1, 5, 30, 210])
def test_clopper_pearson_upper_bound_for_zero_of_n(n):
    assert stats.clopper_pearson_upper(0, n, 0.95) == pytest.approx(1 - 0.05 ** (1 / n))


def test_clopper_pearson_upper_bound_matches_statsmodels():
    # a one-sided 95% upper bound is the upper end of the two-sided 90% interval
    for k, n in ((3, 20), (1, 210), (10, 10)):
        upper = proportion_confint(k, n, alpha=0.10, method="beta")[1]
        assert stats.clopper_pearson_upper(k, n, 0.95) == pytest.approx(upper)
    with pytest.raises(ValueError):
        stats.clopper_pearson_upper(0, 0, 0.95)


def test_coefficient_of_variation_uses_ddof_one():
    # sd (ddof=1) of 1..4 is sqrt(5/3); mean 2.5
    assert stats.coefficient_of_variation([1, 2, 3, 4]) == pytest.approx((5 / 3) ** 0.5 / 2.5)
    assert stats.coefficient_of_variation([1, 2, 3, 4]) != pytest.approx(
        np.std([1, 2, 3, 4]) / 2.5)
    assert np.isnan(stats.coefficient_of_variation([3.0]))


def test_spearman_against_scipy_and_by_hand():
    assert stats.spearman([1, 2, 3, 4], [10, 20, 30, 40]) == pytest.approx(1.0)
    assert stats.spearman([1, 2, 3, 4], [4, 3, 2, 1]) == pytest.approx(-1.0)
    # ranks (1,2,3,4) vs (1,3,2,4): 1 - 6*2/(4*15) = 0.8
    assert stats.spearman([1, 2, 3, 4], [1, 3, 2, 4]) == pytest.approx(0.8)
    rng = np.random.default_rng(3)
    x, y = rng.normal(size=30), rng.normal(size=30)
    assert stats.spearman(x, y) == pytest.approx(sps.spearmanr(x, y).statistic)
    assert np.isnan(stats.spearman([1, 1, 1], [1, 2, 3]))


def test_vargha_delaney_and_cliffs_delta_by_hand():
    # x=3 beats all three 2s, x=2 ties three times: (3 + 1.5) / 9
    assert stats.vargha_delaney_a12([1, 2, 3], [2, 2, 2]) == pytest.approx(0.5)
    assert stats.vargha_delaney_a12([5, 6], [1, 2]) == 1.0
    assert stats.vargha_delaney_a12([1, 2], [5, 6]) == 0.0
    assert stats.vargha_delaney_a12([1, 4], [2, 3]) == pytest.approx(0.5)
    assert stats.vargha_delaney_a12([3, 4], [1, 3.5]) == pytest.approx(3 / 4)
    assert stats.cliffs_delta([3, 4], [1, 3.5]) == pytest.approx(0.5)


def test_a12_batch_equals_the_scalar_version():
    rng = np.random.default_rng(5)
    x, y = rng.integers(0, 4, (50, 5)).astype(float), rng.integers(0, 4, (50, 6)).astype(float)
    assert stats.a12_batch(x, y) == pytest.approx(
        [stats.vargha_delaney_a12(a, b) for a, b in zip(x, y)])


def test_bootstrap_interval_is_seeded_and_brackets_the_estimate():
    rng = np.random.default_rng(11)
    x, y = rng.normal(0, 1, 5), rng.normal(1, 1, 5)
    first = stats.bootstrap_interval(stats.a12_batch, [x, y], seed=4, n_resamples=500, confidence=0.95)
    again = stats.bootstrap_interval(stats.a12_batch, [x, y], seed=4, n_resamples=500, confidence=0.95)
    assert first == again
    mean = lambda s: s.mean(axis=1)  # noqa: E731
    assert stats.bootstrap_interval(mean, [x], seed=4, n_resamples=500, confidence=0.95) != \
        stats.bootstrap_interval(mean, [x], seed=5, n_resamples=500, confidence=0.95)
    assert first[0] <= stats.vargha_delaney_a12(x, y) <= first[1]
    # the mean of a large sample: the interval is close to the normal one
    big = rng.normal(10, 2, 400)
    low, high = stats.bootstrap_interval(lambda s: s.mean(axis=1), [big], seed=1,
                                         n_resamples=2000, confidence=0.95)
    half = 1.96 * big.std(ddof=1) / 20
    assert low == pytest.approx(big.mean() - half, abs=0.05)
    assert high == pytest.approx(big.mean() + half, abs=0.05)


def test_host_spread_sets_within_host_beside_across_host_spread():
    import pandas as pd

    from deepgreen_audit.analysis.hosts import host_spread

    energies = {"a": [100.0, 102.0, 98.0], "b": [150.0, 153.0, 147.0]}     # host b costs 1.5x
    rows, env = [], []
    for host, values in energies.items():
        for i, value in enumerate(values):
            run_id = f"python-pytorch.resnet18.digits.{host}{i}"
            rows.append({"run_id": run_id, "ecosystem": "python-pytorch", "architecture": "resnet18",
                         "dataset": "digits", "phase": "train", "energy_j": value})
            env.append({"run_id": run_id, "host": f"node-{host}"})
    spread = host_spread(pd.DataFrame(rows), pd.DataFrame(env))
    (row,) = spread.to_dict("records")
    assert row["hosts"] == 2
    assert row["within_host_cv"] == pytest.approx(0.02)                  # 2/100 and 3/150
    assert row["across_host_cv"] == pytest.approx((150 - 100) / 2 ** 0.5 / 125)
    assert host_spread(pd.DataFrame(rows), pd.DataFrame(env).assign(host="one")) is None
