"""What the data can identify: fit's default loss (:func:`default_loss`) and its warnings.

A loss identifies a Lagrangian only as far as the data break its symmetries:

- ``L -> c L`` (``c > 0``) leaves the accelerations unchanged, so on
  **unforced** data (all torques zero) the acceleration losses and the
  rollout loss fix ``L`` only up to a factor: the learned energies, mass
  matrix and inverse dynamics are then in arbitrary units (the accelerations
  and trajectories are right). Known torques fix the factor.
- ``L = 0`` gives zero inverse dynamics and zero energy: on data whose
  torques are all zero the **torque** loss and the **energy** (power-balance)
  loss are minimised by the trivial Lagrangian, and training on them learns
  nothing (they shrink ``M`` towards zero).

:func:`check` warns (:class:`IdentifiabilityWarning`) when a fit asks for
one of these.
"""

from __future__ import annotations

import warnings

import numpy as np

from lnn.errors import IdentifiabilityWarning

__all__ = ["IdentifiabilityWarning", "check", "default_loss", "is_unforced"]

#: Terms whose value is unchanged by ``L -> c L`` (the scale of L is free on unforced data).
SCALE_FREE = ("acceleration-l2", "acceleration-l1", "rollout")
#: Terms that ``L = 0`` minimises on data without torques.
TRIVIAL_WITHOUT_TORQUES = ("torque", "energy")


def is_unforced(tau) -> bool:
    """Whether every torque of ``tau (N, n)`` is exactly zero (NaN counts as unknown, not zero)."""
    tau = np.asarray(tau, dtype=np.float64)
    return not np.any(tau[np.isfinite(tau)] != 0.0)


def default_loss(dataset, model=None):
    """The loss of ``fit(loss="auto")`` (the default) and of ``lnn train --loss auto``.

    Unforced data (all torques zero): the accelerations, ``"acceleration"``
    (the torque loss would be minimised by ``L = 0``). Data with torques: the
    torques, ``"torque"`` (DeLaN's loss, the one that identifies a robot's
    inertia and gravity), plus the accelerations with weight 1 for a model
    whose kind sets ``torque_loss_alone = False`` (the structured kind: its
    Cholesky factor's gradient vanishes as ``M -> 0``, where the torque loss
    alone drives it; ``benchmarks/bench_accuracy.py``, case 2).

    Parameters
    ----------
    dataset : lnn.Dataset
        The training data (its ``tau``, shape ``(N, n)``).
    model : keras.Model, optional
        The model to train (its kind, when it has one).

    Returns
    -------
    str or dict of str to float
        A loss for :func:`lnn.fit`.
    """
    tau = getattr(dataset, "tau", None)
    if tau is None:
        raise TypeError(f"dataset must be an lnn.Dataset (with tau), got {type(dataset).__name__}")
    if is_unforced(tau):
        return "acceleration"
    kind_model = getattr(model, "kind_model", None)
    if kind_model is not None and not getattr(kind_model, "torque_loss_alone", True):
        return {"torque": 1.0, "acceleration": 1.0}
    return "torque"


def check(weights: dict, tau, *, stacklevel: int = 3) -> list[str]:
    """Warn when the data cannot identify what the loss asks for.

    Parameters
    ----------
    weights : dict of str to float
        fit's loss weights by canonical term name.
    tau : array_like, shape ``(N, n)``
        The training torques.
    stacklevel : int, keyword-only
        Of the warnings (3: the caller of :func:`lnn.fit`).

    Returns
    -------
    list of str
        The messages warned (empty when the loss is identifiable).
    """
    if not is_unforced(tau):
        return []
    used = {k for k, w in weights.items() if w > 0}
    messages = []
    trivial = sorted(used & set(TRIVIAL_WITHOUT_TORQUES))
    if trivial:
        messages.append(
            f"loss term(s) {trivial} on data whose torques are all zero: the Lagrangian L = 0 "
            "fits them exactly (zero inverse dynamics, zero power), so they cannot identify the "
            "system and drive the mass matrix towards zero; train unforced data on "
            "loss='acceleration', or give data with known torques"
        )
    elif used & set(SCALE_FREE):
        messages.append(
            "the data are unforced (all torques zero): the acceleration/rollout loss fixes the "
            "Lagrangian only up to a factor (c L gives the same accelerations for any c > 0), so "
            "the learned energies, mass matrix, potential and inverse dynamics are in arbitrary "
            "units (the accelerations and trajectories are not); data with known torques fix the "
            "scale"
        )
    for message in messages:
        warnings.warn(message, IdentifiabilityWarning, stacklevel=stacklevel)
    return messages
