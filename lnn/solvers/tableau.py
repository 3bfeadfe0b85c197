"""Butcher tableaus of embedded explicit Runge–Kutta pairs and their registry (numpy, no TensorFlow).

A :class:`Tableau` holds what the engine (:mod:`lnn.solvers`) needs to take a
step, estimate its error and interpolate inside it. A pair is one file: it
builds its tableau and registers it,

.. code-block:: python

    from lnn.solvers import Tableau, register_tableau

    TABLEAU = register_tableau(Tableau(name="heun2", order=2, error_order=1, ...))

after which ``lnn.rollout(..., method="heun2")`` and
``lnn.odeint.odeint(..., method="heun2")`` integrate with it (the method
table of :mod:`lnn.integrate` reads this registry). The built-in pairs
(:mod:`lnn.solvers.tsit5`, :mod:`lnn.solvers.dopri5`,
:mod:`lnn.solvers.dopri8`, :mod:`lnn.solvers.dopri853`) are registered when
:mod:`lnn.solvers` is imported.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

__all__ = ["REGISTRY", "Tableau", "names", "register_tableau", "tableau"]


@dataclass(frozen=True, eq=False)
class Tableau:
    """An embedded explicit Runge–Kutta pair with its dense output.

    Attributes
    ----------
    name : str
        The registry name (``"tsit5"``, ...).
    order : int
        Order of the propagated solution.
    error_order : int
        Order of the embedded error estimate: the step-size controller's
        exponents are ``1 / (error_order + 1)``.
    a : numpy.ndarray, shape ``(s, s)``
        Strictly lower triangular stage coefficients.
    b : numpy.ndarray, shape ``(s,)``
        Weights of the solution.
    c : numpy.ndarray, shape ``(s,)``
        Stage times (fractions of the step).
    fsal : bool
        The last stage is evaluated at the new solution ("first same as
        last"): it is the next step's first stage. Otherwise the derivative
        at the new solution is one more evaluation, appended to the stages.
    error : numpy.ndarray, shape ``(s or s + 1, k)``
        Columns of weights whose combinations of the stages, times ``h``,
        are the error estimates: one column (the difference of the two
        solutions, root-mean-square norm), or DOP853's two (``E5``, ``E3``,
        combined as Hairer's ``DOP853`` does).
    dense : numpy.ndarray
        ``"polynomial"`` dense output: ``P (s or s + 1, d)``, ``y(t0 + θ h) =
        y0 + h Σ_i k_i Σ_j P_ij θ^(j+1)``. ``"dop853"``: ``D (4, 16)``.
    dense_kind : {"polynomial", "dop853"}
    extra_a, extra_c : numpy.ndarray
        DOP853's three extra stages of its dense output (``(3, 16)``, ``(3,)``);
        empty otherwise.
    """

    name: str
    order: int
    error_order: int
    a: np.ndarray
    b: np.ndarray
    c: np.ndarray
    fsal: bool
    error: np.ndarray
    dense: np.ndarray
    dense_kind: str = "polynomial"
    extra_a: np.ndarray = field(default_factory=lambda: np.zeros((0, 0)))
    extra_c: np.ndarray = field(default_factory=lambda: np.zeros(0))

    @property
    def stages(self) -> int:
        """Stages of one step ``s`` (the first is the previous step's last derivative)."""
        return self.b.shape[0]

    @property
    def evaluations_per_step(self) -> int:
        """Right-hand-side evaluations of one step attempt (the first stage is carried over)."""
        return self.stages - 1 + (0 if self.fsal else 1)

    def check(self) -> None:
        """Assert the order conditions up to order 2 and the consistency of the pair."""
        s = self.stages
        assert self.a.shape == (s, s) and np.allclose(np.triu(self.a), 0.0)
        assert np.allclose(self.a.sum(axis=1), self.c, atol=1e-12)
        assert abs(self.b.sum() - 1.0) < 1e-12 and abs(self.b @ self.c - 0.5) < 1e-12
        if self.fsal:
            assert np.allclose(self.a[-1], self.b, atol=1e-14) and self.c[-1] == 1.0

    def stage_matrix(self) -> tuple[np.ndarray, np.ndarray, np.ndarray, int]:
        """The engine's view of one step: ``(a, c, b, S)``.

        ``a (S + E, S + E)`` and ``c (S + E,)`` hold the stage rows of a step,
        ``1 .. S-1`` (the last one at the new solution: the FSAL stage, or the
        derivative at ``y_new`` appended as a stage for a pair without FSAL),
        followed by the ``E`` extra stages of the dense output; ``b (S,)`` are
        the solution's weights over the ``S`` stages.
        """
        if self.fsal:
            S = self.stages
        else:
            S = self.stages + 1
        size = S + self.extra_c.shape[0]
        a = np.zeros((size, size))
        c = np.zeros(size)
        a[: self.stages, : self.stages] = self.a
        c[: self.stages] = self.c
        if not self.fsal:
            a[self.stages, : self.stages] = self.b  # the derivative at y_new is a stage too
            c[self.stages] = 1.0
        for j, (row, cj) in enumerate(zip(self.extra_a, self.extra_c)):
            a[S + j, : row.shape[0]] = row[:size]
            c[S + j] = cj
        b = np.zeros(S)
        b[: self.stages] = self.b
        return a, c, b, S


#: name -> :class:`Tableau`, in registration order (the built-in pairs first).
REGISTRY: dict[str, Tableau] = {}


def register_tableau(tab: Tableau) -> Tableau:
    """Register ``tab`` under ``tab.name`` and return it (one line in the pair's own file).

    Parameters
    ----------
    tab : Tableau
        Checked by :meth:`Tableau.check` (consistency and order 2).

    Returns
    -------
    Tableau
        ``tab`` itself.

    Raises
    ------
    TypeError
        If ``tab`` is not a :class:`Tableau`.
    ValueError
        If its name is empty, not lower case, or names another registered pair, or if the
        tableau fails its checks.
    """
    if not isinstance(tab, Tableau):
        raise TypeError(f"register_tableau takes a lnn.solvers.Tableau; got {type(tab).__name__}")
    if not tab.name or tab.name != tab.name.lower() or not tab.name.replace("_", "").replace("-", "").isalnum():
        raise ValueError(f"a tableau's name must be a lower-case word (e.g. 'tsit5'); got {tab.name!r}")
    if tab.name in REGISTRY and REGISTRY[tab.name] is not tab:
        raise ValueError(f"a tableau named {tab.name!r} is registered already; registered: {', '.join(REGISTRY)}")
    try:
        tab.check()
    except AssertionError:
        raise ValueError(f"tableau {tab.name!r} fails the consistency and order-2 conditions") from None
    REGISTRY[tab.name] = tab
    return tab


def names() -> tuple[str, ...]:
    """The registered pairs' names, in registration order."""
    return tuple(REGISTRY)


def tableau(name: str) -> Tableau:
    """The :class:`Tableau` registered as ``name``.

    Raises
    ------
    ValueError
        For a name that is not registered (the message lists the names).
    """
    try:
        return REGISTRY[name]
    except (KeyError, TypeError):
        raise ValueError(f"method must be one of {', '.join(REGISTRY)}; got {name!r}") from None
