"""The one protocol that ground-truth systems and learned models share.

Every array is batch-first: ``q``, ``qd``, ``qdd`` and ``tau`` have shape
``(..., n_dof)`` and the mass matrix ``M`` has shape ``(..., n_dof, n_dof)``.
The integrator (:func:`lnn.rollout`), the data generator
(:func:`lnn.generate`), the metrics and the plots accept anything that
satisfies :class:`MechanicalSystem`, so the true system is a free test oracle
for the learned one.
"""

from __future__ import annotations

from typing import Any, Protocol, runtime_checkable

__all__ = ["FLOAT_DTYPES", "MechanicalSystem", "compute_dtype"]

#: The float dtypes the package computes in.
FLOAT_DTYPES = ("float32", "float64")


@runtime_checkable
class MechanicalSystem(Protocol):
    """A Lagrangian system ``M(q, qd) qdd = dL/dq - (d²L/dqd dq) qd + tau``.

    Attributes
    ----------
    n_dof : int
        Number of degrees of freedom ``n``.
    angular : tuple of bool, length ``n_dof``
        Which coordinates are angles (periodic, in radians).

    Optional methods that the integrator uses when present
    -------------------------------------------------------
    ``acceleration_jacobian(q, qd, tau=None)`` -> ``(B, n, 2n)``
        Exact Jacobian of ``qdd`` with respect to ``[q, qd]``; implicit solvers
        (Radau, BDF, LSODA) receive it, finite differences otherwise.
    ``numpy_acceleration(q, qd, tau=None)`` -> ``(B, n)`` numpy array
        A fast numpy-in, numpy-out acceleration for the solver's hot path.
    ``numpy_snapshot()`` -> an object with numpy ``acceleration(q, qd, tau=None)``
        and ``energy(q, qd)``
        Taken once per rollout (e.g. :class:`lnn.fast.FastLagrangian` of a
        learned model's current weights) and used instead of the methods
        above for the right-hand side and for the energies at the samples.
    """

    n_dof: int
    angular: tuple[bool, ...]

    def mass_matrix(self, q: Any, qd: Any = None) -> Any:
        """Mass matrix ``M``, shape ``(..., n, n)``: symmetric positive definite."""

    def acceleration(self, q: Any, qd: Any, tau: Any = None) -> Any:
        """Forward dynamics: ``qdd``, shape ``(..., n)``."""

    def inverse_dynamics(self, q: Any, qd: Any, qdd: Any) -> Any:
        """Inverse dynamics: the generalized force ``tau``, shape ``(..., n)``."""

    def energy(self, q: Any, qd: Any) -> Any:
        """Total energy ``E = qd · dL/dqd - L``, shape ``(...,)``."""


def compute_dtype(system, like=None) -> str:
    """The float dtype ``system`` computes in: the package's one rule (integrators and training alike).

    The system's own ``compute_dtype`` or ``dtype`` (a Keras model's, or a
    system written in TensorFlow) when it is ``float32`` or ``float64``;
    otherwise the dtype of ``like`` (an initial state: a float32 array or
    tensor stays float32); otherwise ``"float64"`` (numpy ground truth).

    Parameters
    ----------
    system : object
    like : array_like or tensor, optional

    Returns
    -------
    str
        ``"float32"`` or ``"float64"``.
    """
    for attr in ("compute_dtype", "dtype"):
        name = _dtype_name(getattr(system, attr, None))
        if name is not None:
            return name
    name = _dtype_name(getattr(like, "dtype", None))
    return name if name is not None else "float64"


def _dtype_name(value) -> str | None:
    """``value`` (a str, numpy or TensorFlow dtype) as one of :data:`FLOAT_DTYPES`, else None."""
    name = value if isinstance(value, str) else getattr(value, "name", None)
    return name if name in FLOAT_DTYPES else None
