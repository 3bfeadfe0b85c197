"""The Butcher tableau of an embedded explicit Runge–Kutta pair (numpy constants, no TensorFlow).

A :class:`Tableau` holds what :mod:`lnn.solvers._embedded` needs to take a
step, estimate its error and interpolate inside it; each method's module
(:mod:`lnn.solvers.tsit5`, :mod:`lnn.solvers.dopri5`,
:mod:`lnn.solvers.dopri8`, :mod:`lnn.solvers.dopri853`) builds one, once, at import.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

__all__ = ["Tableau"]


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
