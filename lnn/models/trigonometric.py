"""Kind ``"trigonometric"``: a Lagrangian linear in its parameters over a basis of the coordinates.

For a chain of revolute joints the mass matrix and the potential are
trigonometric polynomials of the joint angles. The planar double pendulum's,
with ``c_i = cos q_i`` and ``s_i = sin q_i``::

    M_11 = a + 2 b c_2,   M_12 = d + b c_2,   M_22 = d
    V    = e c_1 + f (c_1 c_2 - s_1 s_2)            (= e cos q_1 + f cos(q_1 + q_2))

This kind writes every such Lagrangian with no kinematics at all::

    L = 1/2 qd^T M(q) qd - V(q),   M(q) = sum_k Theta_k phi_k(q),   V(q) = sum_{k >= 1} beta_k phi_k(q)

with ``Theta_k`` symmetric ``n x n`` and ``phi_k`` the products of at most
``order`` coordinates' factors: ``cos q_i, sin q_i`` of an angle (and
``cos 2q_i, sin 2q_i`` with two harmonics), ``x_i, x_i^2`` of a linear
coordinate (``phi_0 = 1``). The torque is linear in
``(Theta, beta)`` (:meth:`Basis.regressor`)::

    tau_i = sum_k  phi_k (Theta_k qdd)_i + (grad phi_k . qd) (Theta_k qd)_i
                   - 1/2 (d phi_k / d q_i) qd^T Theta_k qd + beta_k (d phi_k / d q_i)

so :func:`lnn.identify` fits it by least squares where no URDF is given (the
robot's kinematics unknown), as it fits the rigid body's inertias where one
is. A mass-matrix entry of a chain of revolute joints is of degree two in
each joint's ``cos, sin``, its potential of degree one: the full product of
two harmonics is exact for every such chain, 3-D ones included, and of the
first harmonics for every planar one (and the cart-pole).
:func:`choose_basis` takes the first where the parameters stay within
:data:`MAX_PARAMETERS` (up to three joints), else the second at the largest
product order within it (a 7-DOF arm gets products of single coordinates:
an approximation that the validation data judge against the network).

``M`` is positive definite only where the data made it so (no
parametrisation keeps a linear model's ``M`` definite): the inverse dynamics
hold everywhere, the forward dynamics raise :class:`lnn.mechanics.MassMatrixError`
where ``M`` is indefinite. Variables ``trigonometric_mass (n (n + 1) / 2, K)``
(the upper triangle of every ``Theta_k``, row-major) and
``trigonometric_potential (K - 1,)``; the basis follows from ``angular`` and
the model's ``harmonics`` (default :func:`choose_basis`). ``residual=True`` adds the residual
Lagrangian of :mod:`lnn.models.residual` (what the basis misses). Closed forms in TensorFlow and numpy
(:class:`NumpyTrigonometric`), equal to the nested tapes (``tests/test_trigonometric.py``).
"""

from __future__ import annotations

import dataclasses
import itertools

import numpy as np
import tensorflow as tf

from lnn.models.registry import Kind, NumpyKind, Terms, register_kind
from lnn.models.residual import NETWORKS, ResidualLagrangian
from lnn.models.triangular import symmetric_index

__all__ = ["MAX_PARAMETERS", "Basis", "NumpyTrigonometric", "Trigonometric", "choose_basis"]

#: Largest number of parameters (mass and potential) that :func:`choose_basis` allows: the least-squares
#: fit of :func:`lnn.identify` builds a dense regressor of ``N n`` rows by this many columns, and its
#: leave-one-recording-out validation solves it once per setting.
MAX_PARAMETERS = 1000


def _functions(angular, harmonics: int, order: int) -> int:
    """Basis functions: products of at most ``order`` coordinates' non-constant factors (``2 harmonics``
    of an angle, two of a linear coordinate), the constant included."""
    counts = [1] + [0] * len(angular)  # elementary symmetric sums of the factor counts, by product size
    for a in angular:
        factors = 2 * harmonics if a else 2
        for r in range(len(angular), 0, -1):
            counts[r] += counts[r - 1] * factors
    return sum(counts[: order + 1])


def _parameters(angular, harmonics: int, order: int) -> int:
    n = len(angular)
    k = _functions(angular, harmonics, order)
    return n * (n + 1) // 2 * k + k - 1


