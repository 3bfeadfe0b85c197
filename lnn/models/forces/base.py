"""The base of the learned forces: :class:`Force`, :class:`LinearForce`, the registry and its one parser.

A force module imports this module only (never :mod:`lnn.models.forces`
itself), so that the package can import its built-in forces without a cycle,
and a force written outside the package is one file::

    from lnn.models.forces.base import LinearForce, register_force

    @register_force
    class Quadratic(LinearForce):
        name = "quadratic"
        variable = "friction_quadratic"

        @staticmethod
        def columns(xp, q, qd, velocity):
            return qd * xp.abs(qd)

after which ``LagrangianNetwork(..., friction="viscous+quadratic")`` learns
it, saves it, rolls it out in numpy and identifies it by least squares.
"""

from __future__ import annotations

from typing import ClassVar

import numpy as np
import tensorflow as tf

from lnn.models.registry import register_named

__all__ = [
    "FORCES",
    "FRICTION_VELOCITY",
    "Force",
    "LinearForce",
    "NumpyForce",
    "NumpyLinearForce",
    "assign_positive",
    "force_names",
    "friction_names",
    "joint_vector",
    "positive",
    "register_force",
    "softplus_inverse",
]

#: Default smoothing velocity ``v0`` of the Coulomb term ``c tanh(qd / v0)`` (rad/s or m/s):
#: below the velocity noise of joint encoders differentiated at 0.1-1 kHz, above its quantisation.
FRICTION_VELOCITY = 0.01


def softplus_inverse(value):
    """``x`` with ``softplus(x) = value`` (``value > 0``): ``value + log(1 - exp(-value))``, stable for any size."""
    value = np.asarray(value, np.float64)
    out = value + np.log(-np.expm1(-value))
    return float(out) if out.ndim == 0 else out


def joint_vector(model, name: str, value: float, *, positive: bool):
    """A per-joint variable ``(n,)`` on ``model`` starting at ``value`` (softplus-raw when positive)."""
    n, dtype = model.n_dof, model.dtype
    var = model.add_weight(name=name, shape=(n,), initializer="zeros", dtype=dtype)
    var.assign(np.full(n, softplus_inverse(value) if positive else value, dtype=dtype))
    return var


def assign_positive(var, values) -> None:
    """Set a softplus-raw variable so that ``softplus(var) = values`` (``values > 0``, clipped at 1e-12)."""
    values = np.maximum(np.asarray(values, np.float64), 1e-12)
    var.assign(softplus_inverse(values).astype(np.dtype(str(var.dtype))))


def positive(var):
    """``softplus(var)`` as a tensor."""
    return tf.nn.softplus(var)


class NumpyForce:
    """The numpy twin of a force term (a snapshot of its variables), for :class:`lnn.fast.FastLagrangian`."""

    def force(self, q: np.ndarray, qd: np.ndarray) -> np.ndarray:
        """The generalized force ``f(q, qd)``.

        Parameters
        ----------
        q, qd : numpy.ndarray, shape ``(B, n)``
            In the snapshot's dtype.

        Returns
        -------
        numpy.ndarray, shape ``(B, n)``
        """
        raise NotImplementedError


class _NumpyThroughTensorFlow(NumpyForce):
    """The default twin of a force without a numpy form: its TensorFlow ``force``, called eagerly."""

    def __init__(self, term, dtype) -> None:
        self.term, self.dtype = term, np.dtype(dtype)

    def force(self, q, qd):
        """``term.force`` on tensors of the model dtype, as numpy in the snapshot's dtype."""
        model_dtype = self.term.model.dtype
        out = self.term.force(tf.constant(q, model_dtype), tf.constant(qd, model_dtype))
        return np.asarray(out, dtype=self.dtype)


