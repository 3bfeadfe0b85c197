"""Fast numpy inference of a trained :class:`lnn.LagrangianNetwork`.

``solve_ivp`` calls the right-hand side once per solver stage, and at small
batches the cost of a call is dispatch, not arithmetic: any ``tf.function``
call costs 130–400 µs on a small CPU, against a few µs for a numpy function.
:class:`FastLagrangian` is a numpy snapshot of a model's weights that
evaluates the Euler–Lagrange accelerations in closed form, as a handful of
batched matmuls. It knows no model kind: each kind's module gives the numpy
twin of its mathematics (:meth:`lnn.models.Kind.numpy`, e.g.
:mod:`lnn.models.scalar` and :mod:`lnn.models.structured`), with the input
map folded into the first layer of every network
(:meth:`lnn.models.mlp.NumpyNet.fold`); this module adds the inputs, the
learned forces (each force's numpy twin, :meth:`lnn.models.forces.Force.numpy`)
and the Cholesky solve. A kind without a numpy twin is
evaluated through the model's TensorFlow methods (still correct, slower).

:meth:`FastLagrangian.acceleration` equals the TensorFlow path to rounding
(tests: 1e-10 in float64). :func:`acceleration_jacobian` gives the exact
``d qdd / d [q, qd]`` by TensorFlow autodiff of the compiled acceleration, for
scipy's implicit solvers.

Batched calls allocate megabytes of temporaries; the first snapshot asks glibc
to keep 64 MB of heap slack (``mallopt(M_TOP_PAD)``) so that they are not
returned to the kernel and faulted in again on every call (up to 2x faster at
batch 256; set ``MALLOC_TOP_PAD_`` in the environment to choose another value).

A :class:`FastLagrangian` is a *snapshot*: it does not see later changes of the
model's weights; take a new one after training (``model.numpy_acceleration``
does so each time the attribute is looked up).
"""

from __future__ import annotations

import dataclasses

import numpy as np

from lnn import _validate
from lnn.errors import IndefiniteMassMatrixError
from lnn.mechanics import mass_matrix_health

__all__ = ["FastLagrangian", "IndefiniteMassMatrixError", "acceleration_jacobian"]


# ----------------------------------------------------------------------------- memory

_M_TOP_PAD = -2  # glibc mallopt parameter
_TOP_PAD_BYTES = 64 << 20
_MALLOC_TUNED = []


def _keep_heap_padded() -> None:
    """Ask glibc to keep 64 MB of slack at the top of the heap (``M_TOP_PAD``), once.

    A batched right-hand side allocates a few MB of temporaries per call and
    frees them; by default glibc hands that memory back to the kernel and
    page-faults it in again on the next call, which doubled the cost of a
    7-DOF, batch-256 call (4.4 ms against 2.4 ms with the padding, measured
    on this package's benchmark machine). Nothing happens off glibc, or when
    the environment sets ``MALLOC_TOP_PAD_`` itself.
    """
    if _MALLOC_TUNED:
        return
    _MALLOC_TUNED.append(True)
    import os
    import sys

    if not sys.platform.startswith("linux") or "MALLOC_TOP_PAD_" in os.environ:
        return
    try:
        import ctypes

        libc = ctypes.CDLL("libc.so.6")
        libc.mallopt(_M_TOP_PAD, _TOP_PAD_BYTES)
    except (OSError, AttributeError):  # not glibc
        pass


# ----------------------------------------------------------------------------- the snapshot