def choose_basis(angular) -> tuple[int, int]:
    """``(harmonics, order)`` of the default basis of coordinates ``angular``.

    The full product of the angles' first and second harmonics (``cos q,
    sin q, cos 2q, sin 2q``) where its parameters stay within
    :data:`MAX_PARAMETERS` (up to three joints): exact for every chain of
    up to three revolute joints, 3-D ones included (a mass matrix entry is of
    degree two in each joint's ``cos, sin``, the potential of degree one).
    Else the first harmonics at the largest product order within the cap:
    the full product for four joints (exact for planar chains), products of
    pairs for five, single coordinates for six and seven.
    """
    angular = tuple(bool(a) for a in angular)
    n = len(angular)
    if _parameters(angular, 2, n) <= MAX_PARAMETERS:
        return 2, n
    return 1, _largest_order(angular, 1)


def _largest_order(angular, harmonics: int) -> int:
    """The largest product order whose parameters stay within :data:`MAX_PARAMETERS` (at least 1)."""
    orders = [r for r in range(1, len(angular) + 1) if _parameters(angular, harmonics, r) <= MAX_PARAMETERS]
    return max(orders, default=1)


@dataclasses.dataclass(frozen=True, eq=False)
class Basis:
    """The basis ``phi_k(q)`` and the torque regressor of a trigonometric Lagrangian (numpy).

    Attributes
    ----------
    angular : tuple of bool, length ``n``
        Which coordinates are angles (factors ``cos q, sin q`` and, with
        ``harmonics=2``, ``cos 2q, sin 2q``; else ``x, x^2``).
    harmonics : int
        1 or 2.
    order : int
        At most this many coordinates in a product.
    codes : numpy.ndarray of int, shape ``(K, n)``
        Factor of each coordinate in each function: 0 (one), 1 (``cos q`` or
        ``x``), 2 (``sin q`` or ``x^2``), 3 (``cos 2q``), 4 (``sin 2q``); row 0
        is the constant.
    """

    angular: tuple[bool, ...]
    harmonics: int
    order: int
    codes: np.ndarray

    @classmethod
    def of(cls, angular, *, harmonics: int | None = None, order: int | None = None) -> Basis:
        """The basis of coordinates ``angular`` (default harmonics: :func:`choose_basis`; default order: the
        largest within :data:`MAX_PARAMETERS`)."""
        angular = tuple(bool(a) for a in angular)
        n = len(angular)
        harmonics = choose_basis(angular)[0] if harmonics is None else harmonics
        if harmonics not in (1, 2):
            raise ValueError(f"harmonics must be 1 or 2; got {harmonics!r}")
        order = _largest_order(angular, harmonics) if order is None else int(order)
        if not 1 <= order <= n:
            raise ValueError(f"order must be in 1..{n} (the coordinates); got {order}")
        ranges = [range(1 + 2 * harmonics) if a else range(3) for a in angular]
        codes = [c for c in itertools.product(*ranges) if np.count_nonzero(c) <= order]
        codes.sort(key=lambda c: (np.count_nonzero(c), c))
        return cls(angular, harmonics, order, np.array(codes, dtype=np.int64))

    @property
    def n(self) -> int:
        """Coordinates ``n``."""
        return len(self.angular)

    @property
    def size(self) -> int:
        """Functions ``K``."""
        return len(self.codes)

    @property
    def pairs(self) -> tuple[np.ndarray, np.ndarray]:
        """Row and column of every upper-triangle entry of ``M``, row-major."""
        return np.triu_indices(self.n)

    @property
    def n_parameters(self) -> int:
        """``n (n + 1) / 2 K`` mass and ``K - 1`` potential parameters."""
        return len(self.pairs[0]) * self.size + self.size - 1

    def factors(self, q):
        """Each coordinate's factors and their slopes, two arrays ``(B, n, 5)`` in the order of :attr:`codes`."""
        return _factors(np, np.asarray(q), np.asarray(self.angular))

    def evaluate(self, q):
        """``phi (B, K)`` and its gradient ``d phi_k / d q_i (B, K, n)``."""
        values, slopes = self.factors(q)
        columns = np.arange(self.n)
        v = values[:, columns, self.codes]  # (B, K, n): coordinate i's factor in function k
        d = slopes[:, columns, self.codes]
        phi = np.prod(v, axis=-1)
        grad = np.stack([np.prod(np.where(columns == i, d, v), axis=-1) for i in range(self.n)], -1)
        return phi, grad

    def regressor(self, q, qd, qdd) -> np.ndarray:
        """``Y (N, n, P)`` with ``tau = Y z``, ``z = [Theta (pairs, K) row-major, beta (K - 1)]``.

        Parameters
        ----------
        q, qd, qdd : array_like, shape ``(N, n)``
        """
        q, qd, qdd = (np.asarray(x, np.float64) for x in (q, qd, qdd))
        phi, grad = self.evaluate(q)
        rate = np.einsum("bki,bi->bk", grad, qd)  # d phi_k / dt
        rows, cols = self.pairs
        blocks = []
        for a, b in zip(rows, cols):  # Theta_k's entry (a, b) and (b, a)
            s_qdd = np.zeros_like(qdd)
            s_qd = np.zeros_like(qd)
            s_qdd[:, a], s_qd[:, a] = qdd[:, b], qd[:, b]
            s_qdd[:, b], s_qd[:, b] = qdd[:, a], qd[:, a]
            quad = qd[:, a] * qd[:, b] * (1.0 if a == b else 2.0)  # qd^T S qd
            blocks.append(
                phi[:, None, :] * s_qdd[:, :, None]
                + rate[:, None, :] * s_qd[:, :, None]
                - 0.5 * grad.transpose(0, 2, 1) * quad[:, None, None]
            )
        blocks.append(grad[:, 1:].transpose(0, 2, 1))
        return np.concatenate(blocks, axis=2)

    def split(self, z) -> tuple[np.ndarray, np.ndarray]:
        """``(Theta (pairs, K), beta (K - 1,))`` of a parameter vector in :meth:`regressor` order."""
        z = np.asarray(z, np.float64).reshape(-1)
        if z.shape != (self.n_parameters,):
            raise ValueError(f"expected {self.n_parameters} parameters of the trigonometric basis; got {z.shape}")
        m = len(self.pairs[0]) * self.size
        return z[:m].reshape(len(self.pairs[0]), self.size), z[m:]


