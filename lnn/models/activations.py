"""One table of the networks' smooth activations: value, slope and curvature, in TensorFlow and numpy.

Each :class:`Activation` holds ``s(z)``, ``s'(z)`` and ``s''(z)`` twice, side
by side: as TensorFlow ops (the models' closed-form derivatives, differentiable
again for training) and as numpy (the integrator's fast snapshot). Both
return ``(s, s', s'')`` from one call, skipping what the caller does not need:
``value=False`` skips ``s`` (the last hidden layer when only derivatives are
wanted), ``curvature=False`` skips ``s''`` (a potential's gradient); skipped
entries are None. A Lagrangian network needs non-zero second derivatives, so
every activation here is smooth (ReLU would give ``M = 0``).

The numpy forms use ``exp``, ``log``, ``tanh`` and ``copysign`` only, in
place where they can: these vectorise, unlike ``logaddexp``, ``expit`` or
``np.where`` (``np.where`` alone cost ~50 µs on a 256 x 64 batch, a third of
the softplus).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable

import numpy as np
import tensorflow as tf
from scipy.special import expit

__all__ = ["ACTIVATIONS", "Activation"]


@dataclasses.dataclass(frozen=True)
class Activation:
    """One activation in both backends.

    Attributes
    ----------
    name : str
    value : callable
        ``s(z)`` alone on tensors (the forward pass).
    tf : callable
        ``tf(z, value=True, curvature=True) -> (s, s', s'')`` on tensors.
    np : callable
        The same on numpy arrays.
    """

    name: str
    value: Callable
    tf: Callable
    np: Callable


# -- softplus: s = log(1 + e^z), s' = sigmoid(z), s'' = s'(1 - s') ---------------------


def _softplus_tf(z, value=True, curvature=True):
    # e = exp(-|z|) gives all three; log (not log1p): its argument lies in [1, 2], so the
    # error stays at rounding, and XLA's CPU log1p costs twice as much.
    e = tf.exp(-tf.abs(z))
    one_plus = 1.0 + e
    p = 1.0 / one_plus  # sigmoid(|z|)
    ep = e * p  # sigmoid(-|z|) = 1 - p
    slope = tf.where(z >= 0, p, ep)
    s = tf.maximum(z, 0.0) + tf.math.log(one_plus) if value else None
    return s, slope, (ep * p if curvature else None)


def _softplus_np(z, value=True, curvature=True):
    if not value:  # s' = (1 + tanh(z/2)) / 2, s'' = (1 - tanh(z/2)^2) / 4
        th = np.tanh(0.5 * z)
        slope = 0.5 * th
        slope += 0.5
        if not curvature:
            return None, slope, None
        th *= th
        return None, slope, 0.25 - 0.25 * th
    e = np.exp(-np.abs(z))
    one_plus = 1.0 + e
    p = 1.0 / one_plus
    slope = np.copysign(p - 0.5, z)  # p for z >= 0, 1 - p for z < 0
    slope += 0.5
    s = np.log(one_plus)
    s += np.maximum(z, 0.0)
    if not curvature:
        return s, slope, None
    e *= p
    e *= p  # sigmoid(|z|) sigmoid(-|z|)
    return s, slope, e


# -- tanh: s' = 1 - s^2, s'' = -2 s s' ----------------------------------------------------


def _tanh_tf(z, value=True, curvature=True):
    t = tf.math.tanh(z)
    slope = 1.0 - t * t
    return t, slope, (-2.0 * t * slope if curvature else None)


def _tanh_np(z, value=True, curvature=True):
    t = np.tanh(z)
    slope = 1.0 - t * t
    return t, slope, (-2.0 * t * slope if curvature else None)


# -- sigmoid: s' = s(1 - s), s'' = s'(1 - 2 s) --------------------------------------------


def _sigmoid_tf(z, value=True, curvature=True):
    s = tf.math.sigmoid(z)
    slope = s * (1.0 - s)
    return s, slope, (slope * (1.0 - 2.0 * s) if curvature else None)


def _sigmoid_np(z, value=True, curvature=True):
    s = expit(z)
    slope = s * (1.0 - s)
    return s, slope, (slope * (1.0 - 2.0 * s) if curvature else None)


# -- swish: s = z sigmoid(z) ------------------------------------------------------------


def _swish_tf(z, value=True, curvature=True):
    g = tf.math.sigmoid(z)
    dg = g * (1.0 - g)
    return z * g, g + z * dg, (dg * (2.0 + z * (1.0 - 2.0 * g)) if curvature else None)


def _swish_np(z, value=True, curvature=True):
    g = expit(z)
    dg = g * (1.0 - g)
    return z * g, g + z * dg, (dg * (2.0 + z * (1.0 - 2.0 * g)) if curvature else None)


#: name -> :class:`Activation` (TensorFlow and numpy forms of ``s, s', s''``).
ACTIVATIONS: dict[str, Activation] = {
    a.name: a
    for a in (
        Activation("softplus", tf.math.softplus, _softplus_tf, _softplus_np),
        Activation("tanh", tf.math.tanh, _tanh_tf, _tanh_np),
        Activation("sigmoid", tf.math.sigmoid, _sigmoid_tf, _sigmoid_np),
        Activation("swish", lambda z: z * tf.math.sigmoid(z), _swish_tf, _swish_np),
    )
}
