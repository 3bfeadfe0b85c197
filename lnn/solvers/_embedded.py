"""The engine of the compiled adaptive integrators: any embedded explicit Runge–Kutta pair.

:func:`solve` integrates ``y = [q, qd]``, ``y' = [qd, qdd(q, qd, tau(t))]`` for a
batch of ``B`` initial states, **every trajectory with its own step size**:

- each trajectory ``b`` carries its time ``t_b``, step ``h_b``, state, the
  derivative at its state (first-same-as-last) and its previous error;
- an attempt evaluates the tableau's stages for the whole batch at once
  (stage times ``t_b + c_i h_b``); the error estimate of trajectory ``b`` is
  the root-mean-square norm over its ``2n`` components of
  ``err / (atol_b + rtol_b max(|y|, |y_new|))`` (DOP853's combination of its
  two estimates for ``"dopri853"``), so every trajectory meets its own
  tolerance, as a solo solve would;
- the step is accepted where that norm is ``<= 1``; the next step's size
  comes from a :class:`lnn.solvers.StepController` (the default: the
  classical integral controller, ``h_new = h · clip(0.75 · err^(-1/k), 1, 10)``
  after an accepted step (1 right after a rejection) and
  ``h · max(0.2, 0.75 · err^(-1/k))`` after a rejection, ``k = error_order + 1``:
  diffrax's rules with a safety of 0.75 instead of 0.9 and scipy's hold after
  a rejection; :mod:`lnn.solvers._controller` says why);
- the samples ``t_j`` passed by an accepted step are filled by the tableau's
  dense output, per trajectory (the grid ``t`` is shared, not the steps);
- the initial step is Hairer's estimate (scipy's ``select_initial_step``),
  per trajectory.

A trajectory whose attempt is non-finite (a learned mass matrix that is not
positive definite gives NaN: under this engine the Cholesky factorisation is
the unrolled one of :func:`lnn.mechanics.solve_cholesky`, which does not
raise) rejects the step and retries it 4x smaller; it **fails** when its step
falls below ``10 eps |t|`` (reason ``"non-finite"`` if its last attempt was
non-finite, else ``"step size too small"``) or after ``max_steps``
attempts. A failed trajectory stops at its last accepted time (its later
samples are NaN); the others continue. The loop ends when every trajectory
has finished or failed.

The loop is one ``tf.while_loop`` in one ``tf.function`` with a fixed
``input_signature`` (batch and grid sizes ``None``: traced once per system,
method and forcing), compiled with XLA for the forward solve; under a
gradient tape (or inside another ``tf.function``) the same graph runs without
XLA and is differentiated step by step (discretise-then-differentiate: the
step sizes are held fixed, as by diffrax's default adjoint), so gradients
reach the initial state, the sampled forces and the system's variables.
"""

from __future__ import annotations

import math
import time
import weakref
from dataclasses import dataclass
from typing import Any

import numpy as np
import tensorflow as tf

from lnn import _runtime
from lnn.solvers import NAMES
from lnn.solvers import tableau as _tableau
from lnn.solvers._controller import DEFAULT_CONTROLLER, StepController

__all__ = ["AdaptiveSolution", "STATUS", "solve", "compiled_rollout"]

#: Status codes of the trajectories of an :class:`AdaptiveSolution`.
STATUS = {0: "running", 1: "finished", 2: "non-finite", 3: "step size too small", 4: "max_steps reached"}
_RUNNING, _DONE, _NONFINITE, _TOO_SMALL, _MAX_STEPS = range(5)
#: Loop iterations per plain-graph call of a rollout while its XLA form compiles (:class:`_RolloutCaller`).
GRAPH_CHUNK = 32
#: Batches of at least this many trajectories run their XLA solve in calls of about
#: :data:`XLA_CALL_SECONDS` (at least 8 loop iterations; 16 before one is timed), so that the last
#: running trajectories can leave it for a smaller plain graph (:class:`_RolloutCaller`); smaller
#: batches run in one call.
COMPACT_MIN_BATCH = 64
XLA_CALL_SECONDS = 0.2

# system -> {options key: compiled solve}; weak so that models can be freed.
_CACHE: weakref.WeakKeyDictionary[Any, dict] = weakref.WeakKeyDictionary()


@dataclass(frozen=True, eq=False)
class AdaptiveSolution:
    """The result of :func:`solve` (tensors).

    Attributes
    ----------
    q, qd, qdd, tau : tf.Tensor, shape ``(B, T, n)``
        At the samples; NaN after a trajectory's failure (``qdd`` also NaN
        where the system's acceleration is not finite).
    energy : tf.Tensor, shape ``(B, T)``
        NaN for a system without ``energy``.
    failed_at : tf.Tensor, shape ``(B,)``
        The failure times (the last accepted time), NaN where the trajectory finished.
    status : tf.Tensor of int32, shape ``(B,)``
        Codes of :data:`STATUS` (1: finished).
    n_accepted, n_rejected : tf.Tensor of int32, shape ``(B,)``
        Accepted and rejected steps per trajectory.
    nfev : tf.Tensor of int32
        Batched right-hand-side evaluations of the solve (the samples' not included).
    """

    q: tf.Tensor
    qd: tf.Tensor
    qdd: tf.Tensor
    tau: tf.Tensor
    energy: tf.Tensor
    failed_at: tf.Tensor
    status: tf.Tensor
    n_accepted: tf.Tensor
    n_rejected: tf.Tensor
    nfev: tf.Tensor


# ----------------------------------------------------------------------------- public entry


