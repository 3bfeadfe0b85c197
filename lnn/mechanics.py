"""Mechanics of any differentiable Lagrangian, compiled with ``tf.function``.

A *Lagrangian* here is any TensorFlow-differentiable callable
``lagrangian(q, qd) -> L`` with ``q, qd`` of shape ``(B, n)`` and ``L`` of
shape ``(B,)``; or, when kinetic and potential energies are known apart,
``separable(kinetic, potential)`` with ``kinetic(q, qd) -> (B,)`` and
``potential(q) -> (B,)`` (then ``M`` is the Hessian of ``T`` alone and the
potential is never differentiated twice). From it::

    M qdd = dL/dq - (d2L/dqd dq) qd + tau,          M = d2L/dqd2
    tau   = M qdd + (d2L/dqd dq) qd - dL/dq          (inverse dynamics)
    E     = qd . dL/dqd - L,                         dE/dt = qd . tau

The mixed term ``(d2L/dqd dq) qd`` is a Hessian-vector product (by the
Hessian's symmetry, the reverse gradient in ``qd`` of ``dL/dq . qd`` with the
second ``qd`` held), never the full block, and the inverse dynamics' ``M qdd``
is one too (``M`` is not formed there); ``M`` is a
per-sample Hessian (``batch_jacobian`` of the gradient, or forward-over-reverse
with one batched tangent per coordinate); ``qdd`` comes from a Cholesky solve.
A mass matrix that is not positive definite raises :class:`MassMatrixError`
(a ``ValueError``) with the number of failed samples and the smallest
eigenvalue, unless the caller asks for an explicit ``regularize=eps`` shift
``M + eps I``; nothing is ever pseudo-inverted.

Every function accepts numpy arrays or tensors of shape ``(B, n)`` (or
``(n,)`` for one state), infers the dtype from ``q`` (float32 or float64)
unless ``dtype=`` is given, and runs a ``tf.function`` with a fixed
``input_signature`` (batch dimension ``None``) that is cached per
(callable, operation, dtype, n): new batch sizes and repeated calls never
retrace (:func:`tracing_count`). Called on symbolic tensors (inside another
``tf.function``, e.g. a training step) the functions inline their graph.
"""

from __future__ import annotations

import dataclasses
import math
import weakref
from collections import OrderedDict
from collections.abc import Callable

import numpy as np
import tensorflow as tf

from lnn import _runtime
from lnn.errors import MassMatrixError

__all__ = [
    "MassMatrixError",
    "MassMatrixHealth",
    "PowerBalance",
    "SeparableLagrangian",
    "acceleration",
    "energy",
    "energy_rate",
    "inverse_dynamics",
    "mass_matrix",
    "mass_matrix_health",
    "power_balance",
    "separable",
    "tracing_count",
]

_METHODS = ("reverse", "forward-over-reverse")
_ZERO = tf.UnconnectedGradients.ZERO


@dataclasses.dataclass(frozen=True)
class SeparableLagrangian:
    """``L(q, qd) = T(q, qd) - V(q)`` from its two energies.

    Attributes
    ----------
    kinetic : callable
        ``kinetic(q, qd) -> (B,)``.
    potential : callable
        ``potential(q) -> (B,)``.
    """

    kinetic: Callable
    potential: Callable

    def __call__(self, q, qd):
        """``L = T - V``, shape ``(B,)``."""
        return self.kinetic(q, qd) - self.potential(q)


def separable(kinetic: Callable, potential: Callable) -> SeparableLagrangian:
    """Build a Lagrangian ``T - V`` whose mass matrix differentiates ``T`` only.

    Parameters
    ----------
    kinetic : callable
        ``kinetic(q, qd) -> T`` with ``q, qd`` of shape ``(B, n)``, ``T`` ``(B,)``.
    potential : callable
        ``potential(q) -> V``, shape ``(B,)``.

    Returns
    -------
    SeparableLagrangian
    """
    if not callable(kinetic) or not callable(potential):
        raise TypeError(
            f"kinetic and potential must be callables, got {type(kinetic).__name__} and {type(potential).__name__}"
        )
    return SeparableLagrangian(kinetic, potential)


@dataclasses.dataclass(frozen=True)
class MassMatrixHealth:
    """Health of a batch of mass matrices.

    Attributes
    ----------
    n_samples : int
        Batch size ``B``.
    min_eigenvalue : float
        Smallest eigenvalue over the batch.
    max_eigenvalue : float
        Largest eigenvalue over the batch.
    condition_number : float
        Largest per-sample condition number ``lambda_max / lambda_min``
        (``inf`` when some sample is not positive definite).
    median_condition_number : float
        Median per-sample condition number.
    fraction_not_positive_definite : float
        Fraction of samples whose smallest eigenvalue is ``<= 0``.
    max_asymmetry : float
        Largest ``|M - M^T|`` entry (0 for a Hessian up to rounding).
    min_eigenvalues : numpy.ndarray, shape ``(B,)``
        Smallest eigenvalue of each sample.
    condition_numbers : numpy.ndarray, shape ``(B,)``
        Condition number of each sample (``inf`` if not positive definite).
    """

    n_samples: int
    min_eigenvalue: float
    max_eigenvalue: float
    condition_number: float
    median_condition_number: float
    fraction_not_positive_definite: float
    max_asymmetry: float
    min_eigenvalues: np.ndarray = dataclasses.field(repr=False)
    condition_numbers: np.ndarray = dataclasses.field(repr=False)

    @property
    def positive_definite(self) -> bool:
        """True when every sample is positive definite."""
        return self.fraction_not_positive_definite == 0.0


