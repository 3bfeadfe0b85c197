"""The loss terms of :func:`lnn.fit`: one :class:`LossTerm` per term, in the registry :data:`TERMS`.

Each term is a per-sample value (a tensor of shape ``(B,)``) computed from one
:class:`Batch`, divided by a scale of the training data that the term names
(:attr:`LossTerm.scales`). Adding a term is adding one entry to :data:`TERMS`;
:data:`LOSSES` (name or alias -> canonical name) follows from it.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping
from dataclasses import dataclass

import numpy as np
import tensorflow as tf

from lnn import _validate

__all__ = ["LOSSES", "TERMS", "Batch", "LossTerm", "loss_weights", "term_scales"]


class Batch:
    """One local batch inside the compiled step, and what its terms share.

    Parameters
    ----------
    model : keras.Model
        The model being trained.
    tensors : sequence of tf.Tensor
        ``q, qd, qdd, tau`` of shape ``(B, n)``, then (for the rollout term)
        the windows ``q_win, qd_win, tau_win`` of shape ``(B, horizon + 1, n)``.
    scales : dict of str to numpy.ndarray
        The data scales, by the names the terms ask for (:attr:`LossTerm.scales`).
    training : bool
        Passed to the model's call.
    horizon : int
        Steps of the rollout windows.
    dt : float
        Time step of the rollout windows.
    engine : {"closed-form", "tapes"}
        How the accelerations are computed (``"tapes"``: the nested tapes of
        :mod:`lnn.mechanics`, a check of the closed form; never in ``fit``).
    """

    def __init__(
        self,
        model,
        tensors,
        *,
        scales: Mapping[str, np.ndarray],
        training: bool,
        horizon: int,
        dt: float,
        engine: str = "closed-form",
    ) -> None:
        self.model = model
        self.q, self.qd, self.qdd, self.tau = tensors[:4]
        self.windows = tuple(tensors[4:])
        self.scales = scales
        self.training = training
        self.horizon = horizon
        self.dt = dt
        self.engine = engine
        self._predicted = None

    @property
    def rows(self) -> tf.Tensor:
        """The local batch size ``B`` (a scalar tensor)."""
        return tf.shape(self.q)[0]

    def predicted_qdd(self) -> tf.Tensor:
        """The model's ``qdd`` at ``(q, qd, tau)``, shape ``(B, n)`` (computed once per batch)."""
        if self._predicted is None:
            if self.engine == "tapes":
                self._predicted = self.model._acceleration_by_tapes(self.q, self.qd, self.tau)
            else:
                self._predicted = self.model((self.q, self.qd, self.tau), training=self.training)
        return self._predicted


@dataclass(frozen=True)
class LossTerm:
    """One loss term: its per-sample value and the data scales it divides by.

    Attributes
    ----------
    name : str
        Canonical name (a key of :data:`TERMS`, a column of :class:`lnn.train.History`).
    aliases : tuple of str
        Other names accepted in ``fit(loss=...)``.
    value : callable
        ``value(batch) -> tf.Tensor (B,)`` for a :class:`Batch`.
    scales : callable
        ``scales(train) -> {name: ndarray}`` from the training arrays ``q, qd,
        qdd, tau`` of shape ``(N, n)``; the value reads ``batch.scales[name]``.
    windows : bool
        Whether the term needs the rollout windows of the batch.
    """

    name: str
    aliases: tuple
    value: Callable
    scales: Callable
    windows: bool = False


def _acceleration_scale(train) -> dict:
    return {"qdd": _validate.spread(train["qdd"], center=True)}


def _acceleration_error(batch: Batch) -> tf.Tensor:
    return (batch.predicted_qdd() - batch.qdd) / batch.scales["qdd"]


def _acceleration_l2(batch: Batch) -> tf.Tensor:
    """Squared error of ``qdd``, each coordinate in units of the training spread."""
    return tf.reduce_mean(tf.square(_acceleration_error(batch)), axis=-1)


def _acceleration_l1(batch: Batch) -> tf.Tensor:
    """Absolute error of ``qdd`` (Cranmer et al.), in units of the training spread."""
    return tf.reduce_mean(tf.abs(_acceleration_error(batch)), axis=-1)


def _torque(batch: Batch) -> tf.Tensor:
    """Squared error of the inverse dynamics ``tau`` (DeLaN), per joint in units of its spread."""
    z = (batch.model.inverse_dynamics(batch.q, batch.qd, batch.qdd) - batch.tau) / batch.scales["tau"]
    return tf.reduce_mean(tf.square(z), axis=-1)


