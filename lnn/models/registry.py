"""The registry of model kinds, and what a kind provides.

A *kind* is the structure of a learned Lagrangian (which networks, and how
they form ``T``, ``V`` and ``L``). Each kind is one module holding its
TensorFlow and its numpy mathematics side by side, as a subclass of
:class:`Kind` registered under its name::

    from lnn.models import Kind, register_kind

    @register_kind
    class Separable(Kind):
        name = "separable"
        networks = ("log_mass_net", "potential_net")
        ...

and ``lnn.LagrangianNetwork(n, kind="separable")`` builds it. The Keras model
(:class:`lnn.LagrangianNetwork`) keeps the configuration, the input scaling,
saving and the public methods; it never branches on a kind. A kind that
gives only :meth:`Kind.kinetic` and :meth:`Kind.potential` gets everything
else from the nested-tape engine of :mod:`lnn.mechanics` (``M`` is the
Hessian of ``T``); the built-in kinds override :meth:`Kind.terms` with
closed forms, and :meth:`Kind.numpy` with a numpy twin for fast rollouts.
"""

from __future__ import annotations

import dataclasses
from typing import ClassVar

import tensorflow as tf

from lnn import mechanics

__all__ = ["KINDS", "Kind", "NumpyKind", "Terms", "kind_names", "register_kind"]


@dataclasses.dataclass(frozen=True)
class Terms:
    """Everything the Euler-Lagrange equations need at ``(q, qd)`` (tensors, batch-first).

    Attributes
    ----------
    lagrangian : tensor, shape ``(B,)``
    grad_q : tensor, shape ``(B, n)``, or None
        ``dL/dq``.
    grad_qd : tensor, shape ``(B, n)``, or None
        ``dL/dqd``.
    mass : tensor, shape ``(B, n, n)``, or None
        ``M = d2L/dqd2``.
    mixed : tensor, shape ``(B, n)``, or None
        ``(d2L/dqd dq) qd``.
    """

    lagrangian: tf.Tensor
    grad_q: tf.Tensor | None
    grad_qd: tf.Tensor | None
    mass: tf.Tensor | None
    mixed: tf.Tensor | None


class NumpyKind:
    """The numpy twin of a kind (a snapshot of its weights); see :class:`lnn.fast.FastLagrangian`.

    Every method takes ``q, qd`` of shape ``(B, n)`` in the snapshot's dtype
    and the basis ``(r, sin, cos)`` of :meth:`lnn.models.features.InputMap.basis_np`.
    """

    def dynamics(self, q, qd, basis):
        """``(M (B, n, n), dL/dq - (d2L/dqd dq) qd (B, n))``."""
        raise NotImplementedError

    def mass_matrix(self, q, qd, basis):
        """``M``, shape ``(B, n, n)``."""
        return self.dynamics(q, qd, basis)[0]

    def energy(self, q, qd, basis):
        """``E = qd . dL/dqd - L``, shape ``(B,)``."""
        raise NotImplementedError


