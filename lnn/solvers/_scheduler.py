"""XLA scheduling of compiled rollouts: when to compile, padded batch sizes, compaction of the batch's tail.

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
from lnn.solvers._engine import DONE, MAX_STEPS, RUNNING, LoopState

__all__ = [
    "COMPACT_MIN_BATCH",
    "GRAPH_CHUNK",
    "XLA_AFTER_ITERATIONS",
    "XLA_CALL_SECONDS",
    "XLA_OVERHEAD_ROWS",
    "RolloutScheduler",
    "bucket",
    "compile_after",
    "gather_rows",
    "scatter_rows",
    "usable_cores",
]

#: Loop iterations per plain-graph call of a rollout: the scheduler decides again between two calls.
GRAPH_CHUNK = 32
#: Plain-graph loop iterations at one shape of a batch of a few rows before its XLA form is compiled
#: (:func:`compile_after`).
XLA_AFTER_ITERATIONS = 1024
#: The rows at which XLA's saving per loop iteration is twice its saving at one row (:func:`compile_after`).
XLA_OVERHEAD_ROWS = 64
#: Batches of at least this many trajectories run their XLA solve in calls of about
#: :data:`XLA_CALL_SECONDS` (at least 8 loop iterations; 16 before one is timed), so that the last
#: running trajectories can leave it for a smaller batch; smaller batches run in one call.
COMPACT_MIN_BATCH = 64
XLA_CALL_SECONDS = 0.2


def usable_cores() -> int:
    """CPU cores this process may run on (its affinity mask where the OS has one)."""
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # not on Linux
        return os.cpu_count() or 1


def compile_after(rows: int) -> int:
    """Plain-graph loop iterations at a shape of ``rows`` (padded) rows before XLA compiles it.

    A rule of ski rental: rent (run the plain graph) until the rent paid
    equals the price of buying (XLA's compilation of the solve, 1.5-2.5 s
    for the default 2- and 7-DOF models on one core), then buy; whatever
    the calls to come, that costs about twice what the best choice in
    hindsight costs at most. The plain graph's excess over XLA per loop iteration is
    TensorFlow's per-operation dispatch, about 1.5-3.5 ms at 1-64 rows for
    those models, plus arithmetic that XLA fuses, which grows with the rows
    (10-12 ms at 256): hence :data:`XLA_AFTER_ITERATIONS` iterations at a
    few rows, half as many at :data:`XLA_OVERHEAD_ROWS` rows. Both the
    compilation and the dispatch grow with the size of the system's graph,
    so their ratio, and this count, carry over from model to model. The
    decision counts loop iterations, never seconds: it is the same on one
    core and on two, idle or loaded.
    """
    return XLA_AFTER_ITERATIONS * XLA_OVERHEAD_ROWS // (XLA_OVERHEAD_ROWS + int(rows))


class RolloutScheduler:
    """``(y0, t, [tau,] rtol, atol, max_step, max_steps) -> (Y, failed_at, status, n_accepted, n_rejected, nfev)``.

    XLA compiles the solve anew for every shape of its inputs (1-3 s for a
    learned model on one core with XLA's classic CPU emitters, 3-5 s with
    its default ones: :data:`lnn._runtime.XLA_CPU_EMITTERS`); a plain graph
    runs any shape at once and is 2-10x slower per loop iteration at a few
    rows, about as fast at hundreds. So:

    - **Few shapes**: XLA runs a batch padded to :func:`bucket` rows (the
      power of two at or above it; the padding repeats the last trajectory,
      marked finished so that it never keeps the loop running, and is cut
      off), so batch sizes 1 to 100 compile at most 8 shapes per number of
      samples ``T``.
    - **Compile what the work repays**: the solve runs in chunks of
      :data:`GRAPH_CHUNK` loop iterations as a plain graph, and a shape's XLA
      form is compiled once the plain graph's loop iterations at that shape,
      over every call so far and the rest of this call (predicted from how
      far its slowest trajectory got), reach :func:`compile_after`. The
      decision counts loop iterations, not seconds, so it does not depend on
      the cores or the load. With a spare core (:func:`usable_cores`) the
      compilation runs on the background worker
      (:func:`lnn.models.compiled.wait` waits for it) while the plain graph
      goes on; on one core it runs at once on the caller's thread. From the
      first chunk after it, the rest of the solve runs in XLA. A short
      rollout at a new batch size therefore costs what the same call costs
      again.
    - **The tail of a batch**: every trajectory takes its own steps, so the
      batch runs until its slowest trajectory ends, and the finished ones
      ride along at full cost (a 7-DOF learned chain, ``B = 256``: 960 step
      attempts on average, 1250-1320 for the slowest). Whenever at most half
      of the trajectories being solved still run, they are gathered into a
      smaller batch, their results scattered back at the end. Out of a
      plain graph, or into a smaller shape that XLA has compiled, this
      always pays; out of XLA into a plain graph, it pays when the plain
      graph of the smaller batch is faster per loop iteration than XLA's of
      the larger one. That is measured (the per-iteration times of both
      forms, kept per shape; an unmeasured size is tried for a chunk, and a
      plain graph slower than XLA hands its rows back), and it decides only
      which form runs the tail, never what is compiled. XLA batches of
      :data:`COMPACT_MIN_BATCH` or more run in calls of about
      :data:`XLA_CALL_SECONDS` to be able to do so.

    Every form gives every trajectory the same arithmetic (the step sizes
    come from the same error estimates): results agree to rounding. Calls
    skip TensorFlow's Python dispatch (:func:`lnn._runtime.fast_caller`).
    """

    def __init__(self, begin, graph, xla) -> None:
        self._begin = _runtime.fast_caller(begin.get_concrete_function())
        self._graph_function, self._graph = graph, None  # traced when first needed
        self._xla_function = xla
        self._xla = None
        #: The shapes ``(padded rows, T)`` whose XLA form is compiled.
        self.ready: set[tuple[int, int]] = set()
        self._scheduled: set[tuple[int, int]] = set()
        #: Every XLA compilation, in order (:class:`lnn.models.compiled.Compilation`; ``rows`` is the padded ``B``).
        self.compilations: list = []
        #: Loop iterations run as a plain graph and in XLA so far (for tests and benchmarks).
        self.iterations = {"graph": 0, "xla": 0}
        #: Compactions of running trajectories into a smaller batch: ``(from, to)`` rows.
        self.compactions: list[tuple[int, int]] = []
        # (padded rows, T) -> plain-graph loop iterations run at that shape, over all calls.
        self._graph_iterations: dict[tuple[int, int], int] = {}
        # (form, padded rows, T) -> seconds per loop iteration (measured; decides only the tail's form).
        self._cost: dict[tuple, float] = {}

    def __call__(self, *args):
        *full_inputs, max_steps = args
        limit = int(max_steps.numpy())
        batch, samples = int(full_inputs[0].shape[0]), int(full_inputs[1].shape[0])
        times = full_inputs[1].numpy()
        span = (float(times[0]), float(times[-1]))
        full_state = state = LoopState(*self._begin(*full_inputs))
        inputs = full_inputs
        # The batch being solved: ``rows`` of the full batch (None: all of it, in order), of which the
        # first ``real`` are trajectories and the rest repeat the last one as padding for XLA.
        rows, real = None, batch
        handed = None  # (rows, real) of the XLA batch a compaction left, while its plain graph is on trial
        done = int(state.iteration.numpy())
        status = state.status.numpy()
        while done < limit and bool(np.any(status[:real] == RUNNING)):
            running = np.flatnonzero(status[:real] == RUNNING)
            xla = (bucket(real), samples) in self.ready  # the form this batch runs in
            if self._compact(xla, (bucket(real), samples), real, running.size):
                full_state = _restore(full_state, rows, real, state)
                leaves_xla = xla and (bucket(running.size), samples) not in self.ready
                handed = (None if rows is None else rows[:real], real) if leaves_xla else None
                self.compactions.append((real, running.size))
                rows = running if rows is None else rows[running]
                real = rows.size
                inputs, state = gather_rows(full_inputs, full_state, rows)
                status = state.status.numpy()
            shape = (bucket(real), samples)
            if shape not in self._scheduled:
                rest = _predicted_rest(state.t.numpy()[:real][status[:real] == RUNNING], span, done, limit)
                if self._graph_iterations.get(shape, 0) + rest >= compile_after(shape[0]):
                    self._schedule(shape, _padded(full_inputs, full_state, rows, real, state))
            xla = shape in self.ready
            size = int(state.status.shape[0])
            if xla and size != shape[0]:  # pad to the compiled shape
                full_state = _restore(full_state, rows, real, state)
                rows = _pad_index(rows, real, shape[0])
                inputs, state = _gather_padded(full_inputs, full_state, rows, real)
            elif not xla and size != real:  # a plain graph takes any shape: drop the padding
                rows = rows[:real]
                inputs, state = _first_rows(inputs, state, real)
            state = self._chunk(xla, shape, inputs, state, done, limit)
            status = state.status.numpy()
            now = int(state.iteration.numpy())
            if not xla:
                self._graph_iterations[shape] = self._graph_iterations.get(shape, 0) + now - done
            self.iterations["xla" if xla else "graph"] += now - done
            done = now
            if handed is not None and not xla:
                back = (bucket(handed[1]), samples)
                if back in self.ready and not self._pays(back, real):
                    # This plain graph is slower than XLA's larger batch: hand the rows back.
                    full_state = _restore(full_state, rows, real, state)
                    rows, real = handed
                    handed = None
                    inputs, state = (
                        (full_inputs, full_state) if rows is None else gather_rows(full_inputs, full_state, rows)
                    )
                    status = state.status.numpy()
        full_state = _restore(full_state, rows, real, state)
        final = LoopState(*(x.numpy() for x in full_state))
        over = final.status == RUNNING
        status = np.where(over, MAX_STEPS, final.status)
        failed_at = np.where(over, final.t, final.failed_at)
        return final.out, failed_at, status, final.n_accepted, final.n_rejected, final.nfev

    def _chunk(self, xla: bool, shape, inputs, state, done: int, limit: int) -> LoopState:
        """Run the loop from iteration ``done`` for one call of the form ``xla`` (or the plain graph).

        A plain-graph call runs :data:`GRAPH_CHUNK` iterations; an XLA call the
        rest of the solve, or about :data:`XLA_CALL_SECONDS` of a large batch.
        The seconds per iteration are kept per form and shape (the first
        call of the plain graph, which traces it, is not timed).
        """
        started = time.perf_counter()
        traced = False
        if xla:
            end = limit if shape[0] < COMPACT_MIN_BATCH else min(done + self._xla_chunk(shape), limit)
            run = self._xla
        else:
            if self._graph is None:
                traced = True
                self._graph = _runtime.fast_caller(self._graph_function.get_concrete_function())
            end, run = min(done + GRAPH_CHUNK, limit), self._graph
        state = LoopState(*run(*inputs, _runtime.eager_tensor(np.asarray(end, np.int32), tf.int32), *state))
        now = int(state.iteration.numpy())
        if now > done and not traced:
            key = ("xla" if xla else "graph", *shape)
            per_iteration = (time.perf_counter() - started) / (now - done)
            self._cost[key] = per_iteration if key not in self._cost else 0.5 * (self._cost[key] + per_iteration)
        return state

    def _schedule(self, shape, example) -> None:
        """Compile the XLA form of ``shape``: in the background with a spare core, else at once."""
        self._scheduled.add(shape)
        if usable_cores() >= 2:
            compiled.submit(self, shape, example)
        else:  # one core: a background compilation would take the core from the caller anyway
            self._compile(shape, example)

    def _xla_chunk(self, shape) -> int:
        """Loop iterations of one XLA call of a large batch: about :data:`XLA_CALL_SECONDS`."""
        cost = self._cost.get(("xla", *shape))
        return 16 if cost is None else max(8, int(XLA_CALL_SECONDS / max(cost, 1e-9)))

    def _pays(self, shape, rows: int) -> bool:
        """Whether a plain graph of ``rows`` is (or may be: unmeasured) faster than XLA's ``shape``."""
        graph = self._cost.get(("graph", bucket(rows), shape[1]))
        xla = self._cost.get(("xla", *shape))
        return graph is None or xla is None or graph < xla

    def _compact(self, xla: bool, shape, real: int, running: int) -> bool:
        """Whether to gather the ``running`` of the ``real`` trajectories into a smaller batch."""
        if running == 0 or 2 * running > real:
            return False
        if not xla or (bucket(running), shape[1]) in self.ready:  # the same form, fewer rows: always pays
            return True
        return shape[0] >= COMPACT_MIN_BATCH and self._pays(shape, running)

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
        rows, thread = int(shape[0]), threading.current_thread().name
        if failure is None:
            self.compilations.append(compiled.Compilation(rows, thread, True))
            self.ready.add(shape)
            return
        reason = compiled.report_failure(f"XLA compilation of the solver loop at {rows} rows", failure)
        self.compilations.append(compiled.Compilation(rows, thread, False, reason))


