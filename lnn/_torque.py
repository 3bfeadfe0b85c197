"""Generalized forces of both integrators: one rule, evaluated in numpy and in TensorFlow.

``tau`` means the same to :func:`lnn.rollout` (numpy, adaptive steps) and to
:func:`lnn.odeint.odeint` (TensorFlow, fixed steps):

- ``None``: no force (the constant zero);
- samples on the time grid ``t (T,)``: an array ``(T, n)`` shared by the batch,
  or ``(1 or B, T, n)``. Between two samples, ``t_k <= s <= t_{k+1}``, the
  force is ``(1 - w) tau_k + w tau_{k+1}`` (:func:`blend`) with the weight
  :func:`weight`: linear, ``w = (s - t_k) / (t_{k+1} - t_k)``, or zero-order
  hold, ``w = [s >= t_{k+1}]`` (the last sample at or before ``s``). Outside
  ``[t_0, t_{T-1}]`` the first or last interval is used (held: the first or
  last sample);
- a callable ``tau(t, q, qd)`` (a controller) of a scalar time and states
  ``(B, n)``.

Shared by the two sides: the check of the samples' shape
(:func:`samples_fit` and :func:`samples_message`, on static shapes whose
unknown dimensions are ``None``), the conversion of array-likes (:func:`as_samples_array`, float64,
so that a list of floats keeps its precision in a float64 system), the
interpolation weight and the blend.

numpy side: :class:`NumpyTorque`. TensorFlow side: :func:`tensor_samples`,
:func:`interval_force`, :func:`tensor_at_samples`; TensorFlow is imported by
these functions only, so that :mod:`lnn.integrate` stays numpy + scipy.

What is not shared, and why:

- *Finding the interval.* scipy's adaptive solvers call the force at any
  time, so :class:`NumpyTorque` finds ``k`` by a binary search on ``t``; the
  fixed-step scan of :mod:`lnn.odeint` walks the intervals in order and hands
  each stage its interval's end points and samples, so the TensorFlow side
  needs no search (and stays one fused expression per stage).
- *Finiteness and the controller's output.* Values of tensors are unknown
  while a ``tf.function`` traces, so the TensorFlow side checks shapes only
  (with run-time assertions for what is unknown) and broadcasts a
  controller's output to ``(B, n)`` (its documented contract: "broadcastable
  to ``(B, n)``"); the numpy side refuses NaN and inf samples and a controller
  output other than ``(B, n)`` or ``(n,)`` (the documented contract of
  :func:`lnn.rollout`), with messages, at the call.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

__all__ = [
    "INTERPOLATIONS",
    "NumpyTorque",
    "as_samples_array",
    "blend",
    "check_interpolation",
    "interval_force",
    "samples_fit",
    "samples_message",
    "tensor_at_samples",
    "tensor_samples",
    "weight",
]

#: How sampled forces are evaluated between samples.
INTERPOLATIONS = ("linear", "hold")


# ----------------------------------------------------------------------------- the rule


def check_interpolation(value) -> bool:
    """Whether ``value`` (one of :data:`INTERPOLATIONS`) holds; ``ValueError`` for another."""
    if value not in INTERPOLATIONS:
        raise ValueError(f"tau_interpolation must be one of {INTERPOLATIONS}; got {value!r}")
    return value == "hold"


def weight(time, t_a, t_b, *, hold: bool, as_float: Callable = float):
    """The weight ``w`` of the later sample at ``time`` in the interval ``[t_a, t_b]``.

    Parameters
    ----------
    time, t_a, t_b : float or scalar tensor
        The time and the interval's end points (``t_a < t_b``).
    hold : bool
        Zero-order hold (``w = 1`` from ``t_b`` on, else 0) instead of linear.
    as_float : callable
        Turns the boolean ``time >= t_b`` into a number (``float`` for numpy,
        a cast to the dtype for tensors).
    """
    if hold:
        return as_float(time >= t_b)
    return (time - t_a) / (t_b - t_a)


def blend(tau_a, tau_b, w):
    """``(1 - w) tau_a + w tau_b``: the force between two samples, ``(..., n)``."""
    return (1 - w) * tau_a + w * tau_b


def samples_fit(shape, *, T, B, n: int) -> bool:
    """Whether samples of static ``shape`` (rank 3) fit ``(1 or B, T, n)``.

    Parameters
    ----------
    shape : tuple or None
        The samples' shape, after a ``(T, n)`` array gained a leading axis;
        unknown dimensions are None, and None is an unknown rank.
    T, B : int or None
        The number of samples and the batch size; None when unknown (inside a
        graph), which any dimension fits.
    n : int
    """
    return (
        shape is not None
        and len(shape) == 3
        and shape[2] in (n, None)
        and (None in (shape[1], T) or shape[1] == T)
        and (None in (shape[0], B) or shape[0] in (1, B))
    )


def samples_message(received, *, T, B, n: int) -> str:
    """The message for samples that do not fit: what ``tau`` may be, and the shape ``received``."""
    T_ = "T" if T is None else T
    batch = "1, " if B == 1 else f"1 or {'B' if B is None else B}, "
    axes = "(1, T, n)" if B == 1 else "(1 or B, T, n)"
    return (
        f"tau must have shape (T, n) = ({T_}, {n}) or {axes} = ({batch}{T_}, {n}) "
        f"(samples on t), or be None or a callable tau(t, q, qd); got shape {received}"
    )


def as_samples_array(tau) -> np.ndarray:
    """An array-like ``tau`` as a float64 array (any shape); ``TypeError`` if it is not numeric."""
    try:
        array = np.asarray(tau, dtype=np.float64)
    except (TypeError, ValueError) as exc:
        raise TypeError(
            f"tau must be None, an array (T, n) or (B, T, n), or a callable tau(t, q, qd); got {type(tau).__name__}"
        ) from exc
    return array


# ----------------------------------------------------------------------------- numpy


@dataclass(frozen=True, eq=False)
class NumpyTorque:
    """The generalized force of :func:`lnn.rollout` at any time, ``(B, n)`` float64.

    Build it with :meth:`build`. Attributes: ``t (T,)``; ``B``, ``n``;
    ``hold``; ``samples (B, T, n)`` (a broadcast view for shared samples) or
    None; ``controller`` or None. Neither: unforced (``is_none``).
    """

    t: np.ndarray
    B: int
    n: int
    hold: bool = False
    samples: np.ndarray | None = None
    controller: Callable | None = None

    @classmethod
    def build(cls, tau, t: np.ndarray, *, batch: int, n: int, interpolation: str = "linear") -> NumpyTorque:
        """Check ``tau``: None, samples ``(T, n)`` / ``(1 or B, T, n)`` on ``t``, or a callable.

        Raises
        ------
        ValueError
            For an unknown ``interpolation``, samples of another shape, or NaN or inf samples.
        TypeError
            For a ``tau`` that is neither None, numeric nor callable.
        """
        hold = check_interpolation(interpolation)
        if tau is None or callable(tau):
            return cls(t=t, B=batch, n=n, hold=hold, controller=tau)
        samples = as_samples_array(tau)
        expanded = samples[None] if samples.ndim == 2 else samples
        if not samples_fit(expanded.shape, T=t.shape[0], B=batch, n=n):
            raise ValueError(samples_message(samples.shape, T=t.shape[0], B=batch, n=n))
        if not np.isfinite(samples).all():
            raise ValueError("tau has non-finite values (NaN or inf)")
        return cls(t=t, B=batch, n=n, hold=hold, samples=np.broadcast_to(expanded, (batch,) + expanded.shape[1:]))

    def subset(self, rows: np.ndarray) -> NumpyTorque:
        """The force of the trajectories ``rows`` only (a rollout that dropped failed ones).

        A controller then receives the states of those rows, ``(len(rows), n)``.
        """
        samples = None if self.samples is None else self.samples[rows]
        return NumpyTorque(
            t=self.t, B=int(len(rows)), n=self.n, hold=self.hold, samples=samples, controller=self.controller
        )

    @property
    def is_none(self) -> bool:
        """Whether the system is unforced."""
        return self.samples is None and self.controller is None

    def __call__(self, time: float, q: np.ndarray, qd: np.ndarray):
        """The force at ``time`` and states ``q, qd (B, n)``: ``(B, n)``, or None when unforced."""
        if self.controller is not None:
            return self._controlled(time, q, qd)
        if self.samples is None:
            return None
        t = self.t
        if t.shape[0] == 1:
            return self.samples[:, 0]
        k = int(np.searchsorted(t, time, side="right")) - 1
        k = min(max(k, 0), t.shape[0] - 2)
        w = weight(time, t[k], t[k + 1], hold=self.hold)
        return blend(self.samples[:, k], self.samples[:, k + 1], w)

    def _controlled(self, time: float, q: np.ndarray, qd: np.ndarray) -> np.ndarray:
        value = np.asarray(self.controller(time, q, qd), dtype=np.float64)
        if value.shape == (self.B, self.n):
            return value
        if value.shape == (self.n,):
            return np.broadcast_to(value, (self.B, self.n))
        raise ValueError(
            f"the controller tau(t, q, qd) must return shape (B, n) = ({self.B}, {self.n}) "
            f"or ({self.n},); got shape {value.shape} at t = {time:.6g}"
        )

    def at_samples(self, q: np.ndarray, qd: np.ndarray) -> np.ndarray:
        """The forces at the samples ``(B, T, n)``, given ``q, qd (B, T, n)``; zeros if unforced.

        A controller is asked only about the finite samples (a failed trajectory's samples after
        its failure are NaN): its forces there are NaN too.
        """
        if self.controller is not None:
            out = np.full(q.shape, np.nan)
            for k, tk in enumerate(self.t):
                ok = np.isfinite(q[:, k]).all(axis=-1) & np.isfinite(qd[:, k]).all(axis=-1)
                if ok.all():
                    out[:, k] = self(float(tk), q[:, k], qd[:, k])
                elif ok.any():  # the controller sees the surviving trajectories only
                    value = np.asarray(self.controller(float(tk), q[ok, k], qd[ok, k]), np.float64)
                    out[ok, k] = np.broadcast_to(value, (int(ok.sum()), self.n))
            return out
        if self.samples is None:
            return np.zeros_like(q)
        return np.array(self.samples)


# ----------------------------------------------------------------------------- TensorFlow


def _static_shape(x) -> tuple | None:
    """A tensor's static shape (None for unknown dimensions), or None for an unknown rank."""
    return tuple(x.shape) if x.shape.rank is not None else None


