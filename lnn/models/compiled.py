"""Compiled calls of a model without compile stalls: graph mode at once, XLA off the caller's path.

XLA compiles a function anew for every input shape (0.3-1.5 s for the
built-in models on a small CPU; 2-5 s for a rollout Jacobian), so an eager
caller whose batch size changes would wait for a compilation at every new
size. A :class:`CompiledOp` therefore holds two forms of one operation on
packed ``(B, k n)`` inputs, both ``tf.function`` s with a fixed
``input_signature`` (batch dimension ``None``, traced once):

- the *graph* form, which runs any batch size at once (no per-shape
  compilation);
- the *XLA* form (when the operation measured faster under XLA), run only on
  batch sizes padded to :func:`lnn.mechanics.batch_bucket` (``1, 2, 3, 4, 6,
  8, 12, ...``), and only for a size that has been compiled.

A padded size recurs after :data:`XLA_AFTER_CALLS` calls; it is then compiled
by one background thread (:func:`wait` waits for it), while the caller keeps
the graph form; from the next call after the compilation the caller gets the
XLA form. So no caller ever waits for XLA: a call at a new batch size costs
what a graph-mode call costs, and a recurring size reaches XLA's speed after
a few calls. Under a gradient tape the padding and the cut are TensorFlow ops
(recorded, so gradients reach the weights and the inputs); inside another
``tf.function`` the model inlines its graph and no :class:`CompiledOp` is
involved.
"""

from __future__ import annotations

import dataclasses
import queue
import threading
import warnings

import numpy as np
import tensorflow as tf

from lnn import _runtime
from lnn.errors import CompilationWarning
from lnn.mechanics import batch_bucket, pad_rows

__all__ = ["XLA_AFTER_CALLS", "CompiledOp", "Compilation", "submit", "wait"]

#: Calls at one padded batch size before its XLA form is compiled in the background.
XLA_AFTER_CALLS = 2


@dataclasses.dataclass(frozen=True)
class Compilation:
    """One XLA compilation of a :class:`CompiledOp` (its ``compilations`` log).

    Attributes
    ----------
    rows : int
        The padded batch size compiled.
    thread : str
        Name of the thread that compiled it (the background worker's, ``"lnn-xla"``).
    ok : bool
        False if the compilation raised (that size then stays in graph mode).
    error : str
        The exception of a failed compilation, ``"TypeName: message"``
        (``""`` when ``ok``); the first of each kind is also warned
        (:class:`lnn.CompilationWarning`).
    """

    rows: int
    thread: str
    ok: bool
    error: str = ""


_REPORTED: set = set()
_REPORTED_LOCK = threading.Lock()


def report_failure(what: str, exc: BaseException) -> str:
    """Say once per ``what`` and exception type why a faster form failed; the reason as text.

    A failed XLA compilation leaves its batch size in graph mode, which gives
    the same results more slowly: it must not stop the caller, but it must
    not pass silently either, so the first failure of each kind is a
    :class:`lnn.CompilationWarning` naming the exception.

    Parameters
    ----------
    what : str
        The form that failed, e.g. ``"XLA compilation of acceleration at 64 rows"``.
    exc : BaseException
        What it raised.

    Returns
    -------
    str
        ``"TypeName: message"`` (kept in :attr:`Compilation.error`).
    """
    reason = f"{type(exc).__name__}: {exc}".strip()
    key = (what.split(" at ")[0], type(exc).__name__)  # once per operation, not per batch size
    with _REPORTED_LOCK:
        first = key not in _REPORTED
        _REPORTED.add(key)
    if first:
        warnings.warn(f"lnn: {what} failed ({reason}); the slower form is used (same results)", CompilationWarning, 2)
    return reason


