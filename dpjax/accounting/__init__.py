"""Privacy guarantees, their composition and conversions, and the budget-keeping Accountant."""

from dpjax.accounting.accountant import Accountant, BudgetExceededError, Reservation, Spend
from dpjax.accounting.composition import compose
from dpjax.accounting.conversions import bun_steinke_epsilon, zcdp_delta, zcdp_epsilon
from dpjax.accounting.guarantees import ZCDP, ApproxDP, Guarantee, PureDP, RangeBounded
from dpjax.accounting.pay_what_you_get import PayWhatYouGet as PayWhatYouGet
from dpjax.accounting.per_user import PerUserLedger

__all__ = [
    "ZCDP",
    "Accountant",
    "ApproxDP",
    "BudgetExceededError",
    "Guarantee",
    "PerUserLedger",
    "PureDP",
    "RangeBounded",
    "Reservation",
    "Spend",
    "bun_steinke_epsilon",
    "compose",
    "zcdp_delta",
    "zcdp_epsilon",
]
