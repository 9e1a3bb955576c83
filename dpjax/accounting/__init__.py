"""Privacy guarantees, their composition and conversions, the neighboring relation, and the budget
keepers (Accountant, PayWhatYouGet, PerUserLedger) with their shared reserve/settle protocol."""

from dpjax.accounting.accountant import Accountant, Spend
from dpjax.accounting.bounded_range import optimal_composition_epsilon
from dpjax.accounting.composition import compose
from dpjax.accounting.conversions import bun_steinke_epsilon, zcdp_delta, zcdp_epsilon
from dpjax.accounting.guarantees import ZCDP, ApproxDP, Guarantee, PureDP, RangeBounded
from dpjax.accounting.ledger import BudgetExceededError, Ledger, Reservation
from dpjax.accounting.manager import LedgerManager
from dpjax.accounting.neighbors import Neighbors, NeighborsLike
from dpjax.accounting.pay_what_you_get import PayWhatYouGet
from dpjax.accounting.per_user import PerUserLedger

__all__ = [
    "ZCDP",
    "Accountant",
    "ApproxDP",
    "BudgetExceededError",
    "Guarantee",
    "Ledger",
    "LedgerManager",
    "Neighbors",
    "NeighborsLike",
    "PayWhatYouGet",
    "PerUserLedger",
    "PureDP",
    "RangeBounded",
    "Reservation",
    "Spend",
    "bun_steinke_epsilon",
    "compose",
    "optimal_composition_epsilon",
    "zcdp_delta",
    "zcdp_epsilon",
]