def _received_shape(tau) -> tuple:
    """The shape of ``tau`` as given, for messages (None for unknown dimensions of a tensor)."""
    shape = getattr(tau, "shape", None)
    if shape is None:
        return tuple(np.shape(tau))
    if getattr(shape, "rank", 0) is None:
        return ("unknown rank",)
    return tuple(shape)


def tensor_samples(tau, *, n: int, n_t, batch, dtype, t, q0):
    """Sampled forces as a ``(1 or B, T, n)`` tensor of ``dtype`` (zeros ``(1, T, n)`` for None).

    Parameters
    ----------
    tau : None, array_like or tensor, shape ``(T, n)`` or ``(1 or B, T, n)``
        Not a callable (a controller has no samples).
    n : int
    n_t, batch : int or None
        ``T`` and ``B`` when known while tracing, else None.
    dtype : tf.DType
    t : tf.Tensor, shape ``(T,)``
    q0 : tf.Tensor, shape ``(B, n)``
        For the run-time checks of what is unknown while tracing.

    Returns
    -------
    samples : tf.Tensor, shape ``(1 or B, T, n)``
    checks : list
        Run-time assertions (``tf.errors.InvalidArgumentError`` with the same
        message) of the dimensions unknown while tracing.
    """
    import tensorflow as tf

    if tau is None:
        return tf.zeros((1, n_t if n_t is not None else tf.shape(t)[0], n), dtype=dtype), []
    if isinstance(tau, (tf.Tensor, tf.Variable)):
        x = tf.cast(tau, dtype)
    else:
        x = tf.constant(as_samples_array(tau), dtype=dtype)
    if x.shape.rank == 2:
        x = x[tf.newaxis]
    shape = _static_shape(x)
    message = samples_message(_received_shape(tau), T=n_t, B=batch, n=n)
    if not samples_fit(shape, T=n_t, B=batch, n=n):
        raise ValueError(message)
    checks = []
    if shape[2] is None:
        x = tf.ensure_shape(x, (None, None, n))
    if shape[1] is None or n_t is None:
        checks.append(tf.debugging.assert_equal(tf.shape(x)[1], tf.shape(t)[0], message=message))
    if shape[0] != 1 and (shape[0] is None or batch is None):
        rows = tf.shape(x)[0]
        checks.append(
            tf.debugging.Assert(tf.logical_or(tf.equal(rows, 1), tf.equal(rows, tf.shape(q0)[0])), [message, rows])
        )
    return x, checks


