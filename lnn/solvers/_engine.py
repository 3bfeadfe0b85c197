"""The Runge–Kutta engine: one step loop for any embedded explicit pair, every trajectory its own step.

The engine integrates ``y = [q, qd]``, ``y' = [qd, qdd(q, qd, tau(t))]`` for a
batch of ``B`` initial states:

- each trajectory ``b`` carries its time ``t_b``, step ``h_b``, state, the
  derivative at its state (first-same-as-last) and its previous error: the
  loop's state is one :class:`LoopState`;
- an attempt evaluates the tableau's stages for the whole batch at once
  (stage times ``t_b + c_i h_b``); the error estimate of trajectory ``b`` is
  the root-mean-square norm over its ``2n`` components of
  ``err / (atol_b + rtol_b max(|y|, |y_new|))`` (DOP853's combination of its
  two estimates for ``"dopri853"``), so every trajectory meets its own
  tolerance, as a solo solve would;
- the step is accepted where that norm is ``<= 1``; the next step's size
  comes from a :class:`lnn.solvers.StepController`;
- the samples ``t_j`` passed by an accepted step are filled by the tableau's
  dense output, per trajectory (the grid ``t`` is shared, not the steps);
- the initial step is Hairer's estimate (scipy's ``select_initial_step``),
  per trajectory.

A trajectory whose attempt is non-finite (a learned mass matrix that is not
positive definite gives NaN: the Cholesky factorisation traced here is the
unrolled one of :func:`lnn.mechanics.solve_cholesky`, which does not raise)
rejects the step and retries it 4x smaller; it **fails** when its step falls
below ``10 eps |t|`` (status ``NONFINITE`` if its last attempt was
non-finite, else ``TOO_SMALL``) or after ``max_steps`` attempts. A failed
trajectory stops at its last accepted time (its later samples are NaN); the
others continue.

This module builds the loop's ``tf.function`` s (:func:`build_run`, and
:func:`build_begin` for a resumable solve); :mod:`lnn.solvers._solve` calls
them with tensors, :mod:`lnn.solvers._scheduler` schedules their XLA forms.
It knows nothing of :mod:`lnn.integrate`.
"""

from __future__ import annotations

import math
import weakref
from typing import Any, NamedTuple

import numpy as np
import tensorflow as tf

from lnn import _runtime
from lnn.solvers._controller import DEFAULT_CONTROLLER

__all__ = [
    "DONE",
    "MAX_STEPS",
    "NONFINITE",
    "RUNNING",
    "STATUS",
    "TOO_SMALL",
    "LoopState",
    "acceleration_function",
    "at_samples",
    "build_begin",
    "build_run",
    "cached",
    "tracing_count",
]

#: Status codes of the trajectories of a solve.
STATUS = {0: "running", 1: "finished", 2: "non-finite", 3: "step size too small", 4: "max_steps reached"}
RUNNING, DONE, NONFINITE, TOO_SMALL, MAX_STEPS = range(5)

# system -> {options key: compiled function}; weak so that models can be freed.
_CACHE: weakref.WeakKeyDictionary[Any, dict] = weakref.WeakKeyDictionary()


