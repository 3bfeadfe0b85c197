"""The Dormand–Prince 5(4) pair (``RK45`` of scipy, ``ode45``), seven stages with FSAL and
Shampine's 4th-order dense output; coefficients read once from :class:`scipy.integrate.RK45`."""

from __future__ import annotations

import numpy as np
from scipy.integrate import RK45

from lnn.solvers.tableau import Tableau, register_tableau

__all__ = ["TABLEAU"]

_A = np.zeros((7, 7))
_A[:6, :5] = RK45.A
_A[6, :6] = RK45.B

TABLEAU = register_tableau(
    Tableau(
        name="dopri5",
        order=5,
        error_order=4,
        a=_A,
        b=np.concatenate([RK45.B, [0.0]]),
        c=np.concatenate([RK45.C, [1.0]]),
        fsal=True,
        error=np.asarray(RK45.E, dtype=np.float64)[:, None],
        dense=np.asarray(RK45.P, dtype=np.float64),
    )
)