@dataclasses.dataclass(frozen=True)
class PowerBalance:
    """Power balance ``dE/dt = qd . tau`` of a batch of states.

    Attributes
    ----------
    energy_rate : numpy.ndarray, shape ``(B,)``
        ``dE/dt`` along ``(qd, qdd)`` by automatic differentiation.
    input_power : numpy.ndarray, shape ``(B,)``
        ``qd . tau`` (generalized forces, damping included).
    residual : numpy.ndarray, shape ``(B,)``
        ``energy_rate - input_power``: zero up to rounding when ``qdd`` solves
        the Euler-Lagrange equations with ``tau``.
    """

    energy_rate: np.ndarray
    input_power: np.ndarray
    residual: np.ndarray


# -- input handling ------------------------------------------------------------


def _is_symbolic(x) -> bool:
    # isinstance on the concrete classes: tf.is_tensor goes through a slow Protocol check.
    return isinstance(x, tf.Tensor) and not hasattr(x, "numpy")


def _resolve_dtype(q, dtype):
    if dtype is not None:
        dt = tf.as_dtype(dtype)
    elif isinstance(q, (np.ndarray, tf.Tensor, tf.Variable)):
        dt = tf.as_dtype(q.dtype)
        if not dt.is_floating:
            dt = tf.float64
    else:
        dt = tf.float64
    if dt not in (tf.float32, tf.float64):
        raise TypeError(f"dtype must be float32 or float64, got {dt.name}")
    return dt


_EagerTensor = _runtime.EagerTensor


def _check_batch(name: str, x, n: int | None, dtype, batch: int | None = None):
    """Validate one ``(B, n)`` input; return ``(tensor, was_single)``."""
    if x is None:
        raise ValueError(f"{name} is required, got None")
    if _is_symbolic(x):
        t = tf.cast(x, dtype) if x.dtype != dtype else x
        if t.shape.rank not in (None, 2):
            raise ValueError(f"{name} must have shape (B, n) inside a graph, got shape {t.shape}")
        if n is not None and t.shape.rank == 2 and t.shape[-1] not in (None, n):
            raise ValueError(f"{name} must have {n} columns (n_dof), got shape {t.shape}")
        return t, False
    arr = x if isinstance(x, np.ndarray) else (x.numpy() if isinstance(x, (tf.Tensor, tf.Variable)) else np.asarray(x))
    if arr.dtype.kind not in "fiub":
        raise TypeError(f"{name} must be a numeric array, got dtype {arr.dtype}")
    single = arr.ndim == 1
    if single:
        arr = arr[None, :]
    if arr.ndim != 2:
        raise ValueError(f"{name} must have shape (B, n) or (n,), got shape {np.shape(x)}")
    if n is not None and arr.shape[1] != n:
        raise ValueError(f"{name} must have n_dof = {n} columns, got shape {np.shape(x)}")
    if batch is not None and arr.shape[0] != batch:
        raise ValueError(f"{name} has batch size {arr.shape[0]} but q has batch size {batch} (shape {np.shape(x)})")
    if not np.all(np.isfinite(arr)):
        bad = int(np.sum(~np.all(np.isfinite(arr), axis=1)))
        raise ValueError(f"{name} contains NaN or infinite values in {bad} of {arr.shape[0]} samples")
    return tf.constant(arr.astype(dtype.as_numpy_dtype, copy=False)), single


_make_eager = _runtime.eager_tensor


def _plain_array(x, np_dtype, dtype):
    """The numpy view of ``x`` if it is a numpy array or an eager tensor of the dtype, else None."""
    kind = type(x)
    if kind is np.ndarray:
        return x if x.dtype == np_dtype else None
    if kind is _EagerTensor and x.dtype == dtype:
        return x.numpy()
    return None


def _is_batch_of(arr, shape, n) -> bool:
    """``arr`` is a ``(B, n)`` batch (of the same ``shape`` as the first input, if given)."""
    return arr.ndim == 2 and (shape is None or arr.shape == shape) and (n is None or arr.shape[1] == n)


