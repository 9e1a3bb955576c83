"""Privacy guarantees, their composition and conversions, the neighboring relation, and the budget
keepers (Accountant, PayWhatYouGet, PerUserLedger) with their shared reserve/settle protocol."""

from dpjax._src.accounting.accountant import Accountant, Spend
from dpjax._src.accounting.bounded_range import (
    composition_delta,
    composition_epsilon,
    optimal_composition_epsilon,
)
from dpjax._src.accounting.composition import compose
from dpjax._src.accounting.conversions import bun_steinke_epsilon, zcdp_delta, zcdp_epsilon
from dpjax._src.accounting.guarantees import ZCDP, ApproxDP, Guarantee, PureDP, RangeBounded
from dpjax._src.accounting.ledger import BudgetExceededError, Ledger, Reservation
from dpjax._src.accounting.manager import LedgerManager
from dpjax._src.accounting.neighbors import Neighbors, NeighborsLike
from dpjax._src.accounting.pay_what_you_get import (
    Charge,
    PayWhatYouGet,
    Ticket,
    advanced_composition_epsilon,
    calibrate_epsilon,
    epsilon_star,
    optimal_composition,
    pay_what_you_get_guarantee,
)
from dpjax._src.accounting.per_user import (
    Grant,
    LedgerEntry,
    PerUserLedger,
    approx_gp_epsilon,
    approx_gp_rho_star,
)
from dpjax._src.accounting.tightest import pure_dp_rdp, range_bounded_rdp, rdp_epsilon

__all__ = [
    "ZCDP",
    "Accountant",
    "ApproxDP",
    "BudgetExceededError",
    "Charge",
    "Grant",
    "Guarantee",
    "Ledger",
    "LedgerEntry",
    "LedgerManager",
    "Neighbors",
    "NeighborsLike",
    "PayWhatYouGet",
    "PerUserLedger",
    "PureDP",
    "RangeBounded",
    "Reservation",
    "Spend",
    "Ticket",
    "advanced_composition_epsilon",
    "approx_gp_epsilon",
    "approx_gp_rho_star",
    "bun_steinke_epsilon",
    "calibrate_epsilon",
    "compose",
    "composition_delta",
    "composition_epsilon",
    "epsilon_star",
    "optimal_composition",
    "optimal_composition_epsilon",
    "pay_what_you_get_guarantee",
    "pure_dp_rdp",
    "range_bounded_rdp",
    "rdp_epsilon",
    "zcdp_delta",
    "zcdp_epsilon",
]