class Force:
    """A learned generalized-force term of one :class:`lnn.LagrangianNetwork`.

    A force ``f(q, qd)`` (shape ``(B, n)``) joins the motor torques on the
    right-hand side of the Euler-Lagrange equations, ``M qdd = dL/dq -
    (d2L/dqd dq) qd + tau + sum_k f_k``; the motors spend ``-f_k`` on it
    (:meth:`lnn.LagrangianNetwork.friction_torque`). The constructor creates
    the term's variables on the model (``model.add_weight``, or a Keras layer
    set as an attribute of the model): their names are part of saved files.
    The term is built when its name is in the model's ``friction=`` (or
    ``damping=True`` for ``"damping"``), after the kind's networks, in
    registration order.

    What the model, :mod:`lnn.fast` and the integrators call (nothing else):

    - :meth:`force` (TensorFlow, differentiable, compiled under XLA);
    - :meth:`numpy`, the numpy twin of the current variables (default: the
      TensorFlow :meth:`force` called eagerly, correct but slow);
    - :meth:`damping_matrix`, for a force that is exactly ``-D qd`` with a
      constant ``D``: :meth:`lnn.LagrangianNetwork.damping_matrix` sums them;
    - :meth:`parameters`, the physical parameters for reports.

    **Linear forces** (``linear = True``, e.g. :class:`LinearForce`) are per
    joint and linear in their coefficients: ``features`` coefficients per
    joint (one for most), the torque the term costs at joint ``j`` being
    ``sum_k coefficient_kj * basis_k[:, j]``, so least squares
    (:mod:`lnn.identification`, :func:`lnn.baseline.least_squares`) fits
    them from their file alone, through

    - ``@classmethod bases(cls, q, qd, *, velocity) -> numpy.ndarray (features, N, n)``
      (numpy float64; ``velocity`` the model's ``friction_velocity``): the
      regressor columns, e.g. ``qd`` (viscous), ``tanh(qd / velocity)``
      (Coulomb), ones (offset); ``basis`` is the one of a one-feature force,
      ``(N, n)``;
    - ``@classmethod blocks(cls)``: the names of the least-squares blocks of
      ``n`` columns each (the force's name, or ``name[k]`` per feature);
    - ``coefficients() -> numpy.ndarray (n,)`` (``(features, n)`` with
      several features) and ``assign(coefficients)`` on the instance
      (``f = -sum_k coefficients_k * basis_k``).

    Class attributes
    ----------------
    name : str
        The term's name in ``friction=`` (``damping=True`` is short for ``"damping"``).
    dissipative : bool
        True when ``qd . f(q, qd) <= 0`` for every state (a friction).
    linear : bool
        Per joint and linear in its coefficients (provides ``basis``,
        ``coefficients``, ``assign``). False by default (a damping matrix or a
        network are not).
    nonnegative : bool
        The coefficients of a linear force are ``>= 0`` (viscous, Coulomb); an
        offset's are free.
    refinement : bool
        A linear force that refines another's shape (Stribeck, a Coulomb level
        that changes with the position): :func:`lnn.identify` tries its
        columns with and without it and lets the leave-one-recording-out
        validation choose (few or short logs can fit a refinement to noise).
    needs_q : bool
        The force depends on ``q`` (``model.friction(qd)`` then needs ``q=``).
    """

    name: ClassVar[str] = ""
    dissipative: ClassVar[bool] = True
    linear: ClassVar[bool] = False
    nonnegative: ClassVar[bool] = False
    refinement: ClassVar[bool] = False
    needs_q: ClassVar[bool] = False

    def __init__(self, model) -> None:
        self.model = model

    def force(self, q, qd):
        """The generalized force ``f(q, qd)``.

        Parameters
        ----------
        q, qd : tensor, shape ``(B, n)``
            In the model dtype (``q`` may be zeros when ``needs_q`` is False).

        Returns
        -------
        tensor, shape ``(B, n)``
        """
        raise NotImplementedError

    def numpy(self, dtype) -> NumpyForce:
        """A numpy snapshot of the current variables, computing in ``dtype`` (default: TensorFlow, eagerly)."""
        return _NumpyThroughTensorFlow(self, dtype)

    def damping_matrix(self):
        """``D`` (tensor ``(n, n)``) when the force is exactly ``-D qd`` with a constant ``D``, else None."""
        return None

    def parameters(self) -> dict:
        """The term's physical parameters as numpy arrays (e.g. ``{"viscous": b (n,)}``; default none)."""
        return {}