def _plain_inputs(names_values, dtype, n):
    """Tensors of the inputs when all are finite ``(B, n)`` batches of ``dtype``, else None.

    The common call (numpy batches from an integrator or a script, eager
    tensors from a training loop) in a few µs: numpy arrays become tensors,
    eager tensors pass as they are (checked through their numpy view).
    Anything else returns None and goes through the full checks, which also
    word the errors.
    """
    np_dtype = np.dtype(dtype.as_numpy_dtype)
    shape = None
    out = []
    for _, x in names_values:
        if x is None:
            if not out:  # the first input is required: let the full checks say so
                return None
            out.append(None)
            continue
        arr = _plain_array(x, np_dtype, dtype)
        if arr is None or not _is_batch_of(arr, shape, n) or not _all_finite(arr):
            return None
        shape = arr.shape
        out.append(x if type(x) is _EagerTensor else _make_eager(arr, dtype))
    return out


#: Up to this many entries, a batch is checked for NaN/inf in Python (``math.isfinite``
#: of the sum of its values: ~1 µs, where a numpy ufunc call costs ~10 µs right after a
#: compiled call has run); above it by numpy's sum (one pass, no temporary array).
_SMALL_CHECK = 64


def _all_finite(x: np.ndarray) -> bool:
    """No NaN or inf in ``x``.

    A NaN or inf makes the sum non-finite; a sum that overflows (finite
    entries) is re-checked entry by entry, so the answer is exact.
    """
    total = sum(x.ravel().tolist()) if x.size <= _SMALL_CHECK else x.sum()
    if math.isfinite(total):
        return True
    return bool(np.isfinite(x).all())


def packed_plain(values, np_dtype, dtype, n):
    """The inputs side by side, ``(B, k n)`` in numpy, when all are finite ``(B, n)`` batches.

    The hot path of a model's public calls: numpy arrays (and eager tensors
    while no gradient tape can record, through their numpy view) of the
    model's dtype and of one shape ``(B, n)``, all finite. Anything else
    returns None and goes through the full checks, which also word the errors.

    Parameters
    ----------
    values : sequence of numpy.ndarray or tensors
    np_dtype : numpy.dtype
    dtype : tf.DType
        The same dtype, for tensors.
    n : int

    Returns
    -------
    numpy.ndarray of shape ``(B, k n)``, or None
    """
    arrays = []
    shape = None
    for x in values:
        if type(x) is _EagerTensor and tape_may_record():
            return None  # under a tape, inputs stay tensors so that gradients reach them
        arr = _plain_array(x, np_dtype, dtype)
        if arr is None or not _is_batch_of(arr, shape, n):
            return None
        shape = arr.shape
        arrays.append(arr)
    x = arrays[0] if len(arrays) == 1 else np.concatenate(arrays, axis=1)
    return x if _all_finite(x) else None  # one check for all the inputs


def pack_columns(arrays, dtype):
    """One ``(B, k n)`` tensor of ``k`` inputs of shape ``(B, n)``, side by side.

    Numpy arrays are concatenated in numpy and become one tensor (one
    conversion instead of ``k``, and one input of the compiled call instead of
    ``k``: 20-35 µs less per call at batch 1 in a timeit loop of
    ``model.mass_matrix``). Eager tensors go through numpy too
    when no tape records; under a tape (or in a graph) they are concatenated
    with ``tf.concat`` so that gradients flow back to each input.

    Parameters
    ----------
    arrays : list of numpy.ndarray or tensors, each ``(B, n)``
    dtype : tf.DType

    Returns
    -------
    tensor, shape ``(B, k n)``
    """
    if all(type(a) is np.ndarray for a in arrays):
        x = arrays[0] if len(arrays) == 1 else np.concatenate(arrays, axis=1)
        return _make_eager(x, dtype)
    if tape_may_record() or not tf.executing_eagerly() or not all(type(a) is _EagerTensor for a in arrays):
        return arrays[0] if len(arrays) == 1 else tf.concat(arrays, axis=1)
    return pack_columns([a.numpy() for a in arrays], dtype)


def _inputs(names_values, dtype, *, n=None):
    """Check several inputs against the first; return tensors, single flag, n."""
    plain = _plain_inputs(names_values, dtype, n)
    if plain is not None:
        return plain, False, int(plain[0].shape[-1])
    (name0, x0), rest = names_values[0], names_values[1:]
    t0, single = _check_batch(name0, x0, n, dtype)
    n = t0.shape[-1] if n is None else n
    batch = None if _is_symbolic(t0) else int(t0.shape[0])
    out = [t0]
    for name, x in rest:
        if x is None:
            out.append(None)
            continue
        t, s = _check_batch(name, x, n, dtype, batch)
        if not _is_symbolic(t) and s != single:
            raise ValueError(
                f"{name} has shape {tuple(np.shape(x))} but {name0} has shape "
                f"{tuple(np.shape(x0))}: pass both as (B, n) or both as (n,)"
            )
        out.append(t)
    return out, single, n


def _unbatch(x, single: bool):
    return x[0] if single else x


# -- compiled-function cache ---------------------------------------------------

