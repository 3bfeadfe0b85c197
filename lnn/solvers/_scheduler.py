"""XLA scheduling of compiled rollouts: background compilation, compaction of the batch's tail, measured costs.

:class:`RolloutScheduler` runs a resumable solve of the engine
(:mod:`lnn.solvers._engine`: :func:`~lnn.solvers._engine.build_begin` and the
resumable :func:`~lnn.solvers._engine.build_run`) in pieces, as a plain graph
or in XLA, and moves the running trajectories between batches; the
arithmetic of every trajectory is the engine's in every form.
"""

from __future__ import annotations

import os
import threading
import time

import numpy as np
import tensorflow as tf

from lnn import _runtime
from lnn.models import compiled
from lnn.solvers._engine import MAX_STEPS, RUNNING, LoopState

__all__ = [
    "COMPACT_MIN_BATCH",
    "GRAPH_CHUNK",
    "XLA_CALL_SECONDS",
    "RolloutScheduler",
    "bucket",
    "gather_rows",
    "scatter_rows",
    "usable_cores",
]

#: Loop iterations per plain-graph call of a rollout while its XLA form compiles.
GRAPH_CHUNK = 32
#: Batches of at least this many trajectories run their XLA solve in calls of about
#: :data:`XLA_CALL_SECONDS` (at least 8 loop iterations; 16 before one is timed), so that the last
#: running trajectories can leave it for a smaller plain graph; smaller batches run in one call.
COMPACT_MIN_BATCH = 64
XLA_CALL_SECONDS = 0.2


def usable_cores() -> int:
    """CPU cores this process may run on (its affinity mask where the OS has one)."""
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # not on Linux
        return os.cpu_count() or 1


class RolloutScheduler:
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
        state = LoopState(*self._begin(*inputs))
        if shape not in self._scheduled:
            self._scheduled.add(shape)
            if usable_cores() >= 2:
                compiled.submit(self, shape, (inputs, state))
            else:  # one core: the background compilation would only slow the graph down
                self._compile(shape, (inputs, state))
        full_inputs, full_state, rows = inputs, state, None  # rows: the gathered subset, or None
        done = int(state.iteration.numpy())
        status = state.status.numpy()
        while done < limit and bool(np.any(status == RUNNING)):
            running = np.flatnonzero(status == RUNNING)
            if self._compact(shape, batch, samples, rows, running.size, status.size):
                full_state = state if rows is None else scatter_rows(full_state, rows, state)
                rows = running if rows is None else rows[running]
                self.compactions.append((status.size, rows.size))
                inputs, state = gather_rows(full_inputs, full_state, rows)
            xla = rows is None and shape in self.ready
            started = time.perf_counter()
            traced = False
            if xla:
                end = limit if batch < COMPACT_MIN_BATCH else min(done + self._xla_chunk(batch, samples), limit)
                state = LoopState(
                    *self._xla(*inputs, _runtime.eager_tensor(np.asarray(end, np.int32), tf.int32), *state)
                )
            else:
                if self._graph is None:
                    traced = True
                    self._graph = _runtime.fast_caller(self._graph_function.get_concrete_function())
                end = min(done + GRAPH_CHUNK, limit)
                state = LoopState(
                    *self._graph(*inputs, _runtime.eager_tensor(np.asarray(end, np.int32), tf.int32), *state)
                )
            status = state.status.numpy()
            now = int(state.iteration.numpy())
            if now > done and not traced:
                key = ("xla", batch, samples) if xla else ("graph", bucket(status.size), samples)
                per_iteration = (time.perf_counter() - started) / (now - done)
                self._cost[key] = per_iteration if key not in self._cost else 0.5 * (self._cost[key] + per_iteration)
            self.iterations["xla" if xla else "graph"] += now - done
            done = now
            if rows is not None and shape in self.ready and not self._pays(batch, samples, status.size):
                # This plain graph is slower than XLA's whole batch: hand the rows back.
                full_state, rows = scatter_rows(full_state, rows, state), None
                inputs, state = full_inputs, full_state
                status = state.status.numpy()
        if rows is not None:
            state = scatter_rows(full_state, rows, state)
        final = LoopState(*(x.numpy() for x in state))
        over = final.status == RUNNING
        status = np.where(over, MAX_STEPS, final.status)
        failed_at = np.where(over, final.t, final.failed_at)
        return final.out, failed_at, status, final.n_accepted, final.n_rejected, final.nfev

    def _xla_chunk(self, batch: int, samples: int) -> int:
        """Loop iterations of one XLA call of a large batch: about :data:`XLA_CALL_SECONDS`."""
        cost = self._cost.get(("xla", batch, samples))
        return 16 if cost is None else max(8, int(XLA_CALL_SECONDS / max(cost, 1e-9)))

    def _pays(self, batch: int, samples: int, rows: int) -> bool:
        """Whether a plain graph of ``rows`` is (or may be: unmeasured) faster than XLA's ``batch``."""
        graph = self._cost.get(("graph", bucket(rows), samples))
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
        args, state = inputs
        failure = None
        try:
            if self._xla is None:
                self._xla = _runtime.fast_caller(self._xla_function.get_concrete_function())
            self._xla_function(*args, tf.constant(1, tf.int32), *state)
        except Exception as exc:  # a failed compilation leaves that shape in graph mode, and says why
            failure = exc
        rows, thread = int(shape[0][0]), threading.current_thread().name
        if failure is None:
            self.compilations.append(compiled.Compilation(rows, thread, True))
            self.ready.add(shape)
            return
        reason = compiled.report_failure(f"XLA compilation of the solver loop at {rows} rows", failure)
        self.compilations.append(compiled.Compilation(rows, thread, False, reason))


def bucket(rows: int) -> int:
    """The power of two at or above ``rows``: the batch sizes whose costs are kept apart."""
    return 1 << max(int(rows) - 1, 0).bit_length()


def gather_rows(inputs, state, rows):
    """The solve's inputs and loop state restricted to the trajectories ``rows``."""
    index = tf.constant(rows, tf.int32)
    # y0, [tau,] rtol, atol are per trajectory; t and max_step are shared.
    per_row = {0, 2, 3} if len(inputs) == 5 else {0, 2, 3, 4}
    inputs = [tf.gather(x, index) if k in per_row else x for k, x in enumerate(inputs)]
    # Every entry of the loop state with a batch axis (all but the iteration and nfev counters).
    state = LoopState(*(tf.gather(x, index) if x.shape.rank else x for x in state))
    return inputs, state


def scatter_rows(full, rows, part):
    """``full`` loop state with the trajectories ``rows`` replaced by ``part`` (a gathered subset's)."""
    index = tf.constant(rows[:, None], tf.int32)
    return LoopState(*(tf.tensor_scatter_nd_update(x, index, y) if x.shape.rank else y for x, y in zip(full, part)))
