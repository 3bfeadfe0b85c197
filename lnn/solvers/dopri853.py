"""The Dormand–Prince 8(5,3) pair of Hairer's ``DOP853`` (scipy's ``DOP853``), compiled as
``"dopri853"``: twelve stages, the 5th- and 3rd-order error estimates combined as in ``DOP853``,
and the 7th-order dense output (three extra stages). Coefficients read once from
``scipy.integrate._ivp.dop853_coefficients``."""

from __future__ import annotations

import numpy as np
from scipy.integrate._ivp import dop853_coefficients as _c

from lnn.solvers.tableau import Tableau, register_tableau

__all__ = ["TABLEAU"]

_S = _c.N_STAGES  # 12

TABLEAU = register_tableau(
    Tableau(
        name="dopri853",
        order=8,
        error_order=7,
        a=np.asarray(_c.A[:_S, :_S], dtype=np.float64),
        b=np.asarray(_c.B, dtype=np.float64),
        c=np.asarray(_c.C[:_S], dtype=np.float64),
        fsal=False,
        # E5, E3 over the 12 stages and the derivative at the new solution (13 rows).
        error=np.stack([_c.E5, _c.E3], axis=1).astype(np.float64),
        dense=np.asarray(_c.D, dtype=np.float64),
        dense_kind="dop853",
        extra_a=np.asarray(_c.A[_S + 1 :], dtype=np.float64),
        extra_c=np.asarray(_c.C[_S + 1 :], dtype=np.float64),
    )
)
