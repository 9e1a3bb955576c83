"""One ledger for several processes: a ``multiprocessing`` manager that serves the ledgers.

A ledger cannot be copied, pickled or used from a forked child (:mod:`dpjax._src.accounting.ledger`): two
copies of a budget could each be spent in full. When several processes release, one process owns
each ledger and the others ask it. :class:`LedgerManager` is that owner: a
``multiprocessing.managers.BaseManager`` whose server process holds the ledgers, and whose proxies
(picklable: pass them to ``ProcessPoolExecutor`` workers or ``multiprocessing.Process`` targets)
send every call to it. The ledger's lock is taken in the server, so spends and reservations from any
number of processes are checked and recorded atomically, exactly as from threads.

Proxies forward the public methods (``spend``, ``can_spend``, ``reserve``, ``epsilon``, ...) and read
the properties (``remaining``, ``spent``, ``history``, ...) by attribute; ``reserve`` returns a proxy
of the reservation, which lives in the server: ``settle``, ``cancel`` and the ``with`` block work as
locally (leaving the block unsettled charges the worst case).
"""

from __future__ import annotations

import types
from multiprocessing.managers import BaseManager, BaseProxy

from dpjax._src.accounting.accountant import Accountant
from dpjax._src.accounting.ledger import Ledger
from dpjax._src.accounting.pay_what_you_get import PayWhatYouGet
from dpjax._src.accounting.per_user import PerUserLedger

__all__ = ["LedgerManager"]


class _ServedProxy(BaseProxy):
    """A proxy that also works where it was unpickled (a worker process): there it has no manager,
    whose registry ``BaseProxy`` reads to build the proxy of a returned reservation."""

    # set by BaseProxy.__init__ (typeshed omits it); in a worker, the stand-in registry _REGISTRY
    _manager: BaseManager | types.SimpleNamespace | None

    def _callmethod(self, methodname, args=(), kwds={}):  # noqa: B006 (BaseProxy's signature)
        if self._manager is None:
            self._manager = _REGISTRY
        return super()._callmethod(methodname, args, kwds)


class _ReservationProxy(_ServedProxy):
    """A reservation held in the manager's server: settle or cancel it there."""

    _exposed_ = ("settle", "cancel", "__exit__", "__getattribute__")

    def settle(self, *used):
        return self._callmethod("settle", used)

    def cancel(self) -> None:
        return self._callmethod("cancel")

    def __getattr__(self, name):  # worst_case, label, settled, k, r, ...
        if name.startswith("_"):
            raise AttributeError(name)
        return self._callmethod("__getattribute__", (name,))

    def __enter__(self) -> _ReservationProxy:
        return self

    def __exit__(self, exc_type, exc, traceback) -> None:
        self._callmethod("__exit__", (None, None, None))  # charges the worst case if still open


class _Method:
    """A ledger method called in the manager's server; picklable (``pool.submit(acct.spend, g)``)."""

    def __init__(self, proxy: BaseProxy, name: str):
        self._proxy, self._name = proxy, name

    def __call__(self, *args, **kwargs):
        return self._proxy._callmethod(self._name, args, kwargs)


def _proxy_type(ledger: type[Ledger]) -> type[BaseProxy]:
    """A proxy forwarding ``ledger``'s public methods and reading its other attributes."""
    methods = frozenset(
        name for name in dir(ledger) if not name.startswith("_") and callable(getattr(ledger, name))
    )

    def __getattr__(self, name):
        if name.startswith("_"):
            raise AttributeError(name)
        if name in methods:
            return _Method(self, name)
        return self._callmethod("__getattribute__", (name,))

    namespace = {
        "_exposed_": (*sorted(methods), "__getattribute__"),
        "_method_to_typeid_": {"reserve": "Reservation"},
        "__getattr__": __getattr__,
        "__doc__": f"A {ledger.__name__} held in the manager's server.",
        "__module__": __name__,
    }
    return type(f"_{ledger.__name__}Proxy", (_ServedProxy,), namespace)


_AccountantProxy = _proxy_type(Accountant)  # module attributes, so that the proxies pickle
_PayWhatYouGetProxy = _proxy_type(PayWhatYouGet)
_PerUserLedgerProxy = _proxy_type(PerUserLedger)


class LedgerManager(BaseManager):
    """Serves ledgers from one process (the manager's server) to every other process.

    ``manager.Accountant(budget)``, ``manager.PayWhatYouGet(...)`` and ``manager.PerUserLedger(...)``
    create the ledger in the server and return a picklable proxy (see the module docstring). Start
    the manager (``with LedgerManager() as manager:`` or ``manager.start()``) before creating
    ledgers. Give it (and a ``ProcessPoolExecutor``, ``mp_context=``) a ``"forkserver"`` or ``"spawn"``
    context: without one the server starts by the default method, ``fork`` on Linux before Python
    3.14, which copies a process whose JAX threads may deadlock the copy (JAX warns of it).

    Example:
      >>> import multiprocessing
      >>> from dpjax.accounting import PureDP
      >>> ctx = multiprocessing.get_context("forkserver")  # never fork a process that runs JAX
      >>> with LedgerManager(ctx=ctx) as manager:
      ...     acct = manager.Accountant(PureDP(1.0))
      ...     acct.spend(PureDP(0.25), "from any process")
      ...     acct.remaining
      PureDP(epsilon=0.75)
    """


LedgerManager.register("Accountant", Accountant, proxytype=_AccountantProxy)
LedgerManager.register("PayWhatYouGet", PayWhatYouGet, proxytype=_PayWhatYouGetProxy)
LedgerManager.register("PerUserLedger", PerUserLedger, proxytype=_PerUserLedgerProxy)
LedgerManager.register("Reservation", proxytype=_ReservationProxy, create_method=False)
# BaseManager.register keeps the typeids in the class attribute _registry, which typeshed omits.
_REGISTRY = types.SimpleNamespace(_registry=LedgerManager._registry, _state=None)  # type: ignore[attr-defined]