def solve(
    system,
    y0,
    t,
    *,
    method: str,
    tau_samples=None,
    hold: bool = False,
    rtol,
    atol,
    max_step=math.inf,
    max_steps: int = 100_000,
    jit_compile: bool | None = None,
    dtype=None,
    controller: StepController = DEFAULT_CONTROLLER,
) -> AdaptiveSolution:
    """Integrate a batch adaptively with the compiled pair ``method`` (see the module docstring).

    Parameters
    ----------
    system : MechanicalSystem
        Its ``acceleration(q, qd[, tau])`` (and ``energy(q, qd)``, when it has
        one) must accept TensorFlow tensors ``(B, n)``.
    y0 : tensor or array, shape ``(B, 2n)``
        Initial states ``[q, qd]``.
    t : tensor or array, shape ``(T,)``
        Strictly increasing sample times (checked by the callers), ``T >= 2``.
    method : {"tsit5", "dopri5", "dopri8", "dopri853"}, keyword-only
    tau_samples : tensor or array, shape ``(B, T, n)``, optional, keyword-only
        Generalized forces sampled on ``t`` (interpolated linearly, or held
        with ``hold``); None: unforced.
    rtol, atol : tensor or array, shape ``(B,)``, keyword-only
        Per-trajectory tolerances (positive).
    max_step : float, keyword-only
    max_steps : int, keyword-only
        Step attempts per trajectory before it fails.
    jit_compile : bool, optional, keyword-only
        XLA for the solve; default: XLA unless a gradient tape may record or
        the inputs are symbolic.
    dtype : tf.DType, optional
        Default: the system's dtype (float64 when it has none).
    controller : StepController, keyword-only
        The step-size controller (default: :data:`lnn.solvers.DEFAULT_CONTROLLER`,
        the one :func:`lnn.rollout` uses).

    Returns
    -------
    AdaptiveSolution

    Raises
    ------
    ValueError
        For an unknown ``method`` (the message lists the methods).
    TypeError
        If the system's ``acceleration`` does not accept TensorFlow tensors
        (a numpy-only ground-truth system): use a ``solve_ivp`` method.
    """
    tab = _tableau(method)
    if not isinstance(controller, StepController):
        raise TypeError(f"controller must be a lnn.solvers.StepController; got {type(controller).__name__}")
    if dtype is None:
        from lnn.odeint import _system_dtype

        dtype = _system_dtype(system, y0)
    n = int(system.n_dof)
    y0 = tf.convert_to_tensor(y0, dtype=dtype) if not isinstance(y0, tf.Tensor) else tf.cast(y0, dtype)
    t = tf.convert_to_tensor(t, dtype=dtype) if not isinstance(t, tf.Tensor) else tf.cast(t, dtype)
    batch = tf.shape(y0)[0]
    rtol = tf.broadcast_to(tf.cast(rtol, dtype), [batch])
    atol = tf.broadcast_to(tf.cast(atol, dtype), [batch])
    symbolic = not tf.executing_eagerly() or any(isinstance(x, tf.Tensor) and not hasattr(x, "numpy") for x in (y0, t))
    if jit_compile is None:
        jit_compile = not symbolic and not _runtime.tape_may_record()
    has_tau = tau_samples is not None
    run = _compiled(
        system, tab, n=n, dtype=dtype, has_tau=has_tau, hold=bool(hold), jit=bool(jit_compile), controller=controller
    )
    args = [y0, t]
    if has_tau:
        args.append(tf.cast(tau_samples, dtype))
    args += [rtol, atol, tf.constant(min(float(max_step), 1e300), dtype), tf.constant(int(max_steps), tf.int32)]
    Y, qdd, energy, failed_at, status, n_acc, n_rej, nfev = run(*args)
    tau_all = tf.cast(tau_samples, dtype) if has_tau else tf.zeros(tf.concat([tf.shape(Y)[:2], [n]], axis=0), dtype)
    return AdaptiveSolution(
        q=Y[..., :n],
        qd=Y[..., n:],
        qdd=qdd,
        tau=tau_all,
        energy=energy,
        failed_at=failed_at,
        status=status,
        n_accepted=n_acc,
        n_rejected=n_rej,
        nfev=nfev,
    )


def _cached(system, key, build):
    try:
        per_system = _CACHE.setdefault(system, {})
    except TypeError:
        return build()
    if key not in per_system:
        per_system[key] = build()
    return per_system[key]


def _compiled(system, tab, *, n, dtype, has_tau, hold, jit, samples=True, controller=DEFAULT_CONTROLLER):
    """The compiled solve for ``system`` and these options (cached; traced on first use)."""
    key = (tab.name, n, dtype, has_tau, hold, jit, samples, controller)

    def build():
        _acceleration_function(system, tab.name, n=n, dtype=dtype, has_tau=has_tau)  # TypeError if not TF
        return _build(
            system, tab, n=n, dtype=dtype, has_tau=has_tau, hold=hold, jit=jit, samples=samples, controller=controller
        )

    run = _cached(system, key, build)
    if samples:
        return run
    # One plain-graph start per system and options, shared by the graph and XLA forms.
    begin = _cached(
        system, key[:5] + ("begin",), lambda: _build_begin(system, tab, n=n, dtype=dtype, has_tau=has_tau, hold=hold)
    )
    return begin, run


def _acceleration_function(system, name: str, *, n: int, dtype, has_tau: bool):
    """``(q, qd[, tau]) -> qdd (B, n)``: ``system.acceleration`` traced once per system and signature.

    Every form of a solve (its start, the XLA and the plain-graph step loops,
    the samples) calls this one concrete function, so the system's graph is
    traced once rather than once per form (XLA inlines the call). It is
    traced as the package's XLA functions trace (:func:`lnn._runtime.xla_body`:
    a mass matrix that is not positive definite gives NaN, never an
    exception, in every form). Cached per system.

    Raises
    ------
    TypeError
        If ``system.acceleration`` does not accept TensorFlow tensors (a
        numpy-only ground-truth system): the message names ``name`` and DOP853.
    """

    def build():
        spec = tf.TensorSpec([None, n], dtype)

        def acceleration(q, qd, *tau):
            return tf.cast(system.acceleration(q, qd, *tau), dtype)

        try:
            function = tf.function(
                _runtime.xla_body(acceleration), input_signature=[spec] * (3 if has_tau else 2), autograph=False
            )
            return function.get_concrete_function()
        except (TypeError, NotImplementedError, AttributeError, ValueError) as exc:
            raise TypeError(
                f"method {name!r} integrates in TensorFlow: it needs a system whose "
                f"acceleration accepts TensorFlow tensors (a learned model, or a system written "
                f"in TensorFlow); {type(system).__name__}.acceleration failed on tensors "
                f"({type(exc).__name__}: {exc}). Use a solve_ivp method such as 'DOP853'"
            ) from exc

    return _cached(system, ("acceleration", n, dtype, has_tau), build)