class LoopState(NamedTuple):
    """The state of the step loop, per trajectory unless said otherwise (tensors).

    Attributes
    ----------
    iteration : int32 scalar
        Loop iterations so far (attempts of the batch).
    t, h : shape ``(B,)``
        Each trajectory's time and next step size.
    y, f : shape ``(B, 2n)``
        Its state and the derivative there.
    err_prev : shape ``(B,)``
        The error norm of its last accepted step (floored).
    rejected : bool, shape ``(B,)``
        Its last attempt was rejected.
    status : int32, shape ``(B,)``
        Codes of :data:`STATUS`.
    failed_at : shape ``(B,)``
        Failure times (NaN while it runs or once it finished).
    k_next : int32, shape ``(B,)``
        The next sample to fill.
    out : shape ``(B, T, 2n)``
        The states at the samples (NaN until filled).
    n_accepted, n_rejected : int32, shape ``(B,)``
    nfev : int32 scalar
        Batched right-hand-side evaluations.
    """

    iteration: Any
    t: Any
    h: Any
    y: Any
    f: Any
    err_prev: Any
    rejected: Any
    status: Any
    failed_at: Any
    k_next: Any
    out: Any
    n_accepted: Any
    n_rejected: Any
    nfev: Any

    @staticmethod
    def signature(m: int, dtype) -> list:
        """The ``input_signature`` entries of a loop state with ``m = 2n`` state components."""
        vector, ints = tf.TensorSpec([None], dtype), tf.TensorSpec([None], tf.int32)
        scalar_i, states = tf.TensorSpec([], tf.int32), tf.TensorSpec([None, m], dtype)
        return list(
            LoopState(
                iteration=scalar_i,
                t=vector,
                h=vector,
                y=states,
                f=states,
                err_prev=vector,
                rejected=tf.TensorSpec([None], tf.bool),
                status=ints,
                failed_at=vector,
                k_next=ints,
                out=tf.TensorSpec([None, None, m], dtype),
                n_accepted=ints,
                n_rejected=ints,
                nfev=scalar_i,
            )
        )

    @classmethod
    def start(cls, y0, t, h_init, f0, status0, failed_at0, *, dtype) -> LoopState:
        """The state before the first step (from :func:`initial_step`)."""
        B, T, m = tf.shape(y0)[0], tf.shape(t)[0], tf.shape(y0)[1]
        nan = tf.constant(math.nan, dtype)
        out0 = tf.concat([y0[:, tf.newaxis, :], tf.fill(tf.stack([B, T - 1, m]), nan)], axis=1)  # (B, T, 2n)
        zeros_i = tf.zeros([B], tf.int32)
        return cls(
            iteration=tf.constant(0),
            t=tf.fill([B], t[0]),
            h=h_init,
            y=y0,
            f=f0,
            err_prev=tf.ones([B], dtype),
            rejected=tf.zeros([B], tf.bool),
            status=status0,
            failed_at=failed_at0,
            k_next=tf.ones([B], tf.int32),
            out=out0,
            n_accepted=zeros_i,
            n_rejected=zeros_i,
            nfev=tf.constant(2, tf.int32),
        )


# ----------------------------------------------------------------------------- caches


def cached(system, key, build):
    """``build()``'s result, cached per system (weakly) and ``key``; uncached for an unhashable system."""
    try:
        per_system = _CACHE.setdefault(system, {})
    except TypeError:
        return build()
    if key not in per_system:
        per_system[key] = build()
    return per_system[key]


def tracing_count(system) -> int:
    """Traces of every compiled solve of ``system`` so far (one per options key when healthy)."""
    return int(
        sum(
            fn.experimental_get_tracing_count()
            for fn in _CACHE.get(system, {}).values()
            if hasattr(fn, "experimental_get_tracing_count")
        )
    )


def acceleration_function(system, name: str, *, n: int, dtype, has_tau: bool):
    """``(q, qd[, tau]) -> qdd (B, n)``: ``system.acceleration`` traced once per system and signature.

    Every form of a solve (its start, the XLA and the plain-graph step loops,
    the samples) calls this one concrete function, so the system's graph is
    traced once rather than once per form (XLA inlines the call). It is
    traced as the package's XLA functions trace (:func:`lnn._runtime.xla_body`:
    a mass matrix that is not positive definite gives NaN, never an
    exception, in every form). A system that computes in another dtype
    (a float32 model in a float64 solve) gets its inputs cast to its dtype
    and its result cast back. Cached per system.

    Raises
    ------
    TypeError
        If ``system.acceleration`` does not accept TensorFlow tensors (a
        numpy-only ground-truth system): the message names ``name`` and DOP853.
    """
    from lnn.system import compute_dtype

    own = tf.as_dtype(compute_dtype(system, like=np.zeros(0, dtype.as_numpy_dtype)))

    def build():
        spec = tf.TensorSpec([None, n], dtype)

        def acceleration(q, qd, *tau):
            args = [tf.cast(x, own) for x in (q, qd, *tau)]
            return tf.cast(system.acceleration(*args), dtype)

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

    return cached(system, ("acceleration", n, dtype, has_tau), build)


# ----------------------------------------------------------------------------- the kernels


def _rms(x):
    return tf.sqrt(tf.reduce_mean(tf.square(x), axis=1))


class Kernels:
    """The right-hand side and the stage loop of one trace of a solve."""

    def __init__(self, system, *, n, dtype, has_tau, hold, t, tau_s, A, C, B):
        self.n, self.dtype, self.has_tau, self.hold = n, dtype, has_tau, hold
        self.acceleration = acceleration_function(system, "", n=n, dtype=dtype, has_tau=has_tau)
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


