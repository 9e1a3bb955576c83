"""Privacy guarantees, their composition and conversions, the neighboring relation, and the budget
keepers (Accountant, PayWhatYouGet, PerUserLedger) with their shared reserve/settle protocol."""

from dpjax._src.accounting.accountant import Accountant, Spend
from dpjax._src.accounting.bounded_range import optimal_composition_epsilon
from dpjax._src.accounting.composition import compose
from dpjax._src.accounting.conversions import bun_steinke_epsilon, zcdp_delta, zcdp_epsilon
from dpjax._src.accounting.guarantees import ZCDP, ApproxDP, Guarantee, PureDP, RangeBounded
from dpjax._src.accounting.ledger import BudgetExceededError, Ledger, Reservation
from dpjax._src.accounting.manager import LedgerManager
from dpjax._src.accounting.neighbors import Neighbors, NeighborsLike
from dpjax._src.accounting.pay_what_you_get import PayWhatYouGet
from dpjax._src.accounting.per_user import PerUserLedger

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