#: Most compiled functions the cache keeps; the least recently used is dropped
#: first. An owner that dies removes its entries, but a callable that cannot be
#: weakly referenced, or a new closure per call, would otherwise grow the cache
#: (and TensorFlow's graphs) for as long as the process runs. A dropped
#: function is traced again on its next call.
CACHE_SIZE = 256

_CACHE: OrderedDict = OrderedDict()


def _owner_and_func(fn):
    """``(owner, function)`` of a bound method, ``(fn, None)`` for any other callable."""
    if hasattr(fn, "__self__") and hasattr(fn, "__func__"):  # bound method
        return fn.__self__, fn.__func__
    return fn, None


def _cache_key(fn, op, dtype, n, options):
    owner, func = _owner_and_func(fn)
    return (id(owner), func, op, dtype, n, options)


def _resolver(fn):
    """A zero-argument callable returning ``fn`` without keeping its owner alive."""
    owner, func = _owner_and_func(fn)
    try:
        ref = weakref.ref(owner)
    except TypeError:  # not weak-referenceable: keep it alive
        return lambda: fn
    if func is None:
        return ref
    return lambda: func.__get__(ref())


tape_may_record = _runtime.tape_may_record
fast_caller = _runtime.fast_caller


def batch_bucket(batch: int) -> int:
    """The batch size an XLA-compiled call runs for ``batch`` rows.

    The smallest of ``1, 2, 3, 4, 6, 8, 12, 16, ...`` (``2^k`` and
    ``3 2^k``) that is at least ``batch``: at most 1.5x the rows, and about
    ``2 log2(B)`` distinct sizes up to ``B`` (the XLA forms of :mod:`lnn.models.compiled`).

    Parameters
    ----------
    batch : int
        Rows of the call (``>= 0``).

    Returns
    -------
    int
    """
    if batch <= 2:
        return batch
    k = (batch - 1).bit_length()  # 2^(k-1) < batch <= 2^k
    three = 3 << (k - 2)  # 1.5 * 2^(k-1)
    return three if three >= batch else 1 << k


def pad_rows(x: np.ndarray, size: int) -> np.ndarray:
    """``x`` of shape ``(B, ...)`` with row 0 repeated up to ``size`` rows (a valid state)."""
    return np.concatenate([x, np.repeat(x[:1], size - x.shape[0], axis=0)])


def _compiled(fn, op: str, dtype, n: int, n_args: int, body, options=()):
    """The cached ``tf.function`` computing ``body(fn, *args)`` for one callable."""
    key = _cache_key(fn, op, dtype, n, options)
    entry = _CACHE.get(key)
    if entry is not None:
        try:
            _CACHE.move_to_end(key)
        except KeyError:  # its owner's finalizer removed it meanwhile; the entry still works
            pass
        return entry[1]
    resolve = _resolver(fn)
    spec = [tf.TensorSpec((None, n), dtype)] * n_args

    # Exactly n_args positional parameters (no *args, no defaults): calls bind
    # their inputs without TensorFlow's slow structured-signature fallback.
    traced = {2: lambda a, b: body(resolve(), a, b), 3: lambda a, b, c: body(resolve(), a, b, c)}[n_args]
    function = tf.function(traced, input_signature=spec, autograph=False)
    concrete = fast_caller(function.get_concrete_function())  # skips the dispatch
    _CACHE[key] = (function, concrete)
    while len(_CACHE) > CACHE_SIZE:
        _CACHE.popitem(last=False)
    owner, _ = _owner_and_func(fn)
    try:
        weakref.finalize(owner, _CACHE.pop, key, None)
    except TypeError:
        pass
    return concrete


def tracing_count(lagrangian: Callable, op: str, *, dtype="float64", n_dof: int, method: str = "reverse") -> int:
    """How many times the compiled ``op`` of a Lagrangian has been traced.

    Parameters
    ----------
    lagrangian : callable
        The callable passed to the mechanics functions.
    op : str
        ``"mass_matrix"``, ``"acceleration"``, ``"inverse_dynamics"``,
        ``"energy"`` or ``"energy_rate"``.
    dtype : str
        Dtype of the calls.
    n_dof : int
        Number of coordinates of the calls.
    method : str
        The ``method=`` of those calls (``mass_matrix`` and ``acceleration``).

    Returns
    -------
    int
        0 if the function was never built.
    """
    options = (method,) if op in ("mass_matrix", "acceleration") else ()
    key = _cache_key(lagrangian, op, tf.as_dtype(dtype), int(n_dof), options)
    entry = _CACHE.get(key)
    return 0 if entry is None else int(entry[0].experimental_get_tracing_count())


# -- the mathematics (graph bodies) ----------------------------------------------


def _kinetic_part(fn):
    return fn.kinetic if isinstance(fn, SeparableLagrangian) else fn