def initial_step(kern: Kernels, y0, t0, t_end, rtol, atol, max_step, *, k_exp, dtype, B):
    """Hairer's initial step (scipy's ``select_initial_step``), per trajectory.

    Returns ``(h (B,), f0 (B, 2n), status (B,), failed_at (B,))``: a
    trajectory whose initial derivative is not finite fails at ``t0``.
    """
    span = t_end - t0
    f0 = kern.rhs(tf.fill([B], t0), y0)
    scale0 = atol[:, None] + tf.abs(y0) * rtol[:, None]
    d0, d1 = _rms(y0 / scale0), _rms(f0 / scale0)
    h0 = tf.where((d0 < 1e-5) | (d1 < 1e-5), tf.constant(1e-6, dtype), 0.01 * d0 / d1)
    h0 = tf.minimum(h0, span)
    f1 = kern.rhs(t0 + h0, y0 + h0[:, None] * f0)
    d2 = _rms((f1 - f0) / scale0) / h0
    h1 = tf.where(
        (d1 <= 1e-15) & (d2 <= 1e-15),
        tf.maximum(tf.constant(1e-6, dtype), h0 * 1e-3),
        (0.01 / tf.maximum(d1, d2)) ** k_exp,
    )
    h_init = tf.minimum(tf.minimum(100 * h0, h1), tf.minimum(span, max_step))
    ok0 = kern.finite_rows(y0, f0)
    h_init = tf.stop_gradient(tf.where(ok0 & tf.math.is_finite(h_init), h_init, span))
    nan = tf.constant(math.nan, dtype)
    return h_init, f0, tf.where(ok0, RUNNING, NONFINITE), tf.where(ok0, nan, t0)


def dense_values(tab, kern: Kernels, y, y_new, K, h, tcur, *, S, size, dtype):
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
    K = kern.stages(K, y, h, tcur, S, size)  # DOP853's three extra stages
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


def fill(out, k_next, value, accept, tcur, t_new, h, *, t, rows):
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


def at_samples(system, Y, y0, tau_s, *, n, dtype, has_tau, has_energy):
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
    acceleration = acceleration_function(system, "", n=n, dtype=dtype, has_tau=has_tau)
    qdd = acceleration(q, qd, tf.reshape(tau_s, [-1, n])) if has_tau else acceleration(q, qd)
    nan = tf.constant(math.nan, dtype)
    qdd = tf.where(good[:, None], qdd, nan)
    if has_energy:
        from lnn.system import compute_dtype

        own = compute_dtype(system, like=np.zeros(0, dtype.as_numpy_dtype))
        energy = system.energy(tf.cast(q, own), tf.cast(qd, own))
        energy = tf.where(good, tf.cast(tf.reshape(energy, [-1]), dtype), nan)
    else:
        energy = tf.fill(tf.shape(good), nan)
    return tf.reshape(qdd, tf.stack([shape[0], shape[1], n])), tf.reshape(energy, shape[:2])


# ----------------------------------------------------------------------------- one step