def tracing_count(system) -> int:
    """Traces of every compiled solve of ``system`` so far (one per options key when healthy)."""
    return int(
        sum(
            fn.experimental_get_tracing_count()
            for fn in _CACHE.get(system, {}).values()
            if hasattr(fn, "experimental_get_tracing_count")
        )
    )


# ----------------------------------------------------------------------------- the engine


def _rms(x):
    return tf.sqrt(tf.reduce_mean(tf.square(x), axis=1))


def _full_tableau(tab):
    """``(a, c, b, S)``: the stage rows of a step, ``1 .. S-1`` (the last one at ``y_new``),
    followed by the dense output's extra stages, as one ``(S + E, S + E)`` matrix."""
    if tab.fsal:
        S = tab.stages
        size = S + tab.extra_c.shape[0]
        a = np.zeros((size, size))
        a[:S, :S] = tab.a
        c = np.zeros(size)
        c[:S] = tab.c
    else:
        S = tab.stages + 1
        size = S + tab.extra_c.shape[0]
        a = np.zeros((size, size))
        a[: tab.stages, : tab.stages] = tab.a
        a[tab.stages, : tab.stages] = tab.b  # the derivative at y_new is a stage too
        c = np.zeros(size)
        c[: tab.stages] = tab.c
        c[tab.stages] = 1.0
    for j, (row, cj) in enumerate(zip(tab.extra_a, tab.extra_c)):
        a[S + j, : row.shape[0]] = row[:size]
        c[S + j] = cj
    b = np.zeros(S)
    b[: tab.stages] = tab.b
    return a, c, b, S


class _Kernels:
    """The right-hand side and the stage loop of one trace of :func:`_build`'s ``run``."""

    def __init__(self, system, *, n, dtype, has_tau, hold, t, tau_s, A, C, B):
        self.n, self.dtype, self.has_tau, self.hold = n, dtype, has_tau, hold
        self.acceleration = _acceleration_function(system, "", n=n, dtype=dtype, has_tau=has_tau)
        self.t, self.T, self.tau_s, self.A, self.C, self.B = t, tf.shape(t)[0], tau_s, A, C, B

    def force(self, s):
        """The sampled force at the times ``s (B,)``, ``(B, n)`` (the rule of lnn._torque)."""
        t, T = self.t, self.T
        k = tf.reduce_sum(tf.cast(t[tf.newaxis, :] <= s[:, tf.newaxis], tf.int32), axis=1) - 1
        k = tf.clip_by_value(k, 0, T - 2)
        t_a, t_b = tf.gather(t, k), tf.gather(t, k + 1)
        w = tf.cast(s >= t_b, self.dtype) if self.hold else (s - t_a) / (t_b - t_a)
        tau_a = tf.gather(self.tau_s, k, batch_dims=1)
        tau_b = tf.gather(self.tau_s, k + 1, batch_dims=1)
        return tau_a + w[:, tf.newaxis] * (tau_b - tau_a)

    def rhs(self, s, y):
        """``[qd, qdd]`` at the times ``s (B,)`` and states ``y (B, 2n)``."""
        n = self.n
        q, qd = y[:, :n], y[:, n:]
        qdd = self.acceleration(q, qd, self.force(s)) if self.has_tau else self.acceleration(q, qd)
        return tf.concat([qd, qdd], axis=1)

    def finite_rows(self, *xs):
        """Rows ``(B,)`` where every one of ``xs (B, k)`` is finite."""
        ok = tf.ones([self.B], tf.bool)
        for x in xs:
            ok = ok & tf.reduce_all(tf.math.is_finite(x), axis=1)
        return ok

    @staticmethod
    def combine(weights, K):
        """``sum_i weights[i] K[i]``: ``(k,)`` x ``(k, B, 2n)`` -> ``(B, 2n)``."""
        return tf.tensordot(weights, K, axes=1)

    def stages(self, K, y, h, tcur, first, last):
        """Evaluate the tableau rows ``first .. last - 1`` into ``K (size, B, 2n)``."""
        hb = h[:, None]

        def body(i, K):
            y_i = y + hb * self.combine(self.A[i], K)
            k_i = self.rhs(tcur + self.C[i] * h, y_i)
            return i + 1, tf.tensor_scatter_nd_update(K, [[i]], k_i[tf.newaxis])

        return tf.while_loop(lambda i, K: i < last, body, (tf.constant(first), K))[1]


def _initial_step(rhs, finite_rows, y0, t0, t_end, rtol, atol, max_step, *, k_exp, dtype, B):
    """Hairer's initial step (scipy's ``select_initial_step``), per trajectory.

    Returns ``(h (B,), f0 (B, 2n), status (B,), failed_at (B,))``: a
    trajectory whose initial derivative is not finite fails at ``t0``.
    """
    span = t_end - t0
    f0 = rhs(tf.fill([B], t0), y0)
    scale0 = atol[:, None] + tf.abs(y0) * rtol[:, None]
    d0, d1 = _rms(y0 / scale0), _rms(f0 / scale0)
    h0 = tf.where((d0 < 1e-5) | (d1 < 1e-5), tf.constant(1e-6, dtype), 0.01 * d0 / d1)
    h0 = tf.minimum(h0, span)
    f1 = rhs(t0 + h0, y0 + h0[:, None] * f0)
    d2 = _rms((f1 - f0) / scale0) / h0
    h1 = tf.where(
        (d1 <= 1e-15) & (d2 <= 1e-15),
        tf.maximum(tf.constant(1e-6, dtype), h0 * 1e-3),
        (0.01 / tf.maximum(d1, d2)) ** k_exp,
    )
    h_init = tf.minimum(tf.minimum(100 * h0, h1), tf.minimum(span, max_step))
    ok0 = finite_rows(y0, f0)
    h_init = tf.stop_gradient(tf.where(ok0 & tf.math.is_finite(h_init), h_init, span))
    nan = tf.constant(math.nan, dtype)
    return h_init, f0, tf.where(ok0, _RUNNING, _NONFINITE), tf.where(ok0, nan, t0)


