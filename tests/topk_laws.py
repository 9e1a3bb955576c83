"""Closed-form output laws of the top-k mechanisms (Durfee and Rogers 2019), for the audits and
the chi-square tests, written independently of the kernels (plain Python, float64).

* Algorithms 1 and 5 by the peeling formulation (Alg. 3, Lemma 5.4): with ``w_i = exp(eps h_i)`` over
  the limited domain and ``w_bot = exp(eps h_bot)``, ``P[(o_1..o_j, ⊥)] = prod_t w_{o_t}/W_t *
  w_bot/W_{j+1}`` and ``P[(o_1..o_k)] = prod_t w_{o_t}/W_t``.
* Algorithm 6: an exponential mechanism over kbar, then Algorithm 1.
* Algorithm 8: independent per-item Laplace threshold crossings.

An outcome of Algorithms 1/5 is a tuple of item ids, ending with ``BOTTOM`` when ⊥ was returned.
"""

import itertools
import math

BOTTOM = -1


def ranked(counts, size):
    """Items by (count desc, id asc), padded with zero-count ids d, d+1, ... to ``size``."""
    items = [(c, i) for i, c in enumerate(counts)]
    items += [(0, len(counts) + j) for j in range(max(0, size - len(counts)))]
    return sorted(items, key=lambda t: (-t[0], t[1]))


def peeling_law(log_weights, log_bottom, k):
    """The peeling EM with ⊥ over ``{item: log weight}``; returns ``{outcome: probability}``."""
    law = {}

    def step(prefix, remaining, prob):
        scale = max([log_bottom, *(log_weights[i] for i in remaining)])
        w_bottom = math.exp(log_bottom - scale)
        weights = {i: math.exp(log_weights[i] - scale) for i in remaining}
        total = w_bottom + sum(weights.values())
        law[(*prefix, BOTTOM)] = law.get((*prefix, BOTTOM), 0.0) + prob * w_bottom / total
        for i, w in weights.items():
            if len(prefix) + 1 == k:
                law[(*prefix, i)] = prob * w / total
            else:
                step((*prefix, i), remaining - {i}, prob * w / total)

    step((), frozenset(log_weights), 1.0)
    return law


def limited_domain_law(counts, k, kbar, eps, delta, *, max_contributions=None, strict=False, plus=1.0):
    """Algorithm 1 (``strict=False``) or 5; ``plus`` is the threshold's "+1" (0 for the mutant)."""
    order = ranked(counts, kbar + 1)
    h_next = order[kbar][0]
    domain = [(c, i) for c, i in order[:kbar] if not strict or c > h_next]
    m = kbar if (strict or max_contributions is None) else min(max_contributions, kbar)
    log_weights = {i: eps * (c - h_next) for c, i in domain}
    return peeling_law(log_weights, eps * plus + math.log(m / delta), k)


def private_kbar_law(counts, k, kbar_max, eps, delta, *, max_contributions=None):
    """Algorithm 6: outcomes ``(kbar, ld_outcome)``."""
    order = ranked(counts, kbar_max + 1)
    sizes = range(k, kbar_max + 1)
    m = {j: j if max_contributions is None else min(max_contributions, j) for j in sizes}
    logits = {j: -eps * order[j][0] - math.log(m[j] / delta) for j in sizes}
    top = max(logits.values())
    norm = sum(math.exp(v - top) for v in logits.values())
    law = {}
    for j in sizes:
        p_j = math.exp(logits[j] - top) / norm
        inner = limited_domain_law(counts, k, j, eps, delta, max_contributions=max_contributions)
        for o, p in inner.items():
            law[(j, o)] = p_j * p
    return law


def fixed_threshold_law(counts, kbar, eps, delta, *, plus=1.0):
    """Algorithm 8: outcomes are frozensets of item ids."""
    order = ranked(counts, kbar + 1)
    h_next = order[kbar][0]
    tau = eps * plus + math.log(kbar / (2 * delta))  # eps * (tau - h_next)
    probs = {}
    for c, i in order[:kbar]:
        if c > h_next:
            x = tau - eps * (c - h_next)
            probs[i] = 0.5 * math.exp(-x) if x >= 0 else 1 - 0.5 * math.exp(x)
    law = {}
    items = sorted(probs)
    for bits in itertools.product((False, True), repeat=len(items)):
        p = math.prod(probs[i] if b else 1 - probs[i] for i, b in zip(items, bits, strict=True))
        law[frozenset(i for i, b in zip(items, bits, strict=True) if b)] = p
    return law


def hockey_stick(p, q, eps):
    """``sum_o max(0, P(o) - e^eps Q(o))``."""
    factor = math.exp(eps)
    return sum(max(0.0, v - factor * q.get(o, 0.0)) for o, v in p.items())


def neighbor_pairs(d, max_contributions=None, values=range(3)):
    """Every h in values^d with every h + 1_U, 1 <= |U| <= Delta."""
    cap = d if max_contributions is None else max_contributions
    for h in itertools.product(values, repeat=d):
        for size in range(1, cap + 1):
            for users_items in itertools.combinations(range(d), size):
                yield list(h), [c + (i in users_items) for i, c in enumerate(h)]