@dataclasses.dataclass(frozen=True, eq=False)
class FastLagrangian:
    """A numpy snapshot of a :class:`lnn.LagrangianNetwork` for fast inference.

    Build it with :meth:`from_model`. Every method takes numpy arrays ``q``,
    ``qd`` (and ``tau``) of shape ``(B, n)`` or ``(n,)`` and computes in the
    model's dtype.

    Attributes
    ----------
    n_dof : int
    angular : tuple of bool
    kind : str
        The model's kind (a name of :data:`lnn.models.KINDS`).
    dtype : numpy.dtype
    damping : numpy.ndarray or None, shape ``(n, n)``
        The learned viscous matrix ``D``, the sum of the forces that are
        exactly ``-D_k qd`` (:meth:`lnn.models.forces.Force.damping_matrix`;
        None without any). For information: the forces below include them.
    forces : tuple of lnn.models.forces.NumpyForce
        Every learned force term (damping, friction, offset, network):
        ``f(q, qd)`` joins ``tau`` on the right-hand side.
    mechanics : lnn.models.NumpyKind or None
        The kind's numpy twin (None: the model's TensorFlow methods are called).
    """

    n_dof: int
    angular: tuple
    kind: str
    dtype: np.dtype
    damping: np.ndarray | None
    inputs: object
    mechanics: object
    model: object = dataclasses.field(repr=False, default=None)
    forces: tuple = ()

    @classmethod
    def from_model(cls, model) -> FastLagrangian:
        """Snapshot the current weights of ``model``.

        Parameters
        ----------
        model : lnn.LagrangianNetwork

        Returns
        -------
        FastLagrangian

        Raises
        ------
        TypeError
            If ``model`` is not a :class:`lnn.LagrangianNetwork`.
        """
        for attr in ("feature_map", "mlp_layers", "kind", "n_dof", "numpy_mechanics"):
            if not hasattr(model, attr):
                raise TypeError(f"model must be an lnn.LagrangianNetwork; {type(model).__name__} has no {attr!r}")
        _keep_heap_padded()
        dtype = np.dtype(str(model.dtype))
        mech = model.numpy_mechanics()
        terms = tuple(getattr(model, "forces", ()))
        matrices = [np.asarray(m, np.float64) for m in (term.damping_matrix() for term in terms) if m is not None]
        damping = np.ascontiguousarray(sum(matrices), dtype=dtype) if matrices else None
        forces = tuple(term.numpy(dtype) for term in terms)
        return cls(
            n_dof=int(model.n_dof),
            angular=tuple(bool(a) for a in model.angular),
            kind=model.kind,
            dtype=dtype,
            damping=damping,
            inputs=model.input_map,
            mechanics=mech,
            model=None if mech is not None else model,
            forces=forces,
        )

    def _force(self, q, qd):
        """The sum of the learned forces ``f(q, qd)`` (B, n), or None without any."""
        total = None
        for term in self.forces:
            f = term.force(q, qd)
            total = f if total is None else total + f
        return total

    # -- inputs ------------------------------------------------------------------
    def _inputs(self, *pairs):
        arrays, single = _validate.states(pairs, self.n_dof, dtype=self.dtype, finite=False, allow_empty=True)
        return arrays, single

    def _dynamics(self, q, qd):
        """``M (B, n, n)`` and ``dL/dq - (d2L/dqd dq) qd (B, n)``."""
        if self.mechanics is None:  # a kind without a numpy twin: the model's compiled calls
            mass = np.asarray(self.model.mass_matrix(q, qd))
            rhs = -np.asarray(self.model.inverse_dynamics(q, qd, np.zeros_like(q)))
            force = self._force(q, qd)  # inverse_dynamics includes -f: take it out
            return mass, rhs if force is None else rhs - force
        return self.mechanics.dynamics(q, qd, self.inputs.basis_np(q))

    def acceleration(self, q, qd, tau=None, *, on_failure: str = "raise") -> np.ndarray:
        """Forward dynamics ``qdd = M^{-1} (dL/dq - (d2L/dqd dq) qd + tau + f(q, qd))``.

        Parameters
        ----------
        q, qd : array_like, shape ``(B, n)`` or ``(n,)``
        tau : array_like, same shape, optional
        on_failure : {"raise", "mask"}, keyword-only
            For samples whose ``M`` is not positive definite: raise for the
            batch (naming them), or return NaN in their rows and the others'
            accelerations.

        Returns
        -------
        numpy.ndarray, shape ``(B, n)`` (``(n,)`` for a single state), model dtype

        Raises
        ------
        IndefiniteMassMatrixError
            (a ``ValueError``, ``on_failure="raise"``) if ``M`` is not
            positive definite for some samples; its ``trajectories`` lists them.
        """
        if on_failure not in ("raise", "mask"):
            raise ValueError(f"on_failure must be one of ('raise', 'mask'); got {on_failure!r}")
        (q, qd, tau), single = self._inputs(("q", q), ("qd", qd), ("tau", tau))
        mass, rhs = self._dynamics(q, qd)
        if tau is not None:
            rhs = rhs + tau
        force = self._force(q, qd)
        if force is not None:
            rhs = rhs + force
        try:
            qdd = self._solve(mass, rhs)
        except IndefiniteMassMatrixError as error:
            if on_failure == "raise":
                raise
            bad = np.zeros(mass.shape[0], dtype=bool)
            bad[list(error.trajectories)] = True
            bad |= ~np.all(np.isfinite(mass), axis=(1, 2))
            qdd = np.full(rhs.shape, np.nan, dtype=rhs.dtype)
            rows = np.flatnonzero(~bad)
            while rows.size:  # the health report and Cholesky may disagree at rounding level
                try:
                    qdd[rows] = self._solve(mass[rows], rhs[rows])
                    break
                except IndefiniteMassMatrixError as again:
                    refused = rows[list(again.trajectories)] if again.trajectories else rows
                    rows = np.setdiff1d(rows, refused)
        return qdd[0] if single else qdd

    def inverse_dynamics(self, q, qd, qdd) -> np.ndarray:
        """Inverse dynamics ``tau = M qdd + (d2L/dqd dq) qd - dL/dq - f(q, qd)``.

        Parameters
        ----------
        q, qd, qdd : array_like, shape ``(B, n)`` or ``(n,)``

        Returns
        -------
        numpy.ndarray, shape ``(B, n)`` (``(n,)`` for a single state), model dtype
        """
        (q, qd, qdd), single = self._inputs(("q", q), ("qd", qd), ("qdd", qdd))
        mass, rhs = self._dynamics(q, qd)
        tau = (mass @ qdd[..., None])[..., 0] - rhs
        force = self._force(q, qd)
        if force is not None:
            tau = tau - force
        return tau[0] if single else tau

    def energy(self, q, qd) -> np.ndarray:
        """Total energy ``E = qd . dL/dqd - L``.

        Parameters
        ----------
        q, qd : array_like, shape ``(B, n)`` or ``(n,)``

        Returns
        -------
        numpy.ndarray, shape ``(B,)`` (a 0-d array for a single state), model dtype
        """
        (q, qd), single = self._inputs(("q", q), ("qd", qd))
        if self.mechanics is None:
            energy = np.asarray(self.model.energy(q, qd))
        else:
            energy = self.mechanics.energy(q, qd, self.inputs.basis_np(q))
        return energy[0] if single else energy

    def mass_matrix(self, q, qd=None) -> np.ndarray:
        """Mass matrix ``M = d2L/dqd2``.

        Parameters
        ----------
        q : array_like, shape ``(B, n)`` or ``(n,)``
        qd : array_like, same shape, optional (default zeros)

        Returns
        -------
        numpy.ndarray, shape ``(B, n, n)`` (``(n, n)`` for a single state)
        """
        if qd is None:
            qd = np.zeros(np.shape(q))
        (q, qd), single = self._inputs(("q", q), ("qd", qd))
        if self.mechanics is None:
            mass = np.asarray(self.model.mass_matrix(q, qd))
        else:
            mass = self.mechanics.mass_matrix(q, qd, self.inputs.basis_np(q))
        return mass[0] if single else mass

    def _solve(self, mass, rhs):
        """``M^{-1} rhs`` per sample; a Cholesky factorisation checks positive definiteness."""
        try:
            np.linalg.cholesky(mass)
        except np.linalg.LinAlgError:
            health = mass_matrix_health(mass) if np.all(np.isfinite(mass)) else None
            bad = np.flatnonzero(~np.all(np.isfinite(mass), axis=(1, 2)))
            if health is not None:
                bad = np.flatnonzero(health.min_eigenvalues <= 0)
            detail = (
                f" (smallest eigenvalue {health.min_eigenvalue:.6g})" if health is not None else " (non-finite entries)"
            )
            raise IndefiniteMassMatrixError(
                f"the learned mass matrix is not positive definite for trajectory(ies) "
                f"{bad.tolist()} of {mass.shape[0]}{detail}; refusing to pseudo-invert it",
                health,
                bad,
            ) from None
        return np.linalg.solve(mass, rhs[..., None])[..., 0]