def _dense_values(tab, stages, y, y_new, K, h, tcur, *, S, size, dtype):
    """``value(theta (B,)) -> (B, 2n)``: the tableau's interpolant inside the step."""
    hb = h[:, None]
    if tab.dense_kind == "polynomial":
        P = tf.constant(tab.dense, dtype)  # (S, d)
        Q = hb[tf.newaxis] * tf.tensordot(tf.transpose(P), K[:S], axes=1)  # (d, B, 2n)
        d = tab.dense.shape[1]

        def value(theta):
            powers = tf.math.cumprod(tf.tile(theta[:, None], [1, d]), axis=1)  # (B, d)
            return y + tf.einsum("bd,dbm->bm", powers, Q)

        return value
    K = stages(K, y, h, tcur, S, size)  # DOP853's three extra stages
    f_old, f_new = K[0], K[S - 1]
    delta = y_new - y
    F = [delta, hb * f_old - delta, 2 * delta - hb * (f_new + f_old)]
    extra = hb[tf.newaxis] * tf.tensordot(tf.constant(tab.dense, dtype), K, axes=1)
    F += [extra[j] for j in range(tab.dense.shape[0])]

    def value(theta):
        x = theta[:, None]
        acc = tf.zeros_like(y)
        for i, f in enumerate(reversed(F)):
            acc = (acc + f) * (x if i % 2 == 0 else 1 - x)
        return y + acc

    return value


def _fill(out, k_next, value, accept, tcur, t_new, h, *, t, rows):
    """Write the samples in ``(tcur, t_new]`` of the accepted trajectories into ``out (B, T, 2n)``."""
    T = tf.shape(t)[0]
    safe_h = tf.where(h > 0, h, tf.ones_like(h))

    def pending(k_next):
        kk = tf.minimum(k_next, T - 1)
        return accept & (k_next < T) & (tf.gather(t, kk) <= t_new), kk

    def cond(out, k_next):
        return tf.reduce_any(pending(k_next)[0])

    def body(out, k_next):
        mask, kk = pending(k_next)
        theta = (tf.gather(t, kk) - tcur) / safe_h
        idx = tf.stack([rows, kk], axis=1)
        new = tf.where(mask[:, None], value(theta), tf.gather_nd(out, idx))
        return tf.tensor_scatter_nd_update(out, idx, new), k_next + tf.cast(mask, tf.int32)

    return tf.while_loop(cond, body, (out, k_next))


def _at_samples(system, Y, y0, tau_s, *, n, dtype, has_tau, has_energy):
    """``qdd (B, T, n)`` and ``energy (B, T)`` at the samples ``Y (B, T, 2n)``, one call each.

    NaN where a state is not finite (after a failure; the trajectory's
    initial state stands in for the call) or the acceleration is not.
    """
    m = 2 * n
    shape = tf.shape(Y)
    flat = tf.reshape(Y, [-1, m])
    good = tf.reduce_all(tf.math.is_finite(flat), axis=1)
    start = tf.reshape(tf.tile(y0[:, tf.newaxis, :], tf.stack([1, shape[1], 1])), [-1, m])
    safe = tf.where(good[:, None], flat, start)
    q, qd = safe[:, :n], safe[:, n:]
    acceleration = _acceleration_function(system, "", n=n, dtype=dtype, has_tau=has_tau)
    qdd = acceleration(q, qd, tf.reshape(tau_s, [-1, n])) if has_tau else acceleration(q, qd)
    nan = tf.constant(math.nan, dtype)
    qdd = tf.where(good[:, None], qdd, nan)
    if has_energy:
        energy = tf.where(good, tf.cast(tf.reshape(system.energy(q, qd), [-1]), dtype), nan)
    else:
        energy = tf.fill(tf.shape(good), nan)
    return tf.reshape(qdd, tf.stack([shape[0], shape[1], n])), tf.reshape(energy, shape[:2])


def _initial_state(y0, t, h_init, f0, status0, failed_at0, *, dtype):
    """The state of the step loop before the first step (the 14 tensors of ``step``'s arguments)."""
    B, T, m = tf.shape(y0)[0], tf.shape(t)[0], tf.shape(y0)[1]
    nan = tf.constant(math.nan, dtype)
    out0 = tf.concat([y0[:, tf.newaxis, :], tf.fill(tf.stack([B, T - 1, m]), nan)], axis=1)  # (B, T, 2n)
    zeros_i = tf.zeros([B], tf.int32)
    return (
        tf.constant(0),
        tf.fill([B], t[0]),
        h_init,
        y0,
        f0,
        tf.ones([B], dtype),
        tf.zeros([B], tf.bool),
        status0,
        failed_at0,
        tf.ones([B], tf.int32),
        out0,
        zeros_i,
        zeros_i,
        tf.constant(2, tf.int32),
    )


def _state_signature(m, dtype):
    """``input_signature`` of the loop state (see :func:`_initial_state`)."""
    vector, ints, scalar_i = tf.TensorSpec([None], dtype), tf.TensorSpec([None], tf.int32), tf.TensorSpec([], tf.int32)
    states = tf.TensorSpec([None, m], dtype)
    return [
        scalar_i,
        vector,
        vector,
        states,
        states,
        vector,
        tf.TensorSpec([None], tf.bool),
        ints,
        vector,
        ints,
        tf.TensorSpec([None, None, m], dtype),
        ints,
        ints,
        scalar_i,
    ]