def _power_scale(train) -> dict:
    """Spread of the input power ``qd . tau`` (of ``qd . qdd`` for unforced data)."""
    power = np.sum(train["qd"] * train["tau"], axis=1)
    if not np.any(power[np.isfinite(power)] != 0):
        power = np.sum(train["qd"] * train["qdd"], axis=1)
    return {"power": _validate.spread(power[:, None], center=True)[0]}


def _energy(batch: Batch) -> tf.Tensor:
    """Squared residual of the power balance ``dE/dt = qd . (tau - D qd)`` at the data's ``qdd``."""
    model, q, qd = batch.model, batch.q, batch.qd
    with tf.GradientTape(watch_accessed_variables=False) as tape:
        tape.watch([q, qd])
        energy = model.energy(q, qd)
    de_dq, de_dqd = tape.gradient(energy, [q, qd])
    de_dq = tf.zeros_like(q) if de_dq is None else de_dq
    de_dqd = tf.zeros_like(qd) if de_dqd is None else de_dqd
    power = tf.reduce_sum(de_dq * qd + de_dqd * batch.qdd, axis=-1)
    force = batch.tau
    if getattr(model, "forces", ()):  # learned damping, friction, offset: f(q, qd) joins tau
        force = force + model._force_graph(q, qd)
    elif getattr(model, "damping", False) is True:  # a model without a force registry: -D qd
        force = force - tf.linalg.matvec(model.damping_matrix(), qd)
    return tf.square((power - tf.reduce_sum(qd * force, axis=-1)) / batch.scales["power"])


def _rollout_scale(train) -> dict:
    return {"q": _validate.spread(train["q"], center=True), "qd": _validate.spread(train["qd"], center=True)}


def _rollout(batch: Batch) -> tf.Tensor:
    """Squared error of ``q`` and ``qd`` over windows integrated by RK4 from their first state."""
    from lnn.odeint import odeint  # differentiable; inside the traced step it returns tensors

    q_win, qd_win, tau_win = batch.windows
    t = np.arange(batch.horizon + 1) * batch.dt
    path = odeint(batch.model, q_win[:, 0], qd_win[:, 0], t, method="rk4", tau=tau_win)
    zq = (path.q[:, 1:] - q_win[:, 1:]) / batch.scales["q"]
    zv = (path.qd[:, 1:] - qd_win[:, 1:]) / batch.scales["qd"]
    return 0.5 * (tf.reduce_mean(tf.square(zq), axis=[1, 2]) + tf.reduce_mean(tf.square(zv), axis=[1, 2]))


#: The loss terms by canonical name.
TERMS: dict[str, LossTerm] = {
    term.name: term
    for term in (
        LossTerm("acceleration-l2", ("acceleration",), _acceleration_l2, _acceleration_scale),
        LossTerm("acceleration-l1", (), _acceleration_l1, _acceleration_scale),
        LossTerm(
            "torque", ("inverse-dynamics",), _torque, lambda train: {"tau": _validate.spread(train["tau"], center=True)}
        ),
        LossTerm("energy", ("power",), _energy, _power_scale),
        LossTerm("rollout", (), _rollout, _rollout_scale, windows=True),
    )
}

#: Canonical loss terms and the aliases accepted for them (name or alias -> canonical name).
LOSSES: dict[str, str] = {}
for _term in TERMS.values():
    LOSSES.update({name: _term.name for name in (_term.name, *_term.aliases)})
del _term


def loss_weights(loss) -> dict[str, float]:
    """``{canonical term: weight}`` from fit's ``loss`` (a name or a dict of weights)."""
    if isinstance(loss, str):
        loss = {loss: 1.0}
    if not isinstance(loss, Mapping) or not loss:
        raise TypeError(f"loss must be a loss name or a non-empty dict of weights, got {loss!r}")
    weights: dict[str, float] = {}
    for name, weight in loss.items():
        if name not in LOSSES:
            raise ValueError(f"unknown loss term {name!r}; known terms: {sorted(LOSSES)}")
        weight = float(weight)
        if not (math.isfinite(weight) and weight >= 0):
            raise ValueError(f"loss weight of {name!r} must be finite and >= 0, got {weight!r}")
        weights[LOSSES[name]] = weights.get(LOSSES[name], 0.0) + weight
    if not any(w > 0 for w in weights.values()):
        raise ValueError(f"at least one loss weight must be positive, got {loss!r}")
    return weights


def term_scales(terms, train) -> dict[str, np.ndarray]:
    """The data scales that ``terms`` (canonical names) need, from the training arrays."""
    scales: dict[str, np.ndarray] = {}
    for name in terms:
        scales.update(TERMS[name].scales(train))
    return scales