class NumpyLinearForce(NumpyForce):
    """The numpy twin of a :class:`LinearForce`: ``-sum_k coefficients_k * columns_k(numpy, q, qd, velocity)``."""

    def __init__(self, coefficients: np.ndarray, columns, velocity: float) -> None:
        self.coefficients, self.columns, self.velocity = coefficients, columns, velocity

    def force(self, q, qd):
        """``-sum_k coefficients_k * basis_k``, shape ``(B, n)``."""
        if self.coefficients.ndim == 1:
            return -self.coefficients * self.columns(np, q, qd, self.velocity)
        return -sum(k * column for k, column in zip(self.coefficients, self.columns(np, q, qd, self.velocity)))


class LinearForce(Force):
    """A per-joint force linear in one learned coefficient per joint: ``f_j = -k_j * phi_j(q, qd)``.

    A subclass names its variable and gives the basis once, for numpy and
    TensorFlow alike (:meth:`columns`); everything else (TensorFlow force,
    numpy twin, least-squares interface) follows.

    Class attributes
    ----------------
    variable : str
        The name of the per-joint variable ``(n,)`` (saved files carry it) and
        of the model attribute that holds it.
    initial : float
        The initial coefficient.
    nonnegative : bool
        ``k >= 0`` (stored raw, through softplus: ``k = softplus(raw)``);
        default True.
    features : int
        Coefficients per joint (default 1): with more, :meth:`columns`
        returns one basis per feature and the variable has shape
        ``(features, n)``.
    """

    linear: ClassVar[bool] = True
    nonnegative: ClassVar[bool] = True
    variable: ClassVar[str] = ""
    initial: ClassVar[float] = 0.01
    features: ClassVar[int] = 1

    def __init__(self, model) -> None:
        super().__init__(model)
        if not self.variable:
            raise TypeError(f"{type(self).__qualname__} must name its variable (class attribute 'variable')")
        if self.features == 1:
            var = joint_vector(model, self.variable, self.initial, positive=self.nonnegative)
        else:
            shape = (self.features, model.n_dof)
            var = model.add_weight(name=self.variable, shape=shape, initializer="zeros", dtype=model.dtype)
            start = softplus_inverse(self.initial / self.features) if self.nonnegative else self.initial
            var.assign(np.full(shape, start, dtype=model.dtype))
        setattr(model, self.variable, var)

    @staticmethod
    def columns(xp, q, qd, velocity):
        """The basis ``phi(q, qd)``, shape ``(B, n)``, in the array library ``xp`` (with ``features > 1``: a
        tuple of ``features`` such bases).

        Parameters
        ----------
        xp : module
            ``numpy`` or ``tensorflow``: use functions both have (``abs``,
            ``tanh``, ``exp``, ``sign``, ``ones_like``, ``sin``, ...).
        q, qd : array or tensor, shape ``(B, n)``
        velocity : float
            The model's ``friction_velocity``.
        """
        raise NotImplementedError

    @classmethod
    def blocks(cls) -> tuple[str, ...]:
        """The names of the term's least-squares blocks (``n`` columns each): its name, or ``name[k]`` per feature."""
        return (cls.name,) if cls.features == 1 else tuple(f"{cls.name}[{k}]" for k in range(cls.features))

    @classmethod
    def gather(cls, block_values) -> np.ndarray:
        """The coefficients ``(n,)`` (``(features, n)`` with several features) from ``block_values(block)``,
        the ``(n,)`` coefficients of each of :meth:`blocks` (a least-squares solution's)."""
        values = np.stack([np.asarray(block_values(block), np.float64) for block in cls.blocks()])
        return values[0] if cls.features == 1 else values

    @classmethod
    def bases(cls, q, qd, *, velocity: float) -> np.ndarray:
        """The least-squares columns of every feature: the torque of joint ``j`` is
        ``sum_k coefficients()[k, j] * bases[k, :, j]``.

        Parameters
        ----------
        q, qd : array_like, shape ``(N, n)``
        velocity : float
            The model's ``friction_velocity``.

        Returns
        -------
        numpy.ndarray, shape ``(features, N, n)``, float64
        """
        q, qd = np.asarray(q, np.float64), np.asarray(qd, np.float64)
        out = cls.columns(np, q, qd, float(velocity))
        out = (out,) if cls.features == 1 else tuple(out)
        return np.stack([np.broadcast_to(np.asarray(b, np.float64), qd.shape) for b in out])

    @classmethod
    def basis(cls, q, qd, *, velocity: float) -> np.ndarray:
        """The least-squares columns of a one-feature force, ``bases(q, qd, velocity=velocity)[0]``, shape
        ``(N, n)``: the torque of joint ``j`` is ``coefficients()[j] * basis[:, j]``.

        Raises
        ------
        TypeError
            For a force of several features (use :meth:`bases`).
        """
        if cls.features != 1:
            raise TypeError(f"force {cls.name!r} has {cls.features} features per joint: use {cls.__name__}.bases")
        return cls.bases(q, qd, velocity=velocity)[0]

    @classmethod
    def torque(cls, coefficients, q, qd, *, velocity: float) -> np.ndarray:
        """The torque the term costs, ``sum_k coefficients_k * basis_k``, shape ``(N, n)`` (numpy float64).

        Parameters
        ----------
        coefficients : array_like, shape ``(n,)`` or ``(features, n)``
        q, qd : array_like, shape ``(N, n)``
        velocity : float
        """
        k = np.asarray(coefficients, np.float64).reshape(cls.features, -1)
        return np.einsum("kj,knj->nj", k, cls.bases(q, qd, velocity=velocity))

    def _coefficients(self):
        var = getattr(self.model, self.variable)
        return positive(var) if self.nonnegative else tf.convert_to_tensor(var)

    def coefficients(self) -> np.ndarray:
        """The current coefficients ``k``, shape ``(n,)`` (``(features, n)`` with several features)."""
        return np.asarray(self._coefficients())

    def assign(self, coefficients) -> None:
        """Set ``k`` (``(n,)`` or ``(features, n)``; clipped at 1e-12 when ``nonnegative``)."""
        var = getattr(self.model, self.variable)
        values = np.broadcast_to(np.asarray(coefficients, np.float64), tuple(var.shape))
        if self.nonnegative:
            assign_positive(var, values)
        else:
            var.assign(values.astype(np.dtype(str(var.dtype))))

    def force(self, q, qd):
        """``-sum_k k_k * phi_k(q, qd)``."""
        k = self._coefficients()
        phi = self.columns(tf, q, qd, self.model.friction_velocity)
        if self.features == 1:
            return -k * phi
        return -tf.add_n([k[i] * phi[i] for i in range(self.features)])

    def numpy(self, dtype):
        """:class:`NumpyLinearForce` of the current ``k``."""
        return NumpyLinearForce(self.coefficients().astype(dtype), self.columns, float(self.model.friction_velocity))

    def parameters(self):
        """``{name: k (n,)}``."""
        return {self.name: self.coefficients()}