def _build_begin(system, tab, *, n, dtype, has_tau, hold):
    """``tf.function`` ``begin(y0, t, [tau_samples,] rtol, atol, max_step)``, not compiled by XLA.

    Returns the loop state of :func:`_initial_state` (from :func:`_initial_step`):
    the start of :func:`_build`'s resumable solve (without ``samples``), run
    as a plain graph (it is two evaluations of the system), so that XLA
    compiles one copy of the system's graph fewer.
    """
    m = 2 * n
    a_np, c_np, _, _ = _full_tableau(tab)
    k_exp = 1.0 / (tab.error_order + 1)

    def begin(y0, t, *rest):
        tau_s = rest[0] if has_tau else None
        rtol, atol, max_step = rest[-3:]
        B = tf.shape(y0)[0]
        A, C = tf.constant(a_np, dtype), tf.constant(c_np, dtype)
        kern = _Kernels(system, n=n, dtype=dtype, has_tau=has_tau, hold=hold, t=t, tau_s=tau_s, A=A, C=C, B=B)
        start = _initial_step(
            kern.rhs, kern.finite_rows, y0, t[0], t[-1], rtol, atol, max_step, k_exp=k_exp, dtype=dtype, B=B
        )
        return _initial_state(y0, t, *start, dtype=dtype)

    signature = [tf.TensorSpec([None, m], dtype), tf.TensorSpec([None], dtype)]
    if has_tau:
        signature.append(tf.TensorSpec([None, None, n], dtype))
    signature += [tf.TensorSpec([None], dtype), tf.TensorSpec([None], dtype), tf.TensorSpec([], dtype)]
    return tf.function(begin, input_signature=signature, jit_compile=False, autograph=False, reduce_retracing=True)


def _build(system, tab, *, n, dtype, has_tau, hold, jit, samples=True, controller=DEFAULT_CONTROLLER):
    """``tf.function`` ``run(y0, t, [tau_samples,] rtol, atol, max_step, max_steps)``.

    Returns ``(Y (B, T, 2n), qdd (B, T, n), energy (B, T), failed_at, status,
    n_accepted, n_rejected, nfev)``; without ``samples``, ``(Y, failed_at,
    status, n_accepted, n_rejected, nfev)``: the accelerations and energies at
    the samples are left to the caller (:func:`compiled_rollout` evaluates them
    in numpy), which keeps two copies of the system's graph out of XLA's
    compilation.
    The stages of a step are one inner ``tf.while_loop`` over the rows of the
    tableau (one copy of the system's graph per loop, which keeps XLA's
    compilation short), stored in a ``(S, B, 2n)`` tensor.
    """
    k_exp = 1.0 / (tab.error_order + 1)
    eps = float(np.finfo(dtype.as_numpy_dtype).eps)
    m = 2 * n
    has_energy = callable(getattr(system, "energy", None))
    a_np, c_np, b_np, S = _full_tableau(tab)
    size = a_np.shape[0]
    n_extra = size - S
    c_floor = tf.constant(1e-4, dtype)

    def run(y0, t, *rest):
        if not samples:  # resumable: the loop state in and out (_build_begin's function starts it)
            rest, state = rest[:-14], rest[-14:]
        if has_tau:
            tau_s, rtol, atol, max_step, max_steps = rest
        else:
            tau_s = None
            rtol, atol, max_step, max_steps = rest
        A, C = tf.constant(a_np, dtype), tf.constant(c_np, dtype)
        b_w = tf.constant(b_np, dtype)
        E = tf.constant(tab.error[:S], dtype)  # (S, 1 or 2)
        B, T = tf.shape(y0)[0], tf.shape(t)[0]
        t0, t_end = t[0], t[-1]
        rows = tf.range(B)
        kern = _Kernels(system, n=n, dtype=dtype, has_tau=has_tau, hold=hold, t=t, tau_s=tau_s, A=A, C=C, B=B)
        rhs, finite_rows, combine, stages = kern.rhs, kern.finite_rows, kern.combine, kern.stages

        if samples:
            start = _initial_step(rhs, finite_rows, y0, t0, t_end, rtol, atol, max_step, k_exp=k_exp, dtype=dtype, B=B)
            state = _initial_state(y0, t, *start, dtype=dtype)

        def step(i, tcur, h, y, f, err_prev, rejected, status, failed_at, k_next, out, n_acc, n_rej, nfev):
            running = tf.equal(status, _RUNNING)
            left = t_end - tcur
            last = h >= left * (1 - 4 * eps)
            h_step = tf.where(running, tf.where(last, left, h), tf.zeros_like(h))
            hb = h_step[:, None]
            K = tf.tensor_scatter_nd_update(tf.zeros(tf.stack([size, B, m]), dtype), [[0]], f[tf.newaxis])
            K = stages(K, y, h_step, tcur, 1, S)
            y_new = y + hb * combine(b_w, K[:S])
            f_new = K[S - 1]
            scale = atol[:, None] + rtol[:, None] * tf.maximum(tf.abs(y), tf.abs(y_new))
            if tab.error.shape[1] == 1:
                norm = _rms(hb * combine(E[:, 0], K[:S]) / scale)
            else:
                e5 = combine(E[:, 0], K[:S]) / scale
                e3 = combine(E[:, 1], K[:S]) / scale
                s5, s3 = tf.reduce_sum(e5**2, axis=1), tf.reduce_sum(e3**2, axis=1)
                denom = s5 + 0.01 * s3
                norm = tf.where(
                    denom > 0,
                    tf.abs(h_step) * s5 / tf.sqrt(tf.where(denom > 0, denom, tf.ones_like(denom)) * m),
                    tf.zeros_like(denom),
                )
            norm = tf.stop_gradient(norm)
            finite = finite_rows(y_new, f_new) & tf.math.is_finite(norm)
            norm = tf.where(finite, norm, tf.fill([B], tf.constant(math.inf, dtype)))
            accept = running & (norm <= 1.0)
            factor = controller.factor(
                norm, err_prev, accept=accept, rejected=rejected, finite=finite, k_exp=k_exp, dtype=dtype
            )
            h_next = tf.minimum(h_step * factor, max_step)
            h_next = tf.stop_gradient(tf.where(running, h_next, h))
            t_new = tf.where(accept, tf.where(last, t_end, tcur + h_step), tcur)
            hmin = 10 * eps * tf.maximum(tf.abs(tcur), tf.abs(t_end))
            too_small = running & ~accept & (h_next < hmin)
            # Dense output, only when an accepted step passed a sample.
            kk = tf.minimum(k_next, T - 1)
            needs = tf.reduce_any(accept & (k_next < T) & (tf.gather(t, kk) <= t_new))

            def with_samples():
                value = _dense_values(tab, stages, y, y_new, K, h_step, tcur, S=S, size=size, dtype=dtype)
                return _fill(out, k_next, value, accept, tcur, t_new, h_step, t=t, rows=rows)

            out, k_next = tf.cond(needs, with_samples, lambda: (out, k_next))
            extra = tf.where(needs, n_extra, 0)
            acc = accept[:, None]
            done = accept & last
            status = tf.where(done, _DONE, status)
            status = tf.where(too_small, tf.where(finite, _TOO_SMALL, _NONFINITE), status)
            failed_at = tf.where(too_small, tcur, failed_at)
            return (
                i + 1,
                t_new,
                h_next,
                tf.where(acc, y_new, y),
                tf.where(acc, f_new, f),
                tf.where(accept, tf.maximum(norm, c_floor), err_prev),
                tf.where(running, ~accept, rejected),
                status,
                failed_at,
                k_next,
                out,
                n_acc + tf.cast(accept, tf.int32),
                n_rej + tf.cast(running & ~accept, tf.int32),
                nfev + (S - 1) + extra,
            )

        def cond(i, tcur, h, y, f, err_prev, rejected, status, *_):
            return (i < max_steps) & tf.reduce_any(tf.equal(status, _RUNNING))

        final = tf.while_loop(cond, step, tuple(state))
        if not samples:  # max_steps is this call's limit of loop iterations; the caller finishes
            return final
        _, tcur, _, _, _, _, _, status, failed_at, _, out, n_acc, n_rej, nfev = final
        over = tf.equal(status, _RUNNING)
        status = tf.where(over, _MAX_STEPS, status)
        failed_at = tf.where(over, tcur, failed_at)
        qdd, energy = _at_samples(system, out, y0, tau_s, n=n, dtype=dtype, has_tau=has_tau, has_energy=has_energy)
        return out, qdd, energy, failed_at, status, n_acc, n_rej, nfev

    signature = [tf.TensorSpec([None, m], dtype), tf.TensorSpec([None], dtype)]
    if has_tau:
        signature.append(tf.TensorSpec([None, None, n], dtype))
    signature += [
        tf.TensorSpec([None], dtype),
        tf.TensorSpec([None], dtype),
        tf.TensorSpec([], dtype),
        tf.TensorSpec([], tf.int32),
    ]
    if not samples:
        signature += _state_signature(m, dtype)
    return tf.function(
        _runtime.xla_body(run), input_signature=signature, jit_compile=jit, autograph=False, reduce_retracing=True
    )