def _hessian_qd(fn, q, qd, method):
    """``(d2 fn / dqd2, dfn/dqd)`` per sample."""
    if method == "forward-over-reverse":
        n = qd.shape[-1]
        batch = tf.shape(qd)[0]
        eye = tf.eye(n, dtype=qd.dtype)
        q_rep = tf.tile(q, (n, 1))
        qd_rep = tf.tile(qd, (n, 1))
        tangent = tf.repeat(eye, batch, axis=0)  # block k holds e_k
        with tf.autodiff.ForwardAccumulator(qd_rep, tangent) as acc:
            with tf.GradientTape() as tape:
                tape.watch(qd_rep)
                value = fn(q_rep, qd_rep)
            grad = tape.gradient(value, qd_rep, unconnected_gradients=_ZERO)
        columns = tf.reshape(acc.jvp(grad, unconnected_gradients=_ZERO), tf.stack([n, batch, n]))
        hess = tf.transpose(columns, (1, 2, 0))
        return hess, grad[:batch]
    with tf.GradientTape() as outer:
        outer.watch(qd)
        with tf.GradientTape() as inner:
            inner.watch(qd)
            value = fn(q, qd)
        grad = inner.gradient(value, qd, unconnected_gradients=_ZERO)
    hess = outer.batch_jacobian(grad, qd, unconnected_gradients=_ZERO)
    return hess, grad


def _mass_matrix_body(fn, q, qd, method):
    hess, _ = _hessian_qd(fn, q, qd, method)
    return 0.5 * (hess + tf.linalg.matrix_transpose(hess))


def _gradients(fn, q, qd):
    """``(dL/dq, dL/dqd)``, each ``(B, n)``, by one tape (recorded by any tape or accumulator around the call)."""
    with tf.GradientTape() as tape:
        tape.watch([q, qd])
        value = fn(q, qd)
    return tape.gradient(value, [q, qd], unconnected_gradients=_ZERO)


def _dynamics_terms(fn, q, qd, method):
    """``M``, ``dL/dq`` and the mixed product ``(d2L/dqd dq) qd``."""
    if method == "forward-over-reverse":
        m = _mass_matrix_body(_kinetic_part(fn), q, qd, method)
        with tf.autodiff.ForwardAccumulator(q, qd) as acc:
            grad_q, grad_qd = _gradients(fn, q, qd)
        return m, grad_q, acc.jvp(grad_qd, unconnected_gradients=_ZERO)
    # the mixed term by the Hessian's symmetry: (d2L/dqd dq) qd is the gradient in qd of dL/dq . qd, qd held
    # constant in the product (a reverse pass on the tape that also gives M; no forward-mode tangent)
    held = tf.stop_gradient(qd)
    with tf.GradientTape(persistent=True) as outer:
        outer.watch(qd)
        grad_q, grad_qd = _gradients(fn, q, qd)
        product = tf.reduce_sum(grad_q * held)
    m = outer.batch_jacobian(grad_qd, qd, unconnected_gradients=_ZERO)
    mixed = outer.gradient(product, qd, unconnected_gradients=_ZERO)
    return 0.5 * (m + tf.linalg.matrix_transpose(m)), grad_q, mixed


def solve_cholesky(m, rhs, regularize=None):
    """Solve ``M x = rhs`` per sample by Cholesky; shapes ``(B, n, n)``, ``(B, n)``.

    Parameters
    ----------
    m : tensor, shape ``(B, n, n)``
        Symmetric positive-definite matrices.
    rhs : tensor, shape ``(B, n)``
    regularize : float, optional
        Solve ``(M + regularize I) x = rhs`` instead.

    Returns
    -------
    tensor, shape ``(B, n)``
        NaN where a factorisation failed under XLA (where, for ``n <=
        UNROLLED_CHOLESKY_MAX_N``, the factorisation is unrolled); eager kernels raise
        ``tf.errors.InvalidArgumentError`` (the public functions turn both
        into :class:`MassMatrixError`).
    """
    if regularize:
        m = m + regularize * tf.eye(tf.shape(m)[-1], dtype=m.dtype)
    n = m.shape[-1]
    if n is not None and n <= UNROLLED_CHOLESKY_MAX_N and _in_xla_context():
        return _solve_cholesky_unrolled(m, rhs)
    chol = tf.linalg.cholesky(m)
    return tf.linalg.cholesky_solve(chol, rhs[..., None])[..., 0]


#: Largest ``n`` for which :func:`solve_cholesky` unrolls the factorisation
#: under XLA (``n**3 / 6`` fused multiply-adds on batch vectors). XLA's CPU
#: Cholesky is a loop of small kernels: at ``n = 7``, batch 1024, it took
#: 9.9 ms against 1.9 ms unrolled for a whole acceleration (and TensorFlow's
#: own kernel outside XLA 2.2 ms); see ``benchmarks/bench_mechanics.py``.
UNROLLED_CHOLESKY_MAX_N = 12


_in_xla_context = _runtime.in_xla_trace