def _predicted_rest(t_running, span, done: int, limit: int) -> int:
    """Loop iterations this call still needs: ``done`` scaled by how far its slowest trajectory got.

    0 before the first chunk (nothing to scale) and when nothing runs;
    at most what ``limit`` leaves.
    """
    if t_running.size == 0 or done == 0:
        return 0
    progress = (float(np.min(t_running)) - span[0]) / (span[1] - span[0])
    if progress <= 0.0:
        return limit - done
    return int(min(done * (1.0 - progress) / progress, limit - done))


def _restore(full, rows, real: int, part):
    """``full`` loop state with the solved batch ``part`` (``rows`` of it, padding cut) written back."""
    if rows is None:
        return part
    if int(part.status.shape[0]) != real:
        part = _cut(part, real)
    return scatter_rows(full, rows[:real], part)


def _pad_index(rows, real: int, size: int):
    """``rows`` (None: ``0..real-1``) cut to ``real`` and padded to ``size`` by repeating the last one."""
    index = np.arange(real) if rows is None else np.asarray(rows[:real])
    return np.concatenate([index, np.full(size - real, index[-1])])


def _mark_padding(state, real: int):
    """``state`` with its rows from ``real`` on marked finished (they repeat a trajectory: never wait for them)."""
    size = int(state.status.shape[0])
    status = tf.concat([state.status[:real], tf.fill([size - real], tf.constant(DONE, state.status.dtype))], 0)
    return state._replace(status=status)


