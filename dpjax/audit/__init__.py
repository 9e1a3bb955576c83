"""Statistical privacy auditing of any mechanism (StatDP / dp_auditorium style), vmapped.

* :func:`audit` runs a mechanism on two neighbors, searches output events on one half of the runs
  and bounds the privacy loss from below on the other half (Clopper–Pearson, Bonferroni).
* :mod:`dpjax._src.audit.neighbors`: neighbor generators and the papers' worst-case pairs.
* :mod:`dpjax._src.audit.reference`: mechanisms with exactly known loss (randomized response, SVT).

The deliberately broken mechanisms the audit must refute (negative controls) are test helpers, in
``tests/negative_controls.py``.
"""

from dpjax._src.audit import neighbors, reference
from dpjax._src.audit.binomial import clopper_pearson, loss_p_value, loss_statistics, privacy_loss_lower_bound
from dpjax._src.audit.events import Candidates, Event, candidate_events, features
from dpjax._src.audit.procedure import DEFAULT_ALPHA, DEFAULT_TRIALS, AuditResult, TestedEvent, audit

__all__ = [
    "DEFAULT_ALPHA",
    "DEFAULT_TRIALS",
    "AuditResult",
    "Candidates",
    "Event",
    "TestedEvent",
    "audit",
    "candidate_events",
    "clopper_pearson",
    "features",
    "loss_p_value",
    "loss_statistics",
    "neighbors",
    "privacy_loss_lower_bound",
    "reference",
]
