"""A generic linear model of a robot's torques from its motion (numpy only).

The import knows nothing of the robot, yet two of its choices are judged by
how well the motion explains the torques: the lag of the torque stream
(:mod:`lnn.ingest.lag`) and the derivative window (:mod:`lnn.ingest.consistency`).
Both regress the torques on :func:`rigid_body_features`, the columns that span
the rigid-body torque of an arm of up to three revolute joints (and most of
it beyond), plus viscous and Coulomb friction.
"""

from __future__ import annotations

import numpy as np

__all__ = ["CORIOLIS_TRIG_DOF", "GRAM_CUTOFF", "normal_sums", "residual_sum", "rigid_body_features"]

#: Relative eigenvalue below which the regression's Gram matrix is truncated (collinear features).
GRAM_CUTOFF = 1e-12
#: Up to this many coordinates, the velocity products also get the trigonometric factors.
CORIOLIS_TRIG_DOF = 3


def rigid_body_features(q: np.ndarray, qd: np.ndarray, qdd: np.ndarray, v: np.ndarray) -> np.ndarray:
    """The regression's features ``phi (T, p)`` of a motion ``q, qd, qdd (T, n)``.

    In the trigonometric functions of each coordinate, ``g in {1, cos q_l, sin q_l}``:

    - ``g qdd_k`` (inertia ``M(q) qdd``, ``M`` of first order in each ``g``);
    - ``g qd_k qd_m`` (Coriolis and centrifugal; without ``g`` beyond three
      coordinates, to keep the regression small);
    - ``g g'`` (gravity, e.g. ``sin(q1 + q2)``);
    - ``qd_k`` and ``tanh(qd_k / v_k)`` (viscous and Coulomb friction).

    ``p = n (2n + 1) + n (n + 1) / 2 * (2n + 1 or 1) + (2n + 1)(2n + 2) / 2 + 2n``:
    44 for two coordinates, 267 for seven.
    """
    n = q.shape[1]
    trig = [np.ones(q.shape[0]), *np.cos(q).T, *np.sin(q).T]
    products = np.column_stack([qd[:, a] * qd[:, b] for a in range(n) for b in range(a, n)])
    columns = [g[:, None] * qdd for g in trig]
    columns += [g[:, None] * products for g in (trig if n <= CORIOLIS_TRIG_DOF else trig[:1])]
    gravity = np.column_stack([a * b for i, a in enumerate(trig) for b in trig[i:]])
    return np.column_stack([*columns, gravity, qd, np.tanh(qd / v)])


def normal_sums(phi: np.ndarray, target: np.ndarray) -> tuple:
    """Normal-equation sums of ``phi (N, p)``, ``target (N, n)``: ``phi'phi``, ``phi'target``, ``|target|^2``."""
    return phi.T @ phi, phi.T @ target, np.sum(target**2, axis=0)


def residual_sum(gram: np.ndarray, cross: np.ndarray, squares: np.ndarray) -> np.ndarray:
    """Least-squares residual sum of squares ``(n,)`` from the sums of :func:`normal_sums`.

    The Gram matrix is truncated at :data:`GRAM_CUTOFF` of its largest
    eigenvalue: collinear features (``cos^2 + sin^2 = 1``) cost nothing.
    """
    values, vectors = np.linalg.eigh(gram)
    keep = values > GRAM_CUTOFF * values.max()
    projected = (vectors[:, keep].T @ cross) / np.sqrt(values[keep])[:, None]
    return squares - np.sum(projected**2, axis=0)