def _first_rows(inputs, state, real: int):
    """The solve's inputs and loop state cut to their first ``real`` rows (the padding dropped)."""
    per_row = _per_row(inputs)
    inputs = [x[:real] if k in per_row else x for k, x in enumerate(inputs)]
    return inputs, _cut(state, real)


def _cut(state, real: int):
    """The loop state's first ``real`` rows (the counters, without a batch axis, as they are)."""
    return LoopState(*(x[:real] if x.shape.rank else x for x in state))


def _gather_padded(full_inputs, full_state, index, real: int):
    """The rows ``index`` (``real`` trajectories, then padding) of the solve, the padding marked finished."""
    inputs, state = gather_rows(full_inputs, full_state, index)
    return inputs, _mark_padding(state, real)


def _padded(full_inputs, full_state, rows, real: int, state):
    """An example of the solve's inputs and loop state at ``bucket(real)`` rows, to compile."""
    size = bucket(real)
    if rows is None and size == real:
        return full_inputs, state
    return _gather_padded(full_inputs, _restore(full_state, rows, real, state), _pad_index(rows, real, size), real)


def bucket(rows: int) -> int:
    """The power of two at or above ``rows``: the batch sizes whose costs are kept apart."""
    return 1 << max(int(rows) - 1, 0).bit_length()


def _per_row(inputs) -> set[int]:
    """Which of the solve's inputs have a batch axis: y0, [tau,] rtol, atol (t and max_step are shared)."""
    return {0, 2, 3} if len(inputs) == 5 else {0, 2, 3, 4}


def gather_rows(inputs, state, rows):
    """The solve's inputs and loop state restricted to the trajectories ``rows``."""
    index = tf.constant(rows, tf.int32)
    per_row = _per_row(inputs)
    inputs = [tf.gather(x, index) if k in per_row else x for k, x in enumerate(inputs)]
    # Every entry of the loop state with a batch axis (all but the iteration and nfev counters).
    state = LoopState(*(tf.gather(x, index) if x.shape.rank else x for x in state))
    return inputs, state


def scatter_rows(full, rows, part):
    """``full`` loop state with the trajectories ``rows`` replaced by ``part`` (a gathered subset's)."""
    index = tf.constant(rows[:, None], tf.int32)
    return LoopState(*(tf.tensor_scatter_nd_update(x, index, y) if x.shape.rank else y for x, y in zip(full, part)))
