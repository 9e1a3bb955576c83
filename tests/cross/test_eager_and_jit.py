"""Closed forms that must hold both eagerly and under ``jit`` (chex variants).

A mechanism has two paths through its parameters: concrete values are validated on the host and may
pick host-side shortcuts, traced ones are checked in the graph (:class:`dpjax.validation.Checks`).
``@chex.variants(with_jit=True, without_jit=True)`` runs each test twice, with the release called
as is and under ``jax.jit`` with every parameter an argument (so traced), and each run checks an
answer known in closed form: the same answer whichever path. Tiny inputs, one release each.
"""

import chex
import jax
import jax.numpy as jnp
import numpy as np

from dpjax import selection, svt
from dpjax._src.additive import gaussian_mechanism, laplace_mechanism

KEY = jax.random.key(32)
BOTH = chex.variants(with_jit=True, without_jit=True)


class EagerAndJitTest(chex.TestCase):
    @BOTH
    def test_additive_noise_is_the_unit_draw_times_sensitivity_over_epsilon(self):
        """Same key, same standard draw: Laplace noise scales as sensitivity / epsilon, Gaussian as
        sigma (the scale convention of every additive release)."""
        laplace = self.variant(lambda v, e, s: laplace_mechanism(KEY, v, e, sensitivity=s))
        gaussian = self.variant(lambda v, sigma: gaussian_mechanism(KEY, v, sigma))
        value = jnp.asarray([3.0, -1.0], jnp.float32)
        unit_laplace, unit_gaussian = laplace(jnp.zeros(2), 1.0, 1.0), gaussian(jnp.zeros(2), 1.0)
        chex.assert_shape([unit_laplace, unit_gaussian], (2,))
        chex.assert_trees_all_close(laplace(value, 0.5, 2.0), value + 4.0 * unit_laplace, rtol=1e-6)
        chex.assert_trees_all_close(gaussian(value, 2.5), value + 2.5 * unit_gaussian, rtol=1e-6)

    @BOTH
    def test_selections_without_noise_are_the_true_ranking(self):
        """At epsilon 1e6 (noise scale ~1e-6 against score gaps of 1), every selection releases the
        true best candidates, and the gaps are the score differences."""
        scores = jnp.asarray([2.0, 7.0, 0.0, 5.0, 6.0], jnp.float32)

        @self.variant
        def release(scores, epsilon):
            return (
                selection.exponential_mechanism(KEY, scores, epsilon),
                selection.report_noisy_max(KEY, scores, epsilon),
                selection.gumbel_top_k(KEY, scores, 3, epsilon),
                selection.noisy_top_k_with_gap(KEY, scores, 2, epsilon),
            )

        best, noisy_max, top3, (top2, gaps) = release(scores, 1e6)
        expected = (1, 1, np.array([1, 4, 3]), np.array([1, 4]))
        chex.assert_trees_all_equal((best, noisy_max, top3, top2), expected)
        chex.assert_trees_all_close(gaps, jnp.asarray([1.0, 1.0]), rtol=1e-3)

    @BOTH
    def test_above_threshold_without_noise_is_the_first_query_above(self):
        queries = jnp.asarray([0.0, 4.0, 9.0, 12.0, 15.0], jnp.float32)
        release = self.variant(lambda q, t, e: svt.above_threshold(KEY, q, t, e, e))
        chex.assert_trees_all_equal(
            [release(queries, t, 1e6) for t in (-1.0, 5.0, 11.0, 20.0)], [0, 2, 3, -1]
        )

    @BOTH
    def test_a_bad_epsilon_never_gives_a_confident_answer(self):
        """Concrete: a ValueError naming the argument before any noise; traced: the NaN marker."""
        release = self.variant(lambda e: laplace_mechanism(KEY, jnp.zeros(2), e))
        for epsilon in (0.0, -1.0, np.nan, np.inf):
            if self.variant.type == chex.ChexVariantType.WITH_JIT:
                assert np.isnan(release(epsilon)).all()
            else:
                with self.assertRaisesRegex(ValueError, "epsilon must be"):
                    release(epsilon)