def _controller_force(controller: Callable, dtype) -> Callable:
    """``force(s, q, qd)``: the controller's output cast to ``dtype`` and broadcast to ``q``."""
    import tensorflow as tf

    def force(s, q, qd):
        return tf.broadcast_to(tf.cast(controller(s, q, qd), dtype), tf.shape(q))

    return force


def interval_force(controller, tau_a, tau_b, t_a, t_b, *, dtype, hold: bool = False) -> Callable:
    """``force(s, q, qd) -> (B, n)`` for the stages of one interval ``[t_a, t_b]`` of the grid.

    Parameters
    ----------
    controller : callable or None
        ``tau(t, q, qd)``; when given, the samples are ignored.
    tau_a, tau_b : tf.Tensor, shape ``(1 or B, n)``
        The samples at the interval's ends.
    t_a, t_b : scalar tf.Tensor
    dtype : tf.DType
    hold : bool
        Zero-order hold instead of linear interpolation (:func:`weight`).
    """
    import tensorflow as tf

    if controller is not None:
        return _controller_force(controller, dtype)

    def as_float(flag):
        return tf.cast(flag, dtype)

    def force(s, q, qd):
        w = weight(s, t_a, t_b, hold=hold, as_float=as_float)
        return tf.broadcast_to(blend(tau_a, tau_b, w), tf.shape(q))

    return force


def tensor_at_samples(controller, t, q, qd, tau_t, *, dtype):
    """The forces at the samples, time-major ``(T, B, n)``.

    Parameters
    ----------
    controller : callable or None
    t : tf.Tensor, shape ``(T,)``
    q, qd : tf.Tensor, shape ``(T, B, n)``
    tau_t : tf.Tensor, shape ``(T, 1 or B, n)``
        The samples, time-major (ignored with a controller).
    dtype : tf.DType
    """
    import tensorflow as tf

    if controller is None:
        return tf.broadcast_to(tau_t, tf.shape(q))
    force = _controller_force(controller, dtype)
    return tf.map_fn(
        lambda x: force(x[0], x[1], x[2]), (t, q, qd), fn_output_signature=tf.TensorSpec([None, q.shape[-1]], dtype)
    )