class Stepper:
    """One attempt of every running trajectory: ``step(state) -> state`` (a :class:`LoopState`).

    Built inside the trace of :func:`build_run`'s ``run`` (its constants are
    tensors of that graph).
    """

    def __init__(self, tab, kern: Kernels, *, t, rtol, atol, max_step, controller, dtype):
        a_np, c_np, b_np, S = tab.stage_matrix()
        self.tab, self.kern, self.S, self.size = tab, kern, S, a_np.shape[0]
        self.n_extra = self.size - S
        self.k_exp = 1.0 / (tab.error_order + 1)
        self.eps = float(np.finfo(dtype.as_numpy_dtype).eps)
        self.b_w, self.E = tf.constant(b_np, dtype), tf.constant(tab.error[:S], dtype)  # E: (S, 1 or 2)
        self.t, self.T, self.t_end = t, tf.shape(t)[0], t[-1]
        self.rtol, self.atol, self.max_step = rtol, atol, max_step
        self.controller, self.dtype = controller, dtype
        self.rows = tf.range(kern.B)
        self.c_floor = tf.constant(1e-4, dtype)

    def error_norm(self, K, h_step, y, y_new):
        """The error norm of every trajectory's attempt, ``(B,)`` (inf where not finite)."""
        combine, S, m = self.kern.combine, self.S, 2 * self.kern.n
        scale = self.atol[:, None] + self.rtol[:, None] * tf.maximum(tf.abs(y), tf.abs(y_new))
        if self.tab.error.shape[1] == 1:
            norm = _rms(h_step[:, None] * combine(self.E[:, 0], K[:S]) / scale)
        else:  # DOP853's combination of its 5th- and 3rd-order estimates
            e5 = combine(self.E[:, 0], K[:S]) / scale
            e3 = combine(self.E[:, 1], K[:S]) / scale
            s5, s3 = tf.reduce_sum(e5**2, axis=1), tf.reduce_sum(e3**2, axis=1)
            denom = s5 + 0.01 * s3
            safe = tf.where(denom > 0, denom, tf.ones_like(denom))
            norm = tf.where(denom > 0, tf.abs(h_step) * s5 / tf.sqrt(safe * m), tf.zeros_like(denom))
        return tf.stop_gradient(norm)

    def step(self, s: LoopState) -> LoopState:
        """One attempt; the accepted trajectories advance and fill the samples they passed."""
        kern, S, dtype = self.kern, self.S, self.dtype
        B = kern.B
        running = tf.equal(s.status, RUNNING)
        left = self.t_end - s.t
        last = s.h >= left * (1 - 4 * self.eps)
        h_step = tf.where(running, tf.where(last, left, s.h), tf.zeros_like(s.h))
        K = tf.tensor_scatter_nd_update(tf.zeros(tf.stack([self.size, B, 2 * kern.n]), dtype), [[0]], s.f[None])
        K = kern.stages(K, s.y, h_step, s.t, 1, S)
        y_new = s.y + h_step[:, None] * kern.combine(self.b_w, K[:S])
        f_new = K[S - 1]
        norm = self.error_norm(K, h_step, s.y, y_new)
        finite = kern.finite_rows(y_new, f_new) & tf.math.is_finite(norm)
        norm = tf.where(finite, norm, tf.fill([B], tf.constant(math.inf, dtype)))
        accept = running & (norm <= 1.0)
        factor = self.controller.factor(
            norm, s.err_prev, accept=accept, rejected=s.rejected, finite=finite, k_exp=self.k_exp, dtype=dtype
        )
        h_next = tf.stop_gradient(tf.where(running, tf.minimum(h_step * factor, self.max_step), s.h))
        t_new = tf.where(accept, tf.where(last, self.t_end, s.t + h_step), s.t)
        hmin = 10 * self.eps * tf.maximum(tf.abs(s.t), tf.abs(self.t_end))
        too_small = running & ~accept & (h_next < hmin)
        out, k_next, extra = self.samples(s, K, y_new, h_step, accept, t_new)
        status = tf.where(accept & last, DONE, s.status)
        status = tf.where(too_small, tf.where(finite, TOO_SMALL, NONFINITE), status)
        acc = accept[:, None]
        return LoopState(
            iteration=s.iteration + 1,
            t=t_new,
            h=h_next,
            y=tf.where(acc, y_new, s.y),
            f=tf.where(acc, f_new, s.f),
            err_prev=tf.where(accept, tf.maximum(norm, self.c_floor), s.err_prev),
            rejected=tf.where(running, ~accept, s.rejected),
            status=status,
            failed_at=tf.where(too_small, s.t, s.failed_at),
            k_next=k_next,
            out=out,
            n_accepted=s.n_accepted + tf.cast(accept, tf.int32),
            n_rejected=s.n_rejected + tf.cast(running & ~accept, tf.int32),
            nfev=s.nfev + (S - 1) + extra,
        )

    def samples(self, s: LoopState, K, y_new, h_step, accept, t_new):
        """``(out, k_next, extra evaluations)``: the dense output, only when an accepted step passed a sample."""
        t, T = self.t, self.T
        kk = tf.minimum(s.k_next, T - 1)
        needs = tf.reduce_any(accept & (s.k_next < T) & (tf.gather(t, kk) <= t_new))

        def with_samples():
            value = dense_values(
                self.tab, self.kern, s.y, y_new, K, h_step, s.t, S=self.S, size=self.size, dtype=self.dtype
            )
            return fill(s.out, s.k_next, value, accept, s.t, t_new, h_step, t=t, rows=self.rows)

        out, k_next = tf.cond(needs, with_samples, lambda: (s.out, s.k_next))
        return out, k_next, tf.where(needs, self.n_extra, 0)


# ----------------------------------------------------------------------------- the compiled functions


def _signature(n, dtype, *, has_tau, limit: bool) -> list:
    """``(y0, t, [tau_samples,] rtol, atol, max_step[, max_steps])``."""
    m = 2 * n
    signature = [tf.TensorSpec([None, m], dtype), tf.TensorSpec([None], dtype)]
    if has_tau:
        signature.append(tf.TensorSpec([None, None, n], dtype))
    signature += [tf.TensorSpec([None], dtype), tf.TensorSpec([None], dtype), tf.TensorSpec([], dtype)]
    return signature + ([tf.TensorSpec([], tf.int32)] if limit else [])


def _split_inputs(rest, has_tau):
    """``(tau_s or None, rtol, atol, max_step, rest)`` of the inputs after ``y0, t``."""
    if has_tau:
        return rest[0], rest[1], rest[2], rest[3], rest[4:]
    return None, rest[0], rest[1], rest[2], rest[3:]


