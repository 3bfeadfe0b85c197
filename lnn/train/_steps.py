"""The compiled steps of one :func:`lnn.fit` call: local gradients, distributed train and eval.

The train step is one ``tf.function`` with a fixed input signature (batch
dimension ``None``), traced once per fit (:attr:`_Trainer.traces`). Its heart,
:meth:`_Trainer.local_gradients`, differentiates the weighted loss through
the model's Hessian (double backpropagation) and runs under XLA when asked;
the optimizer update runs outside XLA, and is skipped when the loss or a
gradient is not finite.
"""

from __future__ import annotations

import keras
import numpy as np
import tensorflow as tf

from lnn import _runtime
from lnn.train._losses import TERMS, Batch, term_scales

__all__ = ["_Trainer", "build_trainer", "make_optimizer", "use_xla"]


def use_xla(model, weights: dict, xla: bool | None) -> bool:
    """fit's ``xla`` option: ``None`` picks XLA where it was measured to pay off.

    Measured (benchmarks/bench_mechanics.py, "train"; benchmarks/bench_defaults.py):
    XLA makes the kinetic-potential step 1.3-1.6x and the structured step
    1.7x faster (its closed form has no tape), after a 2-7 s compilation per
    batch shape (measured with XLA's default CPU emitters; the classic ones,
    :data:`lnn._runtime.XLA_CPU_EMITTERS`, about halve it); black-box models
    gain nothing. So: on for the kinds that say so (``Kind.xla_train``) in
    models built with ``xla=True``, unless the loss has a rollout term.
    """
    if xla is not None:
        return bool(xla)
    kind = getattr(model, "kind_model", None)
    wanted = bool(getattr(model, "xla", False)) and bool(getattr(kind, "xla_train", False))
    return wanted and weights.get("rollout", 0.0) <= 0


def make_optimizer(model, strategy, *, learning_rate: float, clipnorm: float | None):
    """Adam with global-norm clipping, built on the trainable variables in ``strategy``'s scope."""
    with strategy.scope():
        optimizer = keras.optimizers.Adam(learning_rate=learning_rate, global_clipnorm=clipnorm)
        optimizer.build(model.trainable_variables)
    return optimizer


def build_trainer(
    model, weights: dict, *, data, signature, optimizer, strategy, dtype, xla: bool | None, trainer=None, **extra
) -> _Trainer:
    """fit's :class:`_Trainer` (or ``trainer``, a subclass, given ``extra``) for ``data`` (a ``TrainingData``): the
    terms' scales, the XLA rule.

    The accelerations come from the networks' closed form, not from nested
    tapes (``engine="tapes"``): under XLA a step on those recompiled after
    every weight update (``tests/test_train.py`` counts the compilations).
    """
    terms = [k for k, w in weights.items() if w > 0]
    return (trainer or _Trainer)(
        model,
        weights,
        n=data.n,
        dtype=dtype,
        scales=term_scales(terms, data.train),
        strategy=strategy,
        optimizer=optimizer,
        horizon=data.horizon,
        dt=data.dt,
        signature=signature,
        jit_compile=use_xla(model, weights, xla),
        **extra,
    )


