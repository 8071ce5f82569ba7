"""The statistics the paper quotes, as small functions tested against references.

Each is written out here (rather than called inline in the analysis) so that
it can be checked against a hand-computed value and a library reference:
Holm against ``statsmodels.stats.multitest.multipletests``, the exact
Mann-Whitney test against ``scipy.stats.mannwhitneyu(method="exact")``,
Clopper-Pearson against its closed form for 0 of n.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

import numpy as np
from scipy import stats as _stats


def coefficient_of_variation(values: Sequence[float]) -> float:
    """Sample standard deviation (ddof=1) over the mean; NaN for fewer than two values."""
    x = np.asarray(values, dtype=float)
    if x.size < 2:
        return float("nan")
    return float(np.std(x, ddof=1) / np.mean(x))


def holm(p_values: Sequence[float], alpha: float) -> tuple[np.ndarray, np.ndarray]:
    """Holm's step-down correction: (reject, adjusted p) in the input order.

    Adjusted p_(i) = max_{j<=i} min(1, (m - j + 1) p_(j)) over the sorted p-values.
    """
    p = np.asarray(p_values, dtype=float)
    m = p.size
    order = np.argsort(p, kind="stable")
    scaled = (m - np.arange(m)) * p[order]
    adjusted_sorted = np.minimum(1.0, np.maximum.accumulate(scaled))
    adjusted = np.empty(m)
    adjusted[order] = adjusted_sorted
    return adjusted <= alpha, adjusted


def mann_whitney_exact(x: Sequence[float], y: Sequence[float]) -> float:
    """Two-sided p-value of the exact Mann-Whitney U test (no normal approximation)."""
    return float(_stats.mannwhitneyu(x, y, alternative="two-sided", method="exact").pvalue)


def smallest_exact_p(n_x: int, n_y: int) -> float:
    """The smallest two-sided exact Mann-Whitney p-value two samples of these sizes can reach.

    Complete separation has one arrangement in C(n_x + n_y, n_x) at each tail.
    """
    from math import comb

    return 2.0 / comb(n_x + n_y, n_x)


def vargha_delaney_a12(x: Sequence[float], y: Sequence[float]) -> float:
    """P(X > Y) + P(X = Y) / 2 over all pairs: 0.5 is no effect, 1 or 0 complete separation."""
    xs = np.asarray(x, dtype=float)[:, None]
    ys = np.asarray(y, dtype=float)[None, :]
    return float(((xs > ys).sum() + 0.5 * (xs == ys).sum()) / (xs.size * ys.size))


def cliffs_delta(x: Sequence[float], y: Sequence[float]) -> float:
    """P(X > Y) - P(X < Y) = 2 A12 - 1."""
    return 2.0 * vargha_delaney_a12(x, y) - 1.0


def clopper_pearson_upper(successes: int, trials: int, confidence: float) -> float:
    """Exact one-sided upper confidence bound on a binomial proportion.

    For 0 of n it is 1 - (1 - confidence) ** (1 / n).
    """
    if trials <= 0:
        raise ValueError("a proportion needs at least one trial")
    if successes >= trials:
        return 1.0
    return float(_stats.beta.ppf(confidence, successes + 1, trials - successes))


def clopper_pearson_interval(successes: int, trials: int, confidence: float) -> tuple[float, float]:
    """Exact two-sided (Clopper-Pearson) confidence interval on a binomial proportion: each
    tail holds (1 - confidence) / 2; the lower end is 0 for 0 successes, the upper 1 for n."""
    if trials <= 0:
        raise ValueError("a proportion needs at least one trial")
    tail = (1.0 - confidence) / 2.0
    low = 0.0 if successes <= 0 else float(_stats.beta.ppf(tail, successes, trials - successes + 1))
    high = 1.0 if successes >= trials else float(_stats.beta.ppf(1.0 - tail, successes + 1,
                                                                   trials - successes))
    return low, high


def spearman(x: Sequence[float], y: Sequence[float]) -> float:
    """Spearman's rank correlation (scipy), NaN when either side is constant."""
    xs, ys = np.asarray(x, dtype=float), np.asarray(y, dtype=float)
    if xs.size < 3 or np.all(xs == xs[0]) or np.all(ys == ys[0]):
        return float("nan")
    return float(_stats.spearmanr(xs, ys).statistic)


def bootstrap_interval(statistic: Callable[..., np.ndarray], samples: Sequence[Sequence[float]], *,
                       seed: int, n_resamples: int,
                       confidence: float) -> tuple[float, float]:
    """Percentile bootstrap interval of a statistic, resampling each sample on its own.

    `statistic` is vectorised: it receives one array per sample, each of shape
    (n_resamples, sample size), and returns n_resamples values.  Seeded, so the
    paper's intervals are the same on every build; the resamples and confidence are the
    specification's ([analysis], through `Design`).
    """
    rng = np.random.default_rng(seed)
    resampled = []
    for s in samples:
        a = np.asarray(s, dtype=float)
        resampled.append(a[rng.integers(0, a.size, (n_resamples, a.size))])
    draws = np.asarray(statistic(*resampled), dtype=float)
    tail = (1.0 - confidence) / 2.0 * 100.0
    low, high = np.percentile(draws, [tail, 100.0 - tail])
    return float(low), float(high)


def a12_batch(x: np.ndarray, y: np.ndarray) -> np.ndarray:
    """`vargha_delaney_a12` over a leading batch axis (for `bootstrap_interval`)."""
    gt = (x[:, :, None] > y[:, None, :]).sum(axis=(1, 2))
    eq = (x[:, :, None] == y[:, None, :]).sum(axis=(1, 2))
    return (gt + 0.5 * eq) / (x.shape[1] * y.shape[1])