# ----------------------------------------------------------------------------- lnn.rollout


def compiled_rollout(problem, *, max_steps: int, progress=None):
    """:func:`lnn.rollout` with a compiled method: ``(Trajectory of numpy arrays, None)``.

    ``problem`` is the checked :class:`lnn.integrate._Problem`. A controller
    ``tau(t, q, qd)`` is not accepted (the trajectories have their own times);
    sampled forces are.
    """
    from lnn.integrate import _Solution, _tolerance_metadata, _trajectory
    from lnn.trajectory import Failure, Trajectory

    torque = problem.torque
    if torque.controller is not None:
        raise TypeError(
            f"method {problem.method!r} takes tau as samples on t (or None); a "
            "controller tau(t, q, qd) needs a solve_ivp method such as 'DOP853'"
        )
    B, n, t = problem.B, problem.n, problem.t
    y0 = problem.y0.reshape(B, 2 * n)
    if t.shape[0] == 1:
        return _trajectory(problem, _Solution(Y=y0[:, None, :], nfev=0, counters={})), None
    dtype = _rollout_dtype(problem.system)
    system, n_np = problem.system, dtype.as_numpy_dtype
    has_tau = torque.samples is not None
    run = _rollout_caller(system, _tableau(problem.method), n=n, dtype=dtype, has_tau=has_tau, hold=torque.hold)
    args = [y0, t] + ([torque.samples] if has_tau else []) + [problem.rtol, problem.atol]
    args = [_runtime.eager_tensor(np.ascontiguousarray(a, dtype=n_np), dtype) for a in args]
    args += [
        _runtime.eager_tensor(np.asarray(min(problem.max_step, 1e300), n_np), dtype),
        _runtime.eager_tensor(np.asarray(max_steps, np.int32), tf.int32),
    ]
    Y, failed_at, status, n_acc, n_rej, nfev = run(*args)
    failed_at = failed_at.astype(np.float64)
    failures = tuple(
        Failure(
            index=int(b),
            time=float(failed_at[b]),
            reason=_reason(int(status[b]), float(failed_at[b]), problem.method, max_steps),
        )
        for b in np.flatnonzero(status != _DONE)
    )
    if progress is not None:
        span = float(t[-1] - t[0])
        progress(span, span)
    qdd, energy = _samples_in_blocks(system, Y, args[0], args[2] if has_tau else None, n=n, dtype=dtype)
    Y = np.asarray(Y, dtype=np.float64)
    tau_all = np.array(torque.samples, dtype=np.float64) if has_tau else np.zeros((B, t.shape[0], n))
    trajectory = Trajectory(
        t=t,
        q=np.ascontiguousarray(Y[..., :n]),
        qd=np.ascontiguousarray(Y[..., n:]),
        qdd=np.asarray(qdd, dtype=np.float64),
        tau=tau_all,
        energy=np.asarray(energy, dtype=np.float64),
        nfev=int(nfev),
        method=problem.method,
        metadata={
            **_tolerance_metadata(problem),
            "max_step": problem.max_step,
            "max_steps": max_steps,
            "error_control": "trajectory",
            "tau_interpolation": problem.tau_interpolation,
            "n_accepted": n_acc.tolist(),
            "n_rejected": n_rej.tolist(),
        },
        failed_at=failed_at,
        failures=failures,
    )
    return trajectory, None