class _Trainer:
    """The compiled train and evaluation steps of one :func:`lnn.fit` call.

    Parameters
    ----------
    model : keras.Model
    weights : dict of str to float
        Loss weights by canonical term name (terms of weight 0 are dropped).
    n : int
        Degrees of freedom.
    dtype : tf.DType
        The model's variable dtype.
    scales : dict of str to array_like
        Data scales by name (see :func:`lnn.train._losses.term_scales`).
    strategy : tf.distribute.Strategy
    optimizer : keras.optimizers.Optimizer or None
        None for a trainer that only evaluates or computes gradients.
    horizon : int
        Steps of the rollout term.
    dt : float
        Time step of the rollout term.
    signature : sequence of tf.TensorSpec (or PerReplicaSpec)
        Element spec of the (distributed) batches: ``q, qd, qdd, tau`` of shape
        ``(None, n)`` (then the rollout windows).
    jit_compile : bool
        Compile :meth:`local_gradients` with XLA.
    engine : {"closed-form", "tapes"}
        ``"closed-form"`` (fit's, always) or ``"tapes"``: the generic engine of
        :mod:`lnn.mechanics` on the networks, kept to check the closed form's
        weight gradients (tests); never under XLA, where it recompiles after
        every weight update.
    """

    def __init__(
        self,
        model,
        weights,
        *,
        n: int,
        dtype,
        scales: dict,
        strategy,
        optimizer,
        horizon: int,
        dt: float,
        signature,
        jit_compile: bool = False,
        engine: str = "closed-form",
    ) -> None:
        self.model = model
        self.engine = engine
        self.weights = weights
        self.terms = [k for k, w in weights.items() if w > 0]
        self.n = n
        self.dtype = dtype
        # numpy constants: embedded in the compiled step. As tf.constant tensors they were
        # captured inputs bound on every call (~20 µs per step at batch 1 under XLA).
        self.scales = {k: np.asarray(v, dtype=dtype.as_numpy_dtype) for k, v in scales.items()}
        self.strategy = strategy
        self.optimizer = optimizer
        self.horizon = horizon
        self.dt = dt
        self.traces = 0
        self.eval_traces = 0
        self.signature = list(signature)
        self.jit_compile = bool(jit_compile)
        local = _runtime.xla_body(self.local_gradients) if self.jit_compile else self.local_gradients
        self._local = tf.function(local, jit_compile=self.jit_compile, autograph=False)
        self._train = tf.function(self._distributed_train, input_signature=self.signature, autograph=False)
        self._eval = tf.function(self._distributed_eval, input_signature=self.signature, autograph=False)
        self._train_call = self._eval_call = None  # compiled on first use (see _caller)

    def _replica_sums(self, batch, training: bool):
        """Sum over the local batch of each term, and the local batch size."""
        view = Batch(
            self.model,
            batch,
            scales=self.scales,
            training=training,
            horizon=self.horizon,
            dt=self.dt,
            engine=self.engine,
        )
        sums = {k: tf.reduce_sum(TERMS[k].value(view)) for k in self.terms}
        return sums, tf.cast(view.rows, self.dtype)

    def local_gradients(self, *batch):
        """Term sums, rows and gradients of the weighted sum over one local batch.

        Parameters
        ----------
        *batch : tensors
            ``q, qd, qdd, tau`` of shape ``(B, n)`` (and the rollout windows,
            ``(B, horizon + 1, n)``).

        Returns
        -------
        sums : dict of str to scalar tensor
        rows : scalar tensor
        grads : list of tensors, one per trainable variable
        """
        variables = self.model.trainable_variables
        with tf.GradientTape() as tape:
            sums, rows = self._replica_sums(batch, training=True)
            total = tf.add_n([self.weights[k] * sums[k] for k in self.terms])
        grads = tape.gradient(total, variables)
        grads = [tf.zeros_like(v) if g is None else g for v, g in zip(variables, grads)]
        return sums, rows, grads

    def _replica_train(self, *batch):
        ctx = tf.distribute.get_replica_context()
        sums, rows, grads = self._local(*batch)
        # The loss is a mean over the global batch: scale the local sums' gradients.
        global_rows = ctx.all_reduce(tf.distribute.ReduceOp.SUM, rows)
        return sums, rows, [g / global_rows for g in grads]

    def _sum(self, value):
        return self.strategy.reduce(tf.distribute.ReduceOp.SUM, value, axis=None)

    def _distributed_train(self, *batch):
        self.traces += 1  # Python side effect: runs once per tracing
        sums, rows, grads = self.strategy.run(self._replica_train, args=batch)
        grads = [self._sum(g) for g in grads]
        sums, rows = {k: self._sum(v) for k, v in sums.items()}, self._sum(rows)
        finite = [tf.reduce_all(tf.math.is_finite(g)) for g in grads]
        finite += [tf.math.is_finite(v) for v in sums.values()]
        variables = self.model.trainable_variables
        grads = self._clipped(grads)

        def apply():
            # Cross-replica context: the gradients are already summed over replicas.
            self.optimizer.apply_gradients(zip(grads, variables))
            return tf.constant(True)

        applied = tf.cond(tf.reduce_all(tf.stack(finite)), apply, lambda: tf.constant(False))
        return (sums, rows), applied

    def _clipped(self, grads):
        """The gradients as applied: unchanged here (the optimizer clips them; an ensemble clips per member)."""
        return grads

    def _replica_eval(self, *batch):
        return self._replica_sums(batch, training=False)

    def _distributed_eval(self, *batch):
        self.eval_traces += 1
        sums, rows = self.strategy.run(self._replica_eval, args=batch)
        return {k: self._sum(v) for k, v in sums.items()}, self._sum(rows)

    def _caller(self, function):
        """``function`` called past TensorFlow's Python dispatch when the batches are plain tensors.

        Under the default (single-replica) strategy the dataset yields plain
        tensors and the compiled step runs through :func:`lnn._runtime.fast_caller`
        (a batch-8 step of a 2-DOF width-32 model: 920-1015 -> 610-620 µs, one
        core); under a multi-replica strategy (per-replica values) it is called
        as it is.
        """
        if tf.distribute.has_strategy() or not all(isinstance(spec, tf.TensorSpec) for spec in self.signature):
            return function
        return _runtime.fast_caller(function.get_concrete_function())

    def train_step(self, batch):
        """Run one step; return ``(term sums, rows, applied)`` as Python values."""
        if self._train_call is None:
            self._train_call = self._caller(self._train)
        (sums, rows), applied = self._train_call(*batch)
        return {k: float(v) for k, v in sums.items()}, float(rows), bool(applied)

    def eval_sums(self, batches) -> dict[str, float]:
        """Mean of every term over ``batches``, and the weighted ``"total"``."""
        totals = {k: 0.0 for k in self.terms}
        count = 0.0
        if self._eval_call is None:
            self._eval_call = self._caller(self._eval)
        for batch in batches:
            sums, rows = self._eval_call(*batch)
            for k in self.terms:
                totals[k] += float(sums[k])
            count += float(rows)
        means = {k: v / max(count, 1.0) for k, v in totals.items()}
        means["total"] = sum(self.weights[k] * means[k] for k in self.terms)
        return means
