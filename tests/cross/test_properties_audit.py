"""Property tests of the audit's Clopper–Pearson bounds (hypothesis).

Every example evaluates all counts ``k = 0..n`` of one ``n <= 31`` in one call, padded to 64 entries
(:func:`dpjax.audit.binomial.clopper_pearson` pads to a power of two of at least 64), so the bounds
compile once for the whole file, with every XLA pass (``optimized``, tests/conftest.py:
the 80 bisections of ``betainc`` run 30x slower compiled without them).
"""

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from scipy import stats

from dpjax._src.audit.binomial import clopper_pearson

pytestmark = pytest.mark.optimized
CHEAP = settings(max_examples=25, deadline=None, derandomize=True)
TRIALS = st.integers(1, 31)
LEVEL = st.floats(1e-9, 0.4)


@CHEAP
@given(TRIALS, LEVEL, LEVEL)
def test_clopper_pearson_bounds_contain_the_mle_and_widen_with_confidence(n, level_a, level_b):
    """lower <= k/n <= upper, 0 only at k = 0 and 1 only at k = n, increasing in k, and a smaller
    level (more confidence) never narrows them."""
    small, large = sorted((level_a, level_b))
    k = np.arange(n + 1)
    lower, upper = clopper_pearson(np.tile(k, 2), n, np.repeat([small, large], n + 1))
    (wide_low, low), (wide_up, up) = lower.reshape(2, -1), upper.reshape(2, -1)
    assert np.all((0 <= low) & (low <= k / n) & (k / n <= up) & (up <= 1))
    assert np.array_equal(low == 0, k == 0) and np.array_equal(up == 1, k == n)
    assert np.all(np.diff(low) > 0) and np.all(np.diff(up) > 0)
    assert np.all(wide_low <= low) and np.all(wide_up >= up)


@CHEAP
@given(TRIALS, LEVEL)
def test_clopper_pearson_lower_bound_is_the_beta_quantile(n, level):
    k = np.arange(1, n + 1)
    lower, _ = clopper_pearson(k, n, level)
    np.testing.assert_allclose(lower, stats.beta.ppf(level, k, n - k + 1), rtol=1e-8, atol=1e-15)
