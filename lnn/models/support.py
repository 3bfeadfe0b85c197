"""The box of the training states: where a learned force is trusted, and what it holds beyond.

A learned force (``network``, ``joint_network``: a friction level ``g(q, qd)``
from an MLP) is fitted on the states the training data visited. Beyond them
an MLP extrapolates along whatever direction its last fit left: a
softplus network's level grows linearly with the rate, without bound. On
one 21 s log of a simulated 7-DOF arm (``benchmarks/bench_real.py
--single-log``: train on the first 70 %, test on the last 30 %, whose
shoulder rates reach 1.7x the training ones) the per-joint friction
network, traded against the shoulder's inertia on the training rates, put
4 N m of friction on the shoulder at the test's rates: the held-out torque
MSE was 2.29 N^2 m^2 against the linear stage's 0.0144.

So a learned force reads its state clipped, coordinate by coordinate, to
the range the training data covered (:meth:`TrainingBox.clip_q`, :meth:`TrainingBox.clip_qd`): beyond the
data its level is the level at the nearest edge, a Coulomb-like constant,
and what grows with the rate is the parametric viscous term, the physics
the learned level sits beside. The same model on the same log with its
inputs clipped erred 0.0212 (``benchmarks/bench_real.py``'s run in
``docs/benchmarks/real-robots.md``). Passivity is untouched: the level stays
``>= 0`` and the sign is still ``tanh(qd / v0)`` of the true rate.

An angular coordinate whose training range spans a full turn is not
clipped (its features ``sin q, cos q`` have seen every angle). The box is
set by :meth:`lnn.LagrangianNetwork.adapt` (which :func:`lnn.fit` calls)
and saved with the model; before, and in files saved before it existed, it
is unbounded (the behaviour of those models).
"""

from __future__ import annotations

import dataclasses

import numpy as np

__all__ = ["TrainingBox"]


@dataclasses.dataclass(frozen=True)
class TrainingBox:
    """Per-coordinate bounds of the training states.

    Attributes
    ----------
    q_low, q_high, qd_low, qd_high : numpy.ndarray, shape ``(n,)``
        The lowest and highest ``q`` and ``qd`` of every coordinate in the
        training data (``-inf, inf`` where unbounded; a model stores those
        as its dtype's largest finite numbers, so its weights stay finite).
    """

    q_low: np.ndarray
    q_high: np.ndarray
    qd_low: np.ndarray
    qd_high: np.ndarray

    @classmethod
    def unbounded(cls, n: int) -> TrainingBox:
        """No bounds on any of ``n`` coordinates."""
        low, high = np.full(n, -np.inf), np.full(n, np.inf)
        return cls(q_low=low, q_high=high, qd_low=low, qd_high=high)

    @classmethod
    def of(cls, q, qd, *, angular) -> TrainingBox:
        """The box of training states ``q, qd`` (shape ``(N, n)``, finite).

        ``angular`` (length ``n``) marks the angles: one whose range spans
        ``2 pi`` or more is left unbounded.
        """
        q, qd = np.asarray(q, np.float64), np.asarray(qd, np.float64)
        q_low, q_high = q.min(axis=0), q.max(axis=0)
        turn = np.asarray(angular, bool) & (q_high - q_low >= 2.0 * np.pi)
        return cls(
            q_low=np.where(turn, -np.inf, q_low),
            q_high=np.where(turn, np.inf, q_high),
            qd_low=qd.min(axis=0),
            qd_high=qd.max(axis=0),
        )

    def clip_q(self, q) -> np.ndarray:
        """``q`` (shape ``(B, n)``) clipped to the box, coordinate by coordinate (numpy)."""
        return np.clip(q, self.q_low, self.q_high)

    def clip_qd(self, qd) -> np.ndarray:
        """``qd`` (shape ``(B, n)``) clipped to the box, coordinate by coordinate (numpy)."""
        return np.clip(qd, self.qd_low, self.qd_high)