def _solve_cholesky_unrolled(m, rhs):
    """``M x = rhs`` by a Cholesky factorisation written out entry by entry.

    For a static, small ``n`` under XLA: every entry of ``L`` is an
    elementwise expression over the batch, so XLA fuses the whole
    factorisation and both triangular solves into a few loops. A matrix that
    is not positive definite gives a NaN (square root of a negative pivot),
    which the public functions report as :class:`MassMatrixError`.

    Parameters
    ----------
    m : tensor, shape ``(B, n, n)``
    rhs : tensor, shape ``(B, n)``

    Returns
    -------
    tensor, shape ``(B, n)``
    """
    n = m.shape[-1]
    entries = tf.unstack(tf.reshape(m, (-1, n * n)), axis=1)
    b = tf.unstack(rhs, axis=1)
    low = [[None] * n for _ in range(n)]  # low[i][j] = L_ij, j <= i
    inv_diag = [None] * n
    for j in range(n):
        pivot = entries[j * n + j]
        for k in range(j):
            pivot = pivot - low[j][k] * low[j][k]
        low[j][j] = tf.sqrt(pivot)
        inv_diag[j] = 1.0 / low[j][j]
        for i in range(j + 1, n):
            value = entries[i * n + j]
            for k in range(j):
                value = value - low[i][k] * low[j][k]
            low[i][j] = value * inv_diag[j]
    y = [None] * n  # L y = rhs
    for i in range(n):
        value = b[i]
        for k in range(i):
            value = value - low[i][k] * y[k]
        y[i] = value * inv_diag[i]
    x = [None] * n  # L^T x = y
    for i in reversed(range(n)):
        value = y[i]
        for k in range(i + 1, n):
            value = value - low[k][i] * x[k]
        x[i] = value * inv_diag[i]
    return tf.stack(x, axis=-1)


def _acceleration_body(fn, q, qd, tau, method, regularize):
    m, grad_q, mixed = _dynamics_terms(fn, q, qd, method)
    return solve_cholesky(m, grad_q - mixed + tau, regularize)


def _inverse_dynamics_body(fn, q, qd, qdd):
    # tau = d/dt (dL/dqd) - dL/dq, where d/dt (dL/dqd) = (d2L/dqd dq) qd + M qdd. By the symmetry of the
    # Hessian both products are one reverse gradient with respect to qd, of dL/dq . qd (qd held constant)
    # plus dL/dqd . qdd: two reverse passes, no M formed (an n-row Jacobian) and no forward-mode tangents
    # (which TensorFlow traces by transposing every operation's gradient: slower to build).
    held = tf.stop_gradient(qd)
    with tf.GradientTape() as outer:
        outer.watch(qd)
        grad_q, grad_qd = _gradients(fn, q, qd)
        products = tf.reduce_sum(grad_q * held) + tf.reduce_sum(grad_qd * qdd)
    rate = outer.gradient(products, qd, unconnected_gradients=_ZERO)
    return rate - grad_q


def _energy_body(fn, q, qd):
    with tf.GradientTape() as tape:
        tape.watch(qd)
        value = fn(q, qd)
    grad_qd = tape.gradient(value, qd, unconnected_gradients=_ZERO)
    return tf.reduce_sum(qd * grad_qd, axis=-1) - value


def _energy_rate_body(fn, q, qd, qdd):
    # dE/dt = dE/dq . qd + dE/dqd . qdd: E is one number per sample, so its whole gradient is one reverse
    # pass (the samples are independent: the gradient of the batch's sum is each sample's gradient)
    with tf.GradientTape() as outer:
        outer.watch([q, qd])
        e = _energy_body(fn, q, qd)
    grad_q, grad_qd = outer.gradient(e, [q, qd], unconnected_gradients=_ZERO)
    return tf.reduce_sum(grad_q * qd + grad_qd * qdd, axis=-1)


# -- public functions ----------------------------------------------------------------


def _check_method(method):
    if method not in _METHODS:
        raise ValueError(f"method must be one of {_METHODS}, got {method!r}")


def _check_callable(lagrangian):
    if not callable(lagrangian):
        raise TypeError(f"lagrangian must be a callable (q, qd) -> (B,), got {type(lagrangian).__name__}")


def _evaluate(lagrangian, op, body, pairs, dtype, *, method=None, options=(), zero_fill=False, run=None):
    """Check the inputs; inline ``body(lagrangian, *args)`` when symbolic, else run it compiled.

    ``method`` is validated when given; ``options`` (a tuple, or a callable
    returning one, evaluated on the eager path only) extend the cache key;
    ``zero_fill`` replaces an omitted last input (``tau``) by zeros; ``run(fn, args,
    dtype)`` replaces the plain call ``fn(*args)``.
    """
    _check_callable(lagrangian)
    if method is not None:
        _check_method(method)
    dt = _resolve_dtype(pairs[0][1], dtype)
    args, single, n = _inputs(pairs, dt)
    if zero_fill and args[-1] is None:
        args[-1] = tf.zeros_like(args[0])
    if _is_symbolic(args[0]):
        return body(lagrangian, *args)
    fn = _compiled(lagrangian, op, dt, n, len(args), body, options() if callable(options) else options)
    return _unbatch(fn(*args) if run is None else run(fn, args, dt), single)


