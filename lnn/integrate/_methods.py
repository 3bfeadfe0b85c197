"""The one table of integration methods: each method's name, backend and properties.

=============  ==============  ====================================================  ====================
backend        methods         how                                                   doors
=============  ==============  ====================================================  ====================
``scipy``      RK23, RK45,     :func:`scipy.integrate.solve_ivp`'s solvers stepped   :func:`lnn.rollout`
               DOP853, Radau,  over the stacked batch (numpy; any system)
               BDF, LSODA
``compiled``   tsit5, dopri5,  the embedded Runge–Kutta pairs of :mod:`lnn.solvers`  both
               dopri8,         (every registered one), compiled with XLA, every
               dopri853, ...   trajectory its own step (systems in TensorFlow)
``fixed-step`` rk4, verlet     one step per interval of ``t`` (or ``substeps``) in   both
                               a ``tf.scan`` (:mod:`lnn._schemes`), differentiable
=============  ==============  ====================================================  ====================

:func:`lnn.rollout` (numpy results) takes every method; :func:`lnn.odeint.odeint`
(tensors, differentiable) takes the compiled and fixed-step ones. The
compiled rows are read from the registry of :mod:`lnn.solvers` each time, so a
pair registered later (one file, :func:`lnn.solvers.register_tableau`) is a
method of both doors at once.

``method="auto"`` (:func:`lnn.rollout`'s default) is :func:`choose_method`:
the fastest path measured for the system, the batch and the tolerance.
"""

from __future__ import annotations

from dataclasses import dataclass

from lnn.solvers import tableau as solver_tableau
from lnn.solvers.tableau import names as solver_names
from lnn.system import compute_dtype

__all__ = ["AUTO", "AUTO_TABLE", "BACKENDS", "Method", "choose_method", "method", "method_names", "methods"]

#: ``method="auto"``: :func:`choose_method` picks the method.
AUTO = "auto"
#: The backends, in the order of the table.
BACKENDS = ("scipy", "compiled", "fixed-step")


@dataclass(frozen=True)
class Method:
    """One row of the table.

    Attributes
    ----------
    name : str
        What ``method=`` takes.
    backend : {"scipy", "compiled", "fixed-step"}
    order : int or None
        Order of the propagated solution (None: variable, BDF and LSODA).
    adaptive : bool
        Step sizes chosen by an error estimate (tolerances apply).
    implicit : bool
        Uses the Jacobian of the vector field (Radau, BDF, LSODA).
    summary : str
        One line for listings.
    """

    name: str
    backend: str
    order: int | None
    adaptive: bool
    implicit: bool = False
    summary: str = ""

    @property
    def differentiable(self) -> bool:
        """Served by :func:`lnn.odeint.odeint` (in TensorFlow, gradients through the solve)."""
        return self.backend != "scipy"


_SCIPY = (
    Method("RK23", "scipy", 3, True, summary="Bogacki–Shampine 3(2) (scipy)"),
    Method("RK45", "scipy", 5, True, summary="Dormand–Prince 5(4) (scipy)"),
    Method("DOP853", "scipy", 8, True, summary="Dormand–Prince 8(5,3) (scipy)"),
    Method("Radau", "scipy", 5, True, True, "implicit Runge–Kutta Radau IIA (scipy), for stiff systems"),
    Method("BDF", "scipy", None, True, True, "backward differentiation formulas (scipy), for stiff systems"),
    Method("LSODA", "scipy", None, True, True, "Adams/BDF switching (scipy's LSODA)"),
)
_FIXED_STEP = (
    Method("rk4", "fixed-step", 4, False, summary="classical Runge–Kutta, one step per interval (or substeps)"),
    Method("verlet", "fixed-step", 2, False, summary="Störmer–Verlet, symplectic: bounded energy error"),
)


def methods() -> dict[str, Method]:
    """The table: name -> :class:`Method`, scipy's methods, the registered compiled pairs, the fixed-step ones."""
    compiled = []
    for name in solver_names():
        tab = solver_tableau(name)
        compiled.append(Method(name, "compiled", tab.order, True, summary=f"embedded pair of order {tab.order}"))
    return {m.name: m for m in (*_SCIPY, *compiled, *_FIXED_STEP)}