def _kernels(system, tab, y0, t, tau_s, *, n, dtype, has_tau, hold) -> Kernels:
    a_np, c_np, _, _ = tab.stage_matrix()
    A, C = tf.constant(a_np, dtype), tf.constant(c_np, dtype)
    return Kernels(system, n=n, dtype=dtype, has_tau=has_tau, hold=hold, t=t, tau_s=tau_s, A=A, C=C, B=tf.shape(y0)[0])


def build_begin(system, tab, *, n, dtype, has_tau, hold):
    """``tf.function`` ``begin(y0, t, [tau_samples,] rtol, atol, max_step) -> LoopState``, not compiled by XLA.

    The start of a resumable solve (:func:`build_run` without ``samples``),
    run as a plain graph (it is two evaluations of the system), so that XLA
    compiles one copy of the system's graph fewer.
    """
    k_exp = 1.0 / (tab.error_order + 1)

    def begin(y0, t, *rest):
        tau_s, rtol, atol, max_step, _ = _split_inputs(rest, has_tau)
        kern = _kernels(system, tab, y0, t, tau_s, n=n, dtype=dtype, has_tau=has_tau, hold=hold)
        start = initial_step(kern, y0, t[0], t[-1], rtol, atol, max_step, k_exp=k_exp, dtype=dtype, B=kern.B)
        return tuple(LoopState.start(y0, t, *start, dtype=dtype))

    signature = _signature(n, dtype, has_tau=has_tau, limit=False)
    return tf.function(begin, input_signature=signature, jit_compile=False, autograph=False, reduce_retracing=True)


def build_run(system, tab, *, n, dtype, has_tau, hold, jit, samples=True, controller=DEFAULT_CONTROLLER):
    """``tf.function`` ``run(y0, t, [tau_samples,] rtol, atol, max_step, max_steps[, *state])``.

    With ``samples``: a whole solve, returning ``(Y (B, T, 2n), qdd (B, T, n),
    energy (B, T), failed_at, status, n_accepted, n_rejected, nfev)``.
    Without: a resumable piece of one, taking a :class:`LoopState`
    (flattened after the inputs) and returning the state after at most
    ``max_steps`` loop iterations in all (the caller finishes: see
    :mod:`lnn.solvers._scheduler`); the accelerations and energies at the
    samples are left to the caller, which keeps two copies of the system's
    graph out of XLA's compilation. The stages of a step are one inner
    ``tf.while_loop`` over the rows of the tableau (one copy of the system's
    graph per loop, which keeps XLA's compilation short), stored in a
    ``(S, B, 2n)`` tensor.
    """
    has_energy = callable(getattr(system, "energy", None))
    k_exp = 1.0 / (tab.error_order + 1)
    fields = len(LoopState._fields)

    def run(y0, t, *rest):
        tau_s, rtol, atol, max_step, rest = _split_inputs(rest, has_tau)
        max_steps = rest[0]
        kern = _kernels(system, tab, y0, t, tau_s, n=n, dtype=dtype, has_tau=has_tau, hold=hold)
        if samples:
            start = initial_step(kern, y0, t[0], t[-1], rtol, atol, max_step, k_exp=k_exp, dtype=dtype, B=kern.B)
            state = LoopState.start(y0, t, *start, dtype=dtype)
        else:  # resumable: the loop state in and out (build_begin's function starts it)
            state = LoopState(*rest[1 : 1 + fields])
        stepper = Stepper(tab, kern, t=t, rtol=rtol, atol=atol, max_step=max_step, controller=controller, dtype=dtype)

        def cond(*flat):
            s = LoopState(*flat)
            return (s.iteration < max_steps) & tf.reduce_any(tf.equal(s.status, RUNNING))

        final = LoopState(*tf.while_loop(cond, lambda *s: tuple(stepper.step(LoopState(*s))), tuple(state)))
        if not samples:
            return tuple(final)
        over = tf.equal(final.status, RUNNING)
        status = tf.where(over, MAX_STEPS, final.status)
        failed_at = tf.where(over, final.t, final.failed_at)
        qdd, energy = at_samples(system, final.out, y0, tau_s, n=n, dtype=dtype, has_tau=has_tau, has_energy=has_energy)
        return final.out, qdd, energy, failed_at, status, final.n_accepted, final.n_rejected, final.nfev

    signature = _signature(n, dtype, has_tau=has_tau, limit=True)
    if not samples:
        signature += LoopState.signature(2 * n, dtype)
    return tf.function(
        _runtime.xla_body(run), input_signature=signature, jit_compile=jit, autograph=False, reduce_retracing=True
    )