def mass_matrix(lagrangian: Callable, q, qd, *, method: str = "reverse", dtype=None):
    """Mass matrix ``M = d2L/dqd2`` (of ``T`` alone for a separable Lagrangian).

    Parameters
    ----------
    lagrangian : callable or SeparableLagrangian
        ``lagrangian(q, qd) -> (B,)``, TensorFlow-differentiable.
    q, qd : array_like, shape ``(B, n)`` or ``(n,)``
    method : {"reverse", "forward-over-reverse"}
        Nested tapes with ``batch_jacobian``, or one batched forward-mode
        tangent per coordinate over the reverse gradient.
    dtype : str, optional
        ``"float32"`` or ``"float64"``; default: the dtype of ``q``.

    Returns
    -------
    tensor, shape ``(B, n, n)`` (``(n, n)`` for a single state)
        Symmetrised Hessian.
    """
    return _evaluate(
        lagrangian,
        "mass_matrix",
        lambda f, a, b: _mass_matrix_body(_kinetic_part(f), a, b, method),
        [("q", q), ("qd", qd)],
        dtype,
        method=method,
        options=(method,),
    )


def acceleration(
    lagrangian: Callable, q, qd, tau=None, *, method: str = "reverse", regularize: float | None = None, dtype=None
):
    """Forward dynamics ``qdd = M^{-1} (dL/dq - (d2L/dqd dq) qd + tau)``.

    Parameters
    ----------
    lagrangian : callable or SeparableLagrangian
        ``lagrangian(q, qd) -> (B,)``.
    q, qd : array_like, shape ``(B, n)`` or ``(n,)``
    tau : array_like, shape ``(B, n)`` or ``(n,)``, optional
        Generalized forces (zero by default).
    method : {"reverse", "forward-over-reverse"}
        How ``M`` is differentiated (the mixed term is always a Hessian-vector product).
    regularize : float, optional
        Solve with ``M + regularize I``: an explicit, caller-chosen shift for
        nearly singular learned mass matrices. Default: none, and a mass
        matrix that is not positive definite raises :class:`MassMatrixError`.
    dtype : str, optional
        Default: the dtype of ``q``.

    Returns
    -------
    tensor, shape ``(B, n)`` (``(n,)`` for a single state)

    Raises
    ------
    MassMatrixError
        If ``M`` is not positive definite for some sample (eager calls);
        the message gives how many samples failed and the smallest eigenvalue.
    """

    def run(fn, args, dt):
        return call_checked(
            fn, args, lambda: mass_matrix(lagrangian, args[0], args[1], method=method, dtype=dt), regularize
        )

    return _evaluate(
        lagrangian,
        "acceleration",
        lambda f, a, b, c: _acceleration_body(f, a, b, c, method, regularize),
        [("q", q), ("qd", qd), ("tau", tau)],
        dtype,
        method=method,
        options=lambda: (method,) if regularize is None else (method, float(regularize)),
        zero_fill=True,
        run=run,
    )


def call_checked(fn, args, mass_matrix_fn, regularize=None):
    """Run a compiled acceleration; turn a failed Cholesky into :class:`MassMatrixError`.

    Parameters
    ----------
    fn : callable
        Compiled function returning ``qdd`` of shape ``(B, n)``.
    args : tuple of tensors
        Its arguments.
    mass_matrix_fn : callable
        ``() -> M`` of shape ``(B, n, n)`` for the error report.
    regularize : float, optional
        The shift that was applied (reported in the message).

    Returns
    -------
    tensor, shape ``(B, n)``
    """
    try:
        qdd = fn(*args)
    except tf.errors.InvalidArgumentError as exc:
        if "Cholesky" not in str(exc) and "cholesky" not in str(exc):
            raise
        raise not_positive_definite_error(mass_matrix_fn(), regularize) from None
    if not _all_finite(qdd.numpy()):
        m = mass_matrix_fn()
        health = mass_matrix_health(m)
        if not health.positive_definite:
            raise not_positive_definite_error(m, regularize)
        raise ValueError(
            f"the acceleration is not finite for "
            f"{int(np.sum(~np.all(np.isfinite(qdd.numpy()), axis=-1)))} samples "
            f"although M is positive definite (condition number up to "
            f"{health.condition_number:.3g})"
        )
    return qdd


def not_positive_definite_error(m, regularize=None) -> MassMatrixError:
    """The :class:`MassMatrixError` describing a batch ``m`` of shape ``(B, n, n)``."""
    health = mass_matrix_health(m)
    bad = int(round(health.fraction_not_positive_definite * health.n_samples))
    shift = f" after adding regularize={regularize} * I" if regularize else ""
    return MassMatrixError(
        f"mass matrix is not positive definite{shift} for {max(bad, 1)} of {health.n_samples} "
        f"samples (smallest eigenvalue {health.min_eigenvalue:.6g}); refusing to "
        "pseudo-invert it. Pass regularize=eps to solve with M + eps I explicitly, or use an "
        "input-convex or structured model",
        health,
    )


