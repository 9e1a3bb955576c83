"""The mechanism registry covers every public mechanism."""

import inspect

from mechanism_registry import all_mechanisms

import dpjax

FAMILIES = ("additive", "selection", "svt", "quantiles", "aggregates", "topk", "budgeting")
# Key-first public functions that are not mechanisms over data.
NOT_MECHANISMS = {
    "budgeting.user_noise",  # the per-user noise generator PIE draws from (a sampler)
    # A host-side driver: authorizes and settles each query on a float64 PerUserLedger; it has no
    # traceable parameter (its mechanisms, pie_ni and pie_k, are registered).
    "budgeting.run_multi_query",
    # Exact integer mechanisms (release mode): their privacy parameters are host-side exact rationals,
    # never traced, so the registry's traced-parameter tests do not apply; tests/exact/test_exact_*.py
    # check their laws, guarantees, audits and bad input.
    "additive.discrete_laplace_mechanism",
    "additive.discrete_gaussian_mechanism",
    "selection.discrete_report_noisy_max",
    "selection.discrete_peeling_top_k",
    "svt.discrete_above_threshold",
}


def _public_key_first_functions():
    names = set()
    for family in FAMILIES:
        module = getattr(dpjax, family)
        for name in getattr(module, "__all__", [n for n in dir(module) if not n.startswith("_")]):
            obj = getattr(module, name)
            if not inspect.isfunction(obj):
                continue
            parameters = list(inspect.signature(obj).parameters)
            if parameters and parameters[0] == "key":
                names.add(f"{family}.{name}")
    return names - NOT_MECHANISMS


def test_every_public_mechanism_is_registered():
    registered = {m.name for m in all_mechanisms()}
    assert len(registered) == len(all_mechanisms()), "duplicate registry names"
    missing = _public_key_first_functions() - registered
    assert not missing, f"mechanisms missing from tests/mechanism_registry: {sorted(missing)}"