def _factors(xp, q, angular):
    """``(values, slopes)``, each ``(B, n, 5)``: one, ``cos q | x``, ``sin q | x^2``, ``cos 2q | 0``,
    ``sin 2q | 0`` and their derivatives, in numpy (``xp = np``) or TensorFlow (``xp = tf``)."""
    where = xp.where
    one, zero = xp.ones_like(q), xp.zeros_like(q)
    c, s, c2, s2 = xp.cos(q), xp.sin(q), xp.cos(2 * q), xp.sin(2 * q)
    values = [one, where(angular, c, q), where(angular, s, q * q), where(angular, c2, zero), where(angular, s2, zero)]
    slopes = [zero, where(angular, -s, one), where(angular, c, 2 * q), where(angular, -2 * s2, zero)]
    slopes.append(where(angular, 2 * c2, zero))
    return xp.stack(values, -1), xp.stack(slopes, -1)


@register_kind
class Trigonometric(Kind):
    """``L = 1/2 qd^T M(q) qd - V(q)``, ``M`` and ``V`` linear in their parameters over a trigonometric basis."""

    name = "trigonometric"
    networks = NETWORKS
    mass_depends_on_qd = False
    takes_residual = True
    takes_harmonics = True

    def build(self, *, n_features, seeds, options):
        """The two variables (zeros: :meth:`assign` sets them, e.g. from :func:`lnn.identify`'s least squares),
        and the residual Lagrangian's networks if asked."""
        m = self.model
        self.residual = bool(options.get("residual", False))
        self._residual = None
        if self.residual:
            self._residual = ResidualLagrangian(m, n_features=n_features, seeds=seeds, options=options)
        self.basis = Basis.of(m.angular, harmonics=options.get("harmonics"))
        pairs, K = len(self.basis.pairs[0]), self.basis.size
        dtype = options["dtype"]
        m.trigonometric_mass = m.add_weight(
            name="trigonometric_mass", shape=(pairs, K), initializer="zeros", dtype=dtype
        )
        m.trigonometric_potential = m.add_weight(
            name="trigonometric_potential", shape=(K - 1,), initializer="zeros", dtype=dtype
        )
        rows, cols = self.basis.pairs
        self._symmetric_index = symmetric_index(rows, cols, m.n_dof)  # upper triangle -> symmetric matrix
        self._codes = tf.constant(self.basis.codes)
        self._angular = tf.constant(np.asarray(m.angular))

    def nets(self) -> list:
        """The residual networks (none without ``residual=True``)."""
        return super().nets() if self.residual else []

    def config(self) -> dict:
        """``residual`` and ``harmonics``, for the model's config (the order follows from them and ``angular``)."""
        return {"residual": self.residual, "harmonics": self.basis.harmonics}

    # -- parameters ------------------------------------------------------------------
    def assign(self, z) -> None:
        """Set the parameters from a vector in :meth:`Basis.regressor` order."""
        theta, beta = self.basis.split(z)
        self.model.trigonometric_mass.assign(theta)
        self.model.trigonometric_potential.assign(beta)

    def parameters(self) -> np.ndarray:
        """The parameters as one vector, in :meth:`Basis.regressor` order."""
        m = self.model
        return np.concatenate([np.asarray(m.trigonometric_mass).reshape(-1), np.asarray(m.trigonometric_potential)])

    def regressor(self, q, qd, qdd) -> np.ndarray:
        """``Y (N, n, P)`` of :meth:`Basis.regressor`: the torque is ``Y @ parameters()``."""
        return self.basis.regressor(q, qd, qdd)

    # -- TensorFlow ------------------------------------------------------------------
    def _evaluate(self, q):
        """``phi (B, K)`` and ``grad phi (B, K, n)`` in TensorFlow."""
        values, slopes = _factors(tf, q, self._angular)
        n = self.model.n_dof
        # (B, n, 5) -> (B, K, n): coordinate i's factor in function k
        v = tf.stack([tf.gather(values[:, i, :], self._codes[:, i], axis=1) for i in range(n)], -1)
        d = tf.stack([tf.gather(slopes[:, i, :], self._codes[:, i], axis=1) for i in range(n)], -1)
        phi = tf.reduce_prod(v, axis=-1)
        grad = tf.stack(
            [tf.reduce_prod(tf.concat([v[:, :, :i], d[:, :, i : i + 1], v[:, :, i + 1 :]], -1), -1) for i in range(n)],
            -1,
        )
        return phi, grad

    def _symmetric(self, entries):
        """``(B, pairs)`` upper-triangle entries -> ``(B, n, n)``."""
        n = self.model.n_dof
        return tf.reshape(tf.gather(entries, self._symmetric_index, axis=-1), (-1, n, n))

    def _mass(self, phi):
        """``M = sum_k Theta_k phi_k``, ``(B, n, n)``, at the basis values ``phi (B, K)``."""
        return self._symmetric(tf.matmul(phi, self.model.trigonometric_mass, transpose_b=True))

    def kinetic(self, q, qd):
        """``1/2 qd^T M(q) qd`` (+ the residual's)."""
        mass = self._mass(self._evaluate(q)[0])
        t = 0.5 * tf.einsum("bi,bij,bj->b", qd, mass, qd)
        return t + self._residual.kinetic(q, qd) if self.residual else t

    def potential(self, q):
        """``sum_k beta_k phi_k(q)`` (``k >= 1``; + the residual's)."""
        phi, _ = self._evaluate(q)
        v = tf.linalg.matvec(phi[:, 1:], self.model.trigonometric_potential)
        return v + self._residual.potential(q) if self.residual else v

    def terms(self, q, qd, *, hessian, mixed, grad_q):
        """Closed form: ``M = sum_k Theta_k phi_k``, ``dL/dq`` and ``(dM/dt) qd`` from ``grad phi``
        (the residual Lagrangian's terms from nested tapes)."""
        own = self._terms(q, qd, mixed=mixed, grad_q=grad_q)
        if not self.residual:
            return own
        m_r, gq_r, mix_r = self._residual.dynamics_terms(q, qd)
        value = own.lagrangian + self._residual.kinetic(q, qd) - self._residual.potential(q)
        return Terms(
            value,
            None if own.grad_q is None else own.grad_q + gq_r,
            own.grad_qd + tf.linalg.matvec(m_r, qd),
            own.mass + m_r,
            None if own.mixed is None else own.mixed + mix_r,
        )

    def _terms(self, q, qd, *, mixed, grad_q):
        """The basis's own terms (no residual); ``mass`` and ``grad_qd`` always."""
        m = self.model
        phi, grad = self._evaluate(q)
        mass = self._mass(phi)
        p = tf.linalg.matvec(mass, qd)
        v = tf.linalg.matvec(phi[:, 1:], m.trigonometric_potential)
        value = 0.5 * tf.reduce_sum(qd * p, -1) - v
        d_entries = tf.einsum("bki,pk->bpi", grad, m.trigonometric_mass)  # d M_ab / d q_i, (B, pairs, n)
        gq = mix = None
        if grad_q:
            rows, cols = self.basis.pairs
            weight = tf.constant(np.where(rows == cols, 1.0, 2.0), dtype=qd.dtype)
            quad = tf.gather(qd, rows, axis=1) * tf.gather(qd, cols, axis=1) * weight  # qd^T S_ab qd
            gq = 0.5 * tf.einsum("bpi,bp->bi", d_entries, quad)
            gq = gq - tf.einsum("bki,k->bi", grad[:, 1:], m.trigonometric_potential)
        if mixed:
            rate = self._symmetric(tf.einsum("bpi,bi->bp", d_entries, qd))  # dM/dt
            mix = tf.linalg.matvec(rate, qd)
        return Terms(value, gq, p, mass, mix)

    def inverse_dynamics(self, q, qd, qdd):
        """``M qdd + (dM/dt) qd - dL/dq`` in closed form (+ the residual's, a forward-over-reverse pass)."""
        t = self._terms(q, qd, mixed=True, grad_q=True)
        tau = tf.linalg.matvec(t.mass, qdd) + t.mixed - t.grad_q
        return tau + self._residual.inverse_dynamics(q, qd, qdd) if self.residual else tau

    def mass_matrix(self, q, qd):
        """``M(q)`` (``qd`` unused)."""
        mass = self._mass(self._evaluate(q)[0])
        return mass + self._residual.mass(q) if self.residual else mass

    def energy(self, q, qd):
        """``E = T + V`` (``T`` is quadratic in ``qd``)."""
        return self.kinetic(q, qd) + self.potential(q)

    # -- numpy -----------------------------------------------------------------------
    def numpy(self, fold):
        """:class:`NumpyTrigonometric` of the current parameters (None with the residual: TensorFlow then)."""
        if self.residual:
            return None
        m = self.model
        dtype = m.numpy_dtype
        return NumpyTrigonometric(
            self.basis,
            np.asarray(m.trigonometric_mass).astype(dtype),
            np.asarray(m.trigonometric_potential).astype(dtype),
        )