def inverse_dynamics(lagrangian: Callable, q, qd, qdd, *, dtype=None):
    """Inverse dynamics ``tau = M qdd + (d2L/dqd dq) qd - dL/dq``.

    Parameters
    ----------
    lagrangian : callable or SeparableLagrangian
    q, qd, qdd : array_like, shape ``(B, n)`` or ``(n,)``
    dtype : str, optional

    Returns
    -------
    tensor, shape ``(B, n)`` (``(n,)`` for a single state)
    """
    return _evaluate(
        lagrangian, "inverse_dynamics", _inverse_dynamics_body, [("q", q), ("qd", qd), ("qdd", qdd)], dtype
    )


def energy(lagrangian: Callable, q, qd, *, dtype=None):
    """Energy ``E = qd . dL/dqd - L`` (``T + V`` when ``T`` is quadratic in ``qd``).

    Parameters
    ----------
    lagrangian : callable or SeparableLagrangian
    q, qd : array_like, shape ``(B, n)`` or ``(n,)``
    dtype : str, optional

    Returns
    -------
    tensor, shape ``(B,)`` (scalar for a single state)
    """
    return _evaluate(lagrangian, "energy", _energy_body, [("q", q), ("qd", qd)], dtype)


def energy_rate(lagrangian: Callable, q, qd, qdd, *, dtype=None):
    """Time derivative of the energy along ``(qd, qdd)``: ``dE/dq . qd + dE/dqd . qdd``.

    Parameters
    ----------
    lagrangian : callable or SeparableLagrangian
    q, qd, qdd : array_like, shape ``(B, n)`` or ``(n,)``
    dtype : str, optional

    Returns
    -------
    tensor, shape ``(B,)`` (scalar for a single state)
    """
    return _evaluate(lagrangian, "energy_rate", _energy_rate_body, [("q", q), ("qd", qd), ("qdd", qdd)], dtype)


def power_balance(lagrangian: Callable, q, qd, qdd, tau=None, *, dtype=None) -> PowerBalance:
    """Check ``dE/dt = qd . tau`` on a batch (a diagnostic of a solve or a data set).

    Parameters
    ----------
    lagrangian : callable or SeparableLagrangian
    q, qd, qdd : array_like, shape ``(B, n)``
    tau : array_like, shape ``(B, n)``, optional
        Generalized forces acting (damping included); zero by default.
    dtype : str, optional

    Returns
    -------
    PowerBalance
    """
    rate = np.atleast_1d(np.asarray(energy_rate(lagrangian, q, qd, qdd, dtype=dtype)))
    qd_arr = np.atleast_2d(np.asarray(qd, dtype=np.float64))
    tau_arr = np.zeros_like(qd_arr) if tau is None else np.atleast_2d(np.asarray(tau, np.float64))
    if tau_arr.shape != qd_arr.shape:
        raise ValueError(f"tau must have the shape of qd {qd_arr.shape}, got {tau_arr.shape}")
    power = np.sum(qd_arr * tau_arr, axis=-1)
    return PowerBalance(rate, power, rate - power)


def mass_matrix_health(m) -> MassMatrixHealth:
    """Health report of a batch of mass matrices.

    Parameters
    ----------
    m : array_like, shape ``(B, n, n)`` or ``(n, n)``

    Returns
    -------
    MassMatrixHealth
        Computed in float64 on the symmetric part.
    """
    arr = np.asarray(m, dtype=np.float64)
    if arr.ndim == 2:
        arr = arr[None]
    if arr.ndim != 3 or arr.shape[-1] != arr.shape[-2]:
        raise ValueError(f"m must have shape (B, n, n) or (n, n), got shape {np.shape(m)}")
    if arr.shape[0] == 0:
        raise ValueError(f"m is an empty batch (shape {arr.shape})")
    if not np.all(np.isfinite(arr)):
        raise ValueError(
            f"m contains NaN or infinite entries in {int(np.sum(~np.all(np.isfinite(arr), axis=(1, 2))))} samples"
        )
    asym = float(np.max(np.abs(arr - np.swapaxes(arr, -1, -2))))
    eig = np.linalg.eigvalsh(0.5 * (arr + np.swapaxes(arr, -1, -2)))
    lo, hi = eig[:, 0], eig[:, -1]
    pd = lo > 0
    with np.errstate(divide="ignore", invalid="ignore"):
        cond = np.where(pd, hi / np.where(pd, lo, 1.0), np.inf)
    return MassMatrixHealth(
        n_samples=int(arr.shape[0]),
        min_eigenvalue=float(lo.min()),
        max_eigenvalue=float(hi.max()),
        condition_number=float(cond.max()),
        median_condition_number=float(np.median(cond)),
        fraction_not_positive_definite=float(np.mean(~pd)),
        max_asymmetry=asym,
        min_eigenvalues=lo,
        condition_numbers=cond,
    )
