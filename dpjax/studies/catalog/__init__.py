"""Study definitions, one module per mechanism family; imported by ``registry.studies()``.

Every catalog study sweeps the total privacy parameter over ``EPSILONS`` by default (``dpjax study
--epsilon`` replaces it) and states, per metric, what it measures and in which unit.
"""

__all__: list[str] = []

_EPSILONS = (0.25, 1.0, 4.0)
