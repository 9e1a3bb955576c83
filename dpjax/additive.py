"""Additive noise mechanisms: the Laplace and Gaussian mechanisms.

* Laplace mechanism (Dwork, McSherry, Nissim, Smith 2006): ``value + Lap(sensitivity/epsilon)`` is
  epsilon-DP when ``value`` has L1 sensitivity ``sensitivity`` under the chosen neighboring relation.
* Gaussian mechanism (Bun and Steinke 2016, Prop. 1.6): ``value + N(0, sigma^2)`` is
  ``sensitivity^2 / (2 sigma^2)``-zCDP when ``value`` has L2 sensitivity ``sensitivity``.

They are the reference points of the library (known exact privacy loss, used by the audit tests)
and the last step of composite mechanisms such as the DP sum.

Exact mechanisms on integer queries (no floating point on the release path, for releases):

* discrete Laplace (geometric) mechanism: ``value + DLap(sensitivity/epsilon)``, pure epsilon-DP;
* discrete Gaussian mechanism (Canonne, Kamath and Steinke 2020): ``value + N_Z(0, sigma^2)``,
  ``sensitivity^2/(2 sigma^2)``-zCDP (Thm. 4), with the exact (epsilon, delta) curve of Thm. 7.
"""

from dpjax._src.additive import (
    discrete_gaussian_approx_dp,
    discrete_gaussian_delta,
    discrete_gaussian_guarantee,
    discrete_gaussian_mechanism,
    discrete_gaussian_sigma,
    discrete_laplace_guarantee,
    discrete_laplace_mechanism,
    gaussian_guarantee,
    gaussian_mechanism,
    gaussian_sigma_for_zcdp,
    laplace_guarantee,
    laplace_mechanism,
)

__all__ = [
    "discrete_gaussian_approx_dp",
    "discrete_gaussian_delta",
    "discrete_gaussian_guarantee",
    "discrete_gaussian_mechanism",
    "discrete_gaussian_sigma",
    "discrete_laplace_guarantee",
    "discrete_laplace_mechanism",
    "gaussian_guarantee",
    "gaussian_mechanism",
    "gaussian_sigma_for_zcdp",
    "laplace_guarantee",
    "laplace_mechanism",
]