@dataclasses.dataclass(frozen=True, eq=False)
class NumpyTrigonometric(NumpyKind):
    """numpy twin of :class:`Trigonometric`: ``theta (pairs, K)``, ``beta (K - 1,)`` over ``basis``."""

    basis: Basis
    theta: np.ndarray
    beta: np.ndarray

    def _symmetric(self, entries):
        """``(B, pairs)`` upper-triangle entries -> ``(B, n, n)``."""
        n = self.basis.n
        rows, cols = self.basis.pairs
        out = np.zeros((entries.shape[0], n, n), dtype=entries.dtype)
        out[:, rows, cols] = entries
        out[:, cols, rows] = entries
        return out

    def mass_matrix(self, q, qd, basis):
        """``M(q)``."""
        return self._symmetric(self.basis.evaluate(q)[0] @ self.theta.T)

    def dynamics(self, q, qd, basis):
        """``M`` and ``dL/dq - (dM/dt) qd``."""
        rows, cols = self.basis.pairs
        phi, grad = self.basis.evaluate(q)
        mass = self._symmetric(phi @ self.theta.T)
        d_entries = np.einsum("bki,pk->bpi", grad, self.theta)  # d M_ab / d q_i, (B, pairs, n)
        quad = qd[:, rows] * qd[:, cols] * np.where(rows == cols, 1.0, 2.0)
        grad_q = 0.5 * np.einsum("bpi,bp->bi", d_entries, quad) - np.einsum("bki,k->bi", grad[:, 1:], self.beta)
        rate = self._symmetric(np.einsum("bpi,bi->bp", d_entries, qd))  # dM/dt
        return mass, grad_q - np.einsum("bij,bj->bi", rate, qd)

    def energy(self, q, qd, basis):
        """``E = 1/2 qd^T M qd + V``."""
        phi = self.basis.evaluate(q)[0]
        mass = self._symmetric(phi @ self.theta.T)
        return 0.5 * np.einsum("bi,bij,bj->b", qd, mass, qd) + phi[:, 1:] @ self.beta