def method_names(backend: str | None = None) -> tuple[str, ...]:
    """The names of the table (of one ``backend``), in its order."""
    return tuple(name for name, m in methods().items() if backend is None or m.backend == backend)


def method(name, *, door: str = "rollout") -> Method:
    """The row named ``name``, for the door ``"rollout"`` (every method) or ``"odeint"`` (not scipy's).

    Raises
    ------
    ValueError
        For a name that is not in the table, or a scipy method asked of ``odeint``
        (the message lists what the door takes).
    """
    table = methods()
    row = table.get(name) if isinstance(name, str) else None
    if row is None or (door == "odeint" and not row.differentiable):
        listing = "; ".join(
            f"{backend}: {', '.join(n for n, m in table.items() if m.backend == backend)}"
            for backend in BACKENDS
            if door == "rollout" or backend != "scipy"
        )
        extra = f", or {AUTO!r}" if door == "rollout" else ""
        raise ValueError(f"method must be one of {listing}{extra}; got {name!r}")
    return row


# ----------------------------------------------------------------------------- method="auto"

#: What ``method="auto"`` picks for a system that integrates in TensorFlow (a learned model), by
#: batch size and relative tolerance: ``(largest batch, tightest rtol, method)``, the first row
#: with ``B <= largest batch`` and ``rtol >= tightest rtol``. Measured with
#: ``benchmarks/bench_rollout.py --peer-only --peer-rtols 1e-4 1e-6 1e-8`` (learned 64x64 double
#: pendulum and 7-DOF chain, B = 1, 16, 256; the table of docs/how-to/choose-a-solver.md): at
#: rtol 1e-4 and 1e-6 Tsitouras' pair was the fastest or within 5 % of it in every cell (the
#: 8th-order dopri8 up to 1.38x slower at 1e-4, 1.13x at 1e-6); at 1e-8 dopri8 was 1.26-1.43x
#: faster than tsit5 in every cell measured (the chain at B = 1 only). The batch size did not
#: change the order.
AUTO_TABLE: tuple[tuple[float, float, str], ...] = (
    (float("inf"), 1e-6, "tsit5"),
    (float("inf"), 0.0, "dopri8"),
)


def choose_method(system, *, tau=None, batch: int = 1, rtol: float | None = None) -> str:
    """The method of ``rollout(..., method="auto")``: the fastest path measured for the system.

    A system that integrates in TensorFlow (a learned model: it has a
    ``numpy_snapshot``) gets a compiled pair from :data:`AUTO_TABLE` by
    ``batch`` and ``rtol`` (Tsitouras' 5th-order pair at ``rtol >= 1e-6``,
    the 8th-order ``dopri8`` at tighter tolerances, among them the float64
    default 1e-8); a float32 model is integrated with a float64 state and
    right-hand side (its float64 twin), as scipy's methods do. ``"DOP853"`` (scipy)
    otherwise: for numpy systems (ground truth) and for a controller
    ``tau(t, q, qd)`` (the compiled pairs take sampled forces only).

    Parameters
    ----------
    system : MechanicalSystem
    tau : None, array_like or callable, optional, keyword-only
        The ``tau`` that :func:`lnn.rollout` gets.
    batch : int, keyword-only
        The number of trajectories ``B``.
    rtol : float, optional, keyword-only
        The relative tolerance (default: :func:`default_tolerances`' for the system).

    Returns
    -------
    str
        A name of the table.
    """
    learned = callable(getattr(system, "numpy_snapshot", None))
    if not learned or callable(tau):
        return "DOP853"
    if rtol is None:
        rtol = 1e-6 if compute_dtype(system) == "float32" else 1e-8
    for largest, tightest, name in AUTO_TABLE:
        if batch <= largest and rtol >= tightest:
            return name
    return AUTO_TABLE[-1][2]