class CompiledOp:
    """One operation of a model on packed ``(B, k n)`` inputs (see the module docstring).

    Parameters
    ----------
    body : callable
        ``body(x) -> tensor or nest``, ``x`` of shape ``(B, width)``.
    width : int
        Columns of the packed input.
    dtype : tf.DType
    xla : bool
        Whether the operation has an XLA form.
    xla_body : callable, optional
        The body of the XLA form (default ``body``); traced inside
        :func:`lnn._runtime.xla_tracing`.
    name : str, optional
        The operation's name in a warning of a failed compilation.
    """

    def __init__(self, body, *, width: int, dtype, xla: bool, xla_body=None, name: str = "an operation") -> None:
        self.name = name
        spec = [tf.TensorSpec((None, width), dtype)]
        self.dtype = tf.as_dtype(dtype)
        self.graph_function = tf.function(body, input_signature=spec, autograph=False)
        self._graph = _runtime.fast_caller(self.graph_function.get_concrete_function())
        self.xla_function = None
        if xla:
            self.xla_function = tf.function(
                _runtime.xla_body(xla_body or body), input_signature=spec, autograph=False, jit_compile=xla_body is None
            )
        self._xla = None  # the fast caller of the XLA form, built by the worker
        self.calls: dict[int, int] = {}
        self.ready: set[int] = set()
        self._scheduled: set[int] = set()
        #: Every XLA compilation, in order (:class:`Compilation`).
        self.compilations: list[Compilation] = []

    def tracing_count(self) -> int:
        """Traces of the most traced form (1 for a healthy op, 0 before its first call)."""
        counts = [self.graph_function.experimental_get_tracing_count()]
        if self.xla_function is not None:
            counts.append(self.xla_function.experimental_get_tracing_count())
        return int(max(counts))

    def __call__(self, x):
        """Run on ``x`` (a numpy array or an eager tensor of shape ``(B, width)``)."""
        rows = int(x.shape[0])
        if self.xla_function is None or rows == 0:
            return self._graph(self._tensor(x))
        size = batch_bucket(rows)
        if size in self.ready:
            return self._run_xla(x, rows, size)
        seen = self.calls.get(size, 0) + 1
        self.calls[size] = seen
        if seen >= XLA_AFTER_CALLS and size not in self._scheduled:
            self._scheduled.add(size)
            submit(self, size, np.asarray(x[:1]))
        return self._graph(self._tensor(x))

    def _tensor(self, x):
        return _runtime.eager_tensor(x, self.dtype) if isinstance(x, np.ndarray) else x

    def _run_xla(self, x, rows, size):
        """The XLA form on ``x`` padded to ``size`` rows (row 0 repeated: a valid state), cut back."""
        if _runtime.tape_may_record():  # TensorFlow ops, so that a tape sees padding and cut
            t = self._tensor(x)
            if size == rows:
                return self._xla(t)
            t = tf.concat([t, tf.tile(t[:1], [size - rows, 1])], axis=0)
            return tf.nest.map_structure(lambda y: y[:rows], self._xla(t))
        arr = np.asarray(x)
        out = self._xla(self._tensor(pad_rows(arr, size) if size != rows else arr))
        if size == rows:
            return out
        return tf.nest.map_structure(lambda y: _runtime.eager_tensor(y.numpy()[:rows], y.dtype), out)

    def _compile(self, size: int, row: np.ndarray) -> None:
        """Compile (and run once) the XLA form at ``size`` rows: the background worker's job."""
        failure = None
        try:
            if self._xla is None:
                self._xla = _runtime.fast_caller(self.xla_function.get_concrete_function())
            self.xla_function(self._tensor(np.repeat(row, size, axis=0)))
        except Exception as exc:  # a failed compilation leaves that size in graph mode, and says why
            failure = exc
        if failure is None:
            self.compilations.append(Compilation(size, threading.current_thread().name, True))
            self.ready.add(size)
            return
        reason = report_failure(f"XLA compilation of {self.name} at {size} rows", failure)
        self.compilations.append(Compilation(size, threading.current_thread().name, False, reason))


# ----------------------------------------------------------------------------- the worker

_JOBS: queue.Queue = queue.Queue()
_WORKER: list = []
_LOCK = threading.Lock()


def _work() -> None:
    while True:
        try:
            op, key, inputs = _JOBS.get(timeout=1.0)
        except queue.Empty:
            with _LOCK:
                if _JOBS.empty():
                    _WORKER.clear()
                    return
            continue
        try:
            if threading.main_thread().is_alive():  # skip what is left once Python exits
                op._compile(key, inputs)
        finally:
            _JOBS.task_done()


def submit(op, key, inputs) -> None:
    """Queue ``op._compile(key, inputs)`` on the background worker (started on demand).

    ``op`` is a :class:`CompiledOp` (``key`` its padded batch size, ``inputs``
    one row) or any object with that method (the compiled rollouts of
    :mod:`lnn.solvers` queue whole solves, keyed by their input shapes).
    """
    _JOBS.put((op, key, inputs))
    with _LOCK:
        if not _WORKER:
            worker = threading.Thread(target=_work, name="lnn-xla")
            _WORKER.append(worker)
            worker.start()


def wait() -> None:
    """Block until every background XLA compilation asked for so far has finished."""
    _JOBS.join()