#: name -> :class:`Force` subclass, in registration order (the order of the terms and of their variables).
FORCES: dict[str, type] = {}


def register_force(cls: type) -> type:
    """Register a :class:`Force` subclass under ``cls.name`` (usable as a class decorator).

    Raises
    ------
    TypeError
        If ``cls`` is not a named :class:`Force` subclass.
    ValueError
        If another force holds that name.
    """
    return register_named(FORCES, cls, base=Force, what="force")


def force_names() -> tuple[str, ...]:
    """The registered forces' names."""
    return tuple(FORCES)


def friction_names(friction) -> tuple[str, ...]:
    """The force terms named by a ``friction=`` argument (the registry's one parser).

    Parameters
    ----------
    friction : str or None
        ``None`` (no force) or registered names joined by ``+``, e.g.
        ``"viscous+coulomb"``, ``"viscous+coulomb+offset"``,
        ``"viscous+coulomb+network"``, ``"damping+viscous"``.

    Returns
    -------
    tuple of str
        The names, in registration order, without repeats.

    Raises
    ------
    TypeError
        If ``friction`` is neither None nor a string.
    ValueError
        For a name that is not a registered force (the message lists them).
    """
    if friction is None or friction == "" or friction == "none":
        return ()
    if not isinstance(friction, str):
        raise TypeError(f"friction must be None or a string like 'viscous+coulomb', got {friction!r}")
    names = [part.strip() for part in friction.split("+")]
    unknown = [name for name in names if name not in FORCES]
    if unknown:
        raise ValueError(
            f"friction must be None or terms joined by '+' out of {tuple(FORCES)}; got "
            f"{friction!r} (unknown: {', '.join(map(repr, unknown))})"
        )
    return tuple(name for name in FORCES if name in names)