class Kind:
    """A model kind: the networks of a :class:`lnn.LagrangianNetwork` and their mechanics.

    An instance belongs to one model (``self.model``); :meth:`build` creates
    the networks as attributes of the model, named in :attr:`networks` (the
    names are part of saved files). The mathematics reads the model's input
    map: ``self.model.features(q)`` (:class:`lnn.models.features.Features`) and the velocity
    scale ``self.model.qd_std``.

    Class attributes
    ----------------
    name : str
        The ``kind=`` of :class:`lnn.LagrangianNetwork`.
    networks : tuple of str
        Attribute names of the networks on the model, in :meth:`mlp_layers` order.
    mass_depends_on_qd : bool
        False when ``M`` depends on ``q`` only (``mass_matrix(q)`` then needs no ``qd``).
    xla_jacobian : bool
        Whether the rollout Jacobian of this kind may run under XLA.
    xla_train : bool
        Whether :func:`lnn.fit` compiles this kind's train step with XLA by
        default (where it was measured faster, compiling once per fit).
    convex : bool
        Whether the kind accepts ``convex=True``.
    torque_loss_alone : bool
        Whether the torque loss alone trains this kind on forced data; False
        adds the acceleration term to the default loss (:func:`lnn.train.default_loss`).
    takes_prior : bool
        Whether the kind is built from a ``prior=``.
    takes_residual : bool
        Whether the kind accepts ``residual=True`` (a residual Lagrangian,
        :class:`lnn.models.residual.ResidualLagrangian`).
    takes_harmonics : bool
        Whether the kind accepts ``harmonics=`` (the trigonometric basis's, :mod:`lnn.models.trigonometric`).
    """

    name: ClassVar[str] = ""
    networks: ClassVar[tuple[str, ...]] = ()
    mass_depends_on_qd: ClassVar[bool] = True
    xla_jacobian: ClassVar[bool] = True
    xla_train: ClassVar[bool] = False
    convex: ClassVar[bool] = False
    torque_loss_alone: ClassVar[bool] = True
    takes_prior: ClassVar[bool] = False
    takes_residual: ClassVar[bool] = False
    takes_harmonics: ClassVar[bool] = False

    def __init__(self, model) -> None:
        self.model = model

    # -- construction --------------------------------------------------------------
    def build(self, *, n_features: int, seeds, options: dict) -> None:
        """Create the networks on ``self.model``.

        Parameters
        ----------
        n_features : int
            Width ``F`` of the features of ``q``.
        seeds : sequence of int
            One seed per network (four available).
        options : dict
            ``activation``, ``dtype``, ``hidden``, ``convex``, ``convex_init``,
            ``epsilon``, ``prior``, ``residual`` and ``harmonics`` of the model.
        """
        raise NotImplementedError

    def config(self) -> dict:
        """Constructor arguments of the model that belong to the kind (saved in its config)."""
        return {}

    def nets(self) -> list:
        """The networks, in :attr:`networks` order."""
        return [getattr(self.model, name) for name in self.networks]

    # -- TensorFlow ------------------------------------------------------------------
    def kinetic(self, q, qd):
        """``T(q, qd)``, shape ``(B,)``, in the gauge ``T(q, 0) = 0`` (zero at rest)."""
        raise NotImplementedError

    def potential(self, q):
        """``V(q) = -L(q, 0)``, shape ``(B,)``: the potential, whose gradient is the gravity torque."""
        raise NotImplementedError

    def lagrangian(self, q, qd):
        """``L = T - V``, shape ``(B,)``."""
        return self.kinetic(q, qd) - self.potential(q)

    def tape_lagrangian(self):
        """The Lagrangian for :mod:`lnn.mechanics`' nested tapes (separable: ``M`` from ``T`` only)."""
        return mechanics.separable(self.kinetic, self.potential)

    def terms(self, q, qd, *, hessian: bool, mixed: bool, grad_q: bool) -> Terms:
        """The derivatives of ``L`` (default: nested tapes; the built-in kinds use closed forms)."""
        fn = self.tape_lagrangian()
        zero = tf.UnconnectedGradients.ZERO
        with tf.GradientTape() as tape:
            tape.watch([q, qd])
            value = fn(q, qd)
        gq, gqd = tape.gradient(value, [q, qd], unconnected_gradients=zero)
        mass = mix = None
        if hessian or mixed:
            mass, gq, mix = mechanics._dynamics_terms(fn, q, qd, "reverse")
        return Terms(value, gq if grad_q else None, gqd, mass if hessian else None, mix if mixed else None)

    def mass_matrix(self, q, qd):
        """``M``, shape ``(B, n, n)``."""
        return self.terms(q, qd, hessian=True, mixed=False, grad_q=False).mass

    def inverse_dynamics(self, q, qd, qdd):
        """``M qdd + (d2L/dqd dq) qd - dL/dq``: the Lagrangian's part of the inverse dynamics, ``(B, n)``.

        Default: from :meth:`terms`. A kind whose inverse dynamics has a
        cheaper form than ``M`` (the rigid body's Newton-Euler recursion,
        O(n) without the ``n x n`` mass matrix) overrides it; the torque loss
        of :func:`lnn.fit` trains through it.
        """
        t = self.terms(q, qd, hessian=True, mixed=True, grad_q=True)
        return tf.linalg.matvec(t.mass, qdd) + t.mixed - t.grad_q

    def energy(self, q, qd):
        """``E = qd . dL/dqd - L``, shape ``(B,)``."""
        t = self.terms(q, qd, hessian=False, mixed=False, grad_q=False)
        return tf.reduce_sum(qd * t.grad_qd, axis=-1) - t.lagrangian

    # -- numpy -----------------------------------------------------------------------
    def numpy(self, fold) -> NumpyKind | None:
        """The numpy twin of the current weights, or None (the snapshot then calls TensorFlow).

        Parameters
        ----------
        fold : callable
            ``fold(net) -> lnn.models.mlp.NumpyNet``: a network with the input
            map folded into its first layer, in the snapshot's dtype.
        """
        return None


#: name -> :class:`Kind` subclass, in registration order.
KINDS: dict[str, type] = {}


def register_kind(cls: type) -> type:
    """Register a :class:`Kind` subclass under ``cls.name`` (usable as a class decorator).

    Raises
    ------
    TypeError
        If ``cls`` is not a :class:`Kind` subclass or has no name.
    ValueError
        If another kind holds that name.
    """
    return register_named(KINDS, cls, base=Kind, what="model kind")


def register_named(table: dict, cls: type, *, base: type, what: str) -> type:
    """Put a named subclass of ``base`` into ``table`` under ``cls.name`` (the registries' one rule).

    Raises
    ------
    TypeError
        If ``cls`` is not a named ``base`` subclass.
    ValueError
        If another class holds that name.
    """
    if not (isinstance(cls, type) and issubclass(cls, base)) or not cls.name:
        raise TypeError(f"a {what} must be a named {base.__module__}.{base.__qualname__} subclass, got {cls!r}")
    other = table.get(cls.name)
    if other is not None and other is not cls:
        raise ValueError(f"{what} {cls.name!r} is already registered ({other.__module__}.{other.__qualname__})")
    table[cls.name] = cls
    return cls


def kind_names() -> tuple[str, ...]:
    """The registered kinds' names."""
    return tuple(KINDS)