# ----------------------------------------------------------------------------- Jacobian


def acceleration_jacobian(model, q, qd, tau=None) -> np.ndarray:
    """Exact Jacobian ``d qdd / d [q, qd]`` of a learned model, by TensorFlow autodiff.

    A compiled operation of the model (:class:`lnn.models.compiled.CompiledOp`:
    fixed ``input_signature``, batch dimension ``None``) takes
    ``tf.GradientTape.batch_jacobian`` of its acceleration graph, so the cost
    grows linearly with the batch and the blocks are per sample (``tau`` held
    fixed). It runs in graph mode at once; a batch size that recurs (a
    rollout's) is compiled with XLA in the background, off the caller's path,
    for kinds whose ``xla_jacobian`` allows it.

    Parameters
    ----------
    model : lnn.LagrangianNetwork
    q, qd : array_like, shape ``(B, n)`` or ``(n,)``
    tau : array_like, same shape, optional

    Returns
    -------
    numpy.ndarray, shape ``(B, n, 2n)`` (``(n, 2n)`` for a single state), float64
        Columns ``[:n]`` are ``d qdd / d q``, columns ``[n:]`` ``d qdd / d qd``.

    Raises
    ------
    ValueError
        For shapes that do not match ``model.n_dof``.
    """
    n = int(model.n_dof)
    pairs = (("q", q), ("qd", qd)) + ((("tau", tau),) if tau is not None else ())
    arrays, single = _validate.states(pairs, n, dtype=np.dtype(str(model.dtype)), finite=False, allow_empty=True)
    if arrays[0].shape[0] == 0:
        return np.zeros((0, n, 2 * n))
    x = np.concatenate(arrays, axis=1)
    result = np.asarray(
        model._compiled_op("acceleration_jacobian" if tau is None else "acceleration_jacobian_tau")(x), dtype=np.float64
    )
    return result[0] if single else result
