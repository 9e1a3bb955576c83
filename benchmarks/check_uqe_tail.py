"""The tail of UQE's halting index (Durfee 2023, Alg. 2 with Exponential noise): dpjax against the law.

Past the data maximum every count is n, so with threshold ``T = q n`` the search halts at each later
candidate with probability ``p(E) = P(Exp(1/epsilon2) >= E - (n - q n))`` given the threshold noise
``E ~ Exp(1/epsilon1)``: ``P(k >= k_max + s) ~ E_E[(1 - p(E))^s]`` for large s (the halts before the
maximum matter only for small E). Because the release is ``beta^k - 1``, this tail is what makes
Table 1's DP sum heavy-tailed at small epsilon. The script draws ``releases`` halting indices with
:func:`dpjax.quantiles.unbounded_result` on one sample of 1000 Adult ages (jittered as in §6.3) at
q = 0.99, beta = 1.001, epsilon = 0.1 (epsilon1 = epsilon2 = 0.05, Table 1's eps = 0.1 row) and
prints the empirical tail beside the integral of the law. Run from the repository root:

    python -m benchmarks.check_uqe_tail --data-dir ../shared/data [--releases 2000000]
"""

from __future__ import annotations

import argparse
from pathlib import Path

import jax
import jax.numpy as jnp
import numpy as np
from scipy import integrate

from dpjax._src.numerics import ceil_div
from dpjax._src.quantiles.unbounded import unbounded_result
from dpjax._src.tools import papers as data

EPSILON, BETA, Q, N = 0.1, 1.001, 0.99, 1000


def law_tail(s: int) -> float:
    """``E_E[(1 - p(E))^s]`` with ``E ~ Exp(1/epsilon1)``, ``p(E) = min(1, exp(-epsilon2 (E - gap)))``."""
    e1 = e2 = EPSILON / 2
    gap = N - Q * N

    def density(e):
        return e1 * np.exp(-e1 * e) * (1 - min(1.0, np.exp(-e2 * (e - gap)))) ** s

    return integrate.quad(density, gap, 2000, limit=500, points=[gap + 50, gap + 150, gap + 300])[0]


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--data-dir", type=Path, default=None, help="adult.data and adult.test")
    parser.add_argument("--releases", type=int, default=2_000_000)
    args = parser.parse_args(argv)
    ages = data.real_columns(args.data_dir)[0]["ages"]
    rng = np.random.default_rng(0)
    x = jnp.asarray(ages[rng.choice(ages.size, N, replace=False)] + rng.normal(0, 0.1, N), jnp.float32)
    k_max = int(np.ceil(np.log(float(x.max()) + 1) / np.log(BETA)))
    index = jax.jit(jax.vmap(lambda k: unbounded_result(k, x, q=Q, epsilon=EPSILON, beta=BETA).index))
    batches = ceil_div(args.releases, 200_000)
    keys = (jax.random.split(jax.random.key(i), 200_000) for i in range(batches))
    ks = np.concatenate([np.asarray(index(batch)) for batch in keys])
    print(f"{ks.size} releases, q={Q}, beta={BETA}, epsilon={EPSILON}; data maximum at k_max = {k_max}")
    print("| s | P(k >= k_max + s), dpjax | releases | the law |")
    print("|---|---|---|---|")
    for s in (2000, 5000, 10_000, 20_000):
        hits = int(np.sum(ks >= k_max + s))
        print(f"| {s} | {hits / ks.size:.2e} | {hits} | {law_tail(s):.2e} |", flush=True)


if __name__ == "__main__":
    main()