def _samples_in_blocks(system, Y, y0, tau, *, n, dtype):
    """``(qdd (B, T, n), energy (B, T))`` at the samples ``Y (B, T, 2n)``, in blocks of trajectories.

    One plain-graph call per block of about :data:`lnn.integrate._SAMPLE_BLOCK`
    samples: one call over a 7-DOF learned chain's 256 x 101 samples took
    2.5 s the first time and 0.71 s after (its temporaries outgrow the caches
    and the allocator's pools); in these blocks (10 trajectories of 101
    samples) 0.62 s and 0.48 s.
    """
    from lnn.integrate import _SAMPLE_BLOCK

    at_samples = _samples_caller(system, n=n, dtype=dtype, has_tau=tau is not None)
    B, T = Y.shape[0], Y.shape[1]
    rows = max(1, _SAMPLE_BLOCK // T)
    qdd, energy = np.empty((B, T, n), dtype=Y.dtype), np.empty((B, T), dtype=Y.dtype)
    for start in range(0, B, rows):
        block = slice(start, start + rows)
        extra = [] if tau is None else [tau[block]]
        q_dd, e = at_samples(_runtime.eager_tensor(Y[block], dtype), y0[block], *extra)
        qdd[block], energy[block] = q_dd.numpy(), e.numpy()
    return qdd, energy


def _samples_caller(system, *, n, dtype, has_tau):
    """``(Y (B, T, 2n), y0 (B, 2n), [tau (B, T, n)]) -> (qdd (B, T, n), energy (B, T))``, a plain graph.

    :func:`_at_samples` outside the XLA solve (one call for every sample of
    the batch, no per-shape compilation), cached per system.
    """
    has_energy = callable(getattr(system, "energy", None))

    def build():
        def samples(Y, y0, *tau):
            tau_s = tau[0] if has_tau else None
            return _at_samples(system, Y, y0, tau_s, n=n, dtype=dtype, has_tau=has_tau, has_energy=has_energy)

        signature = [tf.TensorSpec([None, None, 2 * n], dtype), tf.TensorSpec([None, 2 * n], dtype)]
        if has_tau:
            signature.append(tf.TensorSpec([None, None, n], dtype))
        function = tf.function(samples, input_signature=signature, autograph=False, reduce_retracing=True)
        return _runtime.fast_caller(function.get_concrete_function())

    return _cached(system, ("samples", n, dtype, has_tau), build)


def _rollout_caller(system, tab, *, n, dtype, has_tau, hold):
    """The :class:`_RolloutCaller` of ``system`` and these options (cached per system)."""

    def build():
        begin, graph = _compiled(system, tab, n=n, dtype=dtype, has_tau=has_tau, hold=hold, jit=False, samples=False)
        _, xla = _compiled(system, tab, n=n, dtype=dtype, has_tau=has_tau, hold=hold, jit=True, samples=False)
        return _RolloutCaller(begin, graph, xla)

    return _cached(system, ("rollout", tab.name, n, dtype, has_tau, hold), build)


def usable_cores() -> int:
    """CPU cores this process may run on (its affinity mask where the OS has one)."""
    import os

    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # not on Linux
        return os.cpu_count() or 1


class _RolloutCaller:
    """``(y0, t, [tau,] rtol, atol, max_step, max_steps) -> (Y, failed_at, status, n_accepted, n_rejected, nfev)``.

    The policy of :mod:`lnn.models.compiled`, for whole solves: XLA compiles
    the solve anew for every shape of its inputs (``B`` trajectories, ``T``
    samples: 1-3 s for a learned model on one core with XLA's classic CPU
    emitters, 3-5 s with its default ones: :data:`lnn._runtime.XLA_CPU_EMITTERS`),
    so nothing waits for it. The solve is resumable (the step loop's state
    goes in and out), and runs in chunks of :data:`GRAPH_CHUNK` loop
    iterations as a plain graph (no compilation; 2-10x slower per step) while the XLA form of that shape
    compiles on the background worker (:func:`lnn.models.compiled.wait`
    waits for it); from the first chunk after the compilation, the rest of
    the solve runs in XLA. On a single usable core (:func:`usable_cores`)
    the compilation would only slow the graph down: the first call compiles
    XLA at once instead. Both forms are the same graph: their results agree
    to rounding (the step sizes come from the same error estimates). Calls
    skip TensorFlow's Python dispatch (:func:`lnn._runtime.fast_caller`).

    **The tail of a batch**: every trajectory takes its own steps, so the
    batch runs until its slowest trajectory ends, and the finished ones ride
    along at full cost (a 7-DOF learned chain, ``B = 256``: 960 step
    attempts on average, 1250-1320 for the slowest). Whenever at most half of
    the trajectories being solved still run, they are gathered into a
    smaller batch and continue as a plain graph (whose shapes are free: no
    compilation), their results scattered back at the end: as a plain graph
    this always pays; leaving XLA pays when the plain graph of the smaller
    batch is faster per loop iteration than XLA's of the whole batch. That
    is measured, not assumed: the per-iteration times of both forms are
    kept per batch size (to the next power of two); an unmeasured size is
    tried for a chunk, and a plain graph slower than XLA hands its rows
    back. XLA batches of :data:`COMPACT_MIN_BATCH` or more run in calls of
    about :data:`XLA_CALL_SECONDS` to be able to do so. The trajectories'
    arithmetic is the same in either form and batch.
    """

    def __init__(self, begin, graph, xla) -> None:
        self._begin = _runtime.fast_caller(begin.get_concrete_function())
        self._graph_function, self._graph = graph, None  # traced when first needed
        self._xla_function = xla
        self._xla = None
        self.ready: set[tuple] = set()
        self._scheduled: set[tuple] = set()
        #: Every XLA compilation, in order (:class:`lnn.models.compiled.Compilation`; ``rows`` is ``B``).
        self.compilations: list = []
        #: Loop iterations run as a plain graph and in XLA so far (for tests and benchmarks).
        self.iterations = {"graph": 0, "xla": 0}
        #: Compactions of running trajectories into a smaller plain-graph batch: ``(from, to)`` rows.
        self.compactions: list[tuple[int, int]] = []
        # (form, rows or their power-of-two bucket, T) -> seconds per loop iteration (measured).
        self._cost: dict[tuple, float] = {}

    def __call__(self, *args):
        *inputs, max_steps = args
        limit = int(max_steps.numpy())
        shape = tuple(tuple(a.shape) for a in inputs)
        batch, samples = int(shape[0][0]), int(shape[1][0])
        state = self._begin(*inputs)
        if shape not in self._scheduled:
            self._scheduled.add(shape)
            if usable_cores() >= 2:
                from lnn.models import compiled

                compiled.submit(self, shape, (inputs, state))
            else:  # one core: the background compilation would only slow the graph down
                self._compile(shape, (inputs, state))
        full_inputs, full_state, rows = inputs, state, None  # rows: the gathered subset, or None
        done = int(state[0].numpy())
        status = state[7].numpy()
        while done < limit and bool(np.any(status == _RUNNING)):
            running = np.flatnonzero(status == _RUNNING)
            if self._compact(shape, batch, samples, rows, running.size, status.size):
                full_state = state if rows is None else _scatter_rows(full_state, rows, state)
                rows = running if rows is None else rows[running]
                self.compactions.append((status.size, rows.size))
                inputs, state = _gather_rows(full_inputs, full_state, rows)
            xla = rows is None and shape in self.ready
            started = time.perf_counter()
            traced = False
            if xla:
                end = limit if batch < COMPACT_MIN_BATCH else min(done + self._xla_chunk(batch, samples), limit)
                state = self._xla(*inputs, _runtime.eager_tensor(np.asarray(end, np.int32), tf.int32), *state)
            else:
                if self._graph is None:
                    traced = True
                    self._graph = _runtime.fast_caller(self._graph_function.get_concrete_function())
                end = min(done + GRAPH_CHUNK, limit)
                state = self._graph(*inputs, _runtime.eager_tensor(np.asarray(end, np.int32), tf.int32), *state)
            status = state[7].numpy()
            now = int(state[0].numpy())
            if now > done and not traced:
                key = ("xla", batch, samples) if xla else ("graph", _bucket(status.size), samples)
                per_iteration = (time.perf_counter() - started) / (now - done)
                self._cost[key] = per_iteration if key not in self._cost else 0.5 * (self._cost[key] + per_iteration)
            self.iterations["xla" if xla else "graph"] += now - done
            done = now
            if rows is not None and shape in self.ready and not self._pays(batch, samples, status.size):
                # This plain graph is slower than XLA's whole batch: hand the rows back.
                full_state, rows = _scatter_rows(full_state, rows, state), None
                inputs, state = full_inputs, full_state
                status = state[7].numpy()
        if rows is not None:
            state = _scatter_rows(full_state, rows, state)
        _, tcur, _, _, _, _, _, status, failed_at, _, out, n_acc, n_rej, nfev = (x.numpy() for x in state)
        over = status == _RUNNING
        status = np.where(over, _MAX_STEPS, status)
        failed_at = np.where(over, tcur, failed_at)
        return out, failed_at, status, n_acc, n_rej, nfev

    def _xla_chunk(self, batch: int, samples: int) -> int:
        """Loop iterations of one XLA call of a large batch: about :data:`XLA_CALL_SECONDS`."""
        cost = self._cost.get(("xla", batch, samples))
        return 16 if cost is None else max(8, int(XLA_CALL_SECONDS / max(cost, 1e-9)))

    def _pays(self, batch: int, samples: int, rows: int) -> bool:
        """Whether a plain graph of ``rows`` is (or may be: unmeasured) faster than XLA's ``batch``."""
        graph = self._cost.get(("graph", _bucket(rows), samples))
        xla = self._cost.get(("xla", batch, samples))
        return graph is None or xla is None or graph < xla

    def _compact(self, shape, batch: int, samples: int, rows, running: int, current: int) -> bool:
        """Whether to gather the ``running`` of the ``current`` trajectories into a smaller batch."""
        if running == 0 or 2 * running > current:
            return False
        if rows is not None or shape not in self.ready:  # a plain graph already: fewer rows always pay
            return True
        return batch >= COMPACT_MIN_BATCH and self._pays(batch, samples, running)

    def _compile(self, shape, inputs) -> None:
        """Compile the XLA form for ``shape`` (one loop iteration run): the background worker's job."""
        import threading

        from lnn.models.compiled import Compilation

        args, state = inputs
        ok = True
        try:
            if self._xla is None:
                self._xla = _runtime.fast_caller(self._xla_function.get_concrete_function())
            self._xla_function(*args, tf.constant(1, tf.int32), *state)
        except Exception:  # a failed compilation leaves that shape in graph mode
            ok = False
        self.compilations.append(Compilation(int(shape[0][0]), threading.current_thread().name, ok))
        if ok:
            self.ready.add(shape)


def _bucket(rows: int) -> int:
    """The power of two at or above ``rows``: the batch sizes whose costs are kept apart."""
    return 1 << max(int(rows) - 1, 0).bit_length()


def _gather_rows(inputs, state, rows):
    """The solve's inputs and loop state restricted to the trajectories ``rows``."""
    index = tf.constant(rows, tf.int32)
    # y0, [tau,] rtol, atol are per trajectory; t and max_step are shared.
    per_row = {0, 2, 3} if len(inputs) == 5 else {0, 2, 3, 4}
    inputs = [tf.gather(x, index) if k in per_row else x for k, x in enumerate(inputs)]
    # Every entry of the loop state with a batch axis (all but the iteration and nfev counters).
    state = tuple(tf.gather(x, index) if x.shape.rank else x for x in state)
    return inputs, state


def _scatter_rows(full, rows, part):
    """``full`` loop state with the trajectories ``rows`` replaced by ``part`` (a gathered subset's)."""
    index = tf.constant(rows[:, None], tf.int32)
    return tuple(tf.tensor_scatter_nd_update(x, index, y) if x.shape.rank else y for x, y in zip(full, part))


def _rollout_dtype(system):
    from lnn.odeint import _system_dtype

    return _system_dtype(system, np.zeros(1))


def _reason(status: int, time: float, method: str, max_steps: int) -> str:
    if status == _NONFINITE:
        return (
            f"the state or acceleration became non-finite after t = {time:.6g} s ({method}); "
            "a learned mass matrix that is not positive definite gives NaN accelerations, "
            "or the system diverged"
        )
    if status == _TOO_SMALL:
        return f"the step size became too small at t = {time:.6g} s ({method})"
    if status == _MAX_STEPS:
        return f"max_steps = {max_steps} step attempts reached at t = {time:.6g} s ({method})"
    return f"stopped with status {STATUS.get(status, status)!r} at t = {time:.6g} s ({method})"


assert set(NAMES) == {"tsit5", "dopri5", "dopri8", "dopri853"}
