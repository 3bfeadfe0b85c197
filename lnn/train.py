"""Training any dynamics model on trajectory data: :func:`fit` and its :class:`History`.

A model is anything that maps ``(q, qd, tau)`` to ``qdd`` (``model((q, qd,
tau))``): a :class:`lnn.LagrangianNetwork`, or a plain ``keras.Model``
baseline. The torque loss also needs ``model.inverse_dynamics(q, qd, qdd)``,
the power-balance loss ``model.energy(q, qd)``, the rollout loss an
``acceleration`` method (for :func:`lnn.integrate.odeint`).

Losses (each term is reported separately in the history; a ``dict`` of
weights combines them, e.g. ``{"acceleration": 1.0, "energy": 0.1}``):

``"acceleration-l2"`` (alias ``"acceleration"``), ``"acceleration-l1"``
    Squared / absolute error of ``qdd``, each coordinate divided by the
    standard deviation of the training ``qdd`` (Cranmer et al. use L1).
``"torque"`` (alias ``"inverse-dynamics"``)
    Squared error of the inverse dynamics ``tau`` (DeLaN), divided per joint
    by the standard deviation of the training ``tau``.
``"energy"`` (alias ``"power"``)
    Power balance ``dE/dt = qd · (tau - D qd)`` (``D`` the model's learned
    damping, if any) with ``dE/dt = dE/dq · qd + dE/dqd ·
    qdd`` from the model's energy at the data's ``qdd``; squared and divided
    by the variance of ``qd · tau`` (or of ``qd · qdd`` for unforced data).
``"rollout"``
    Multi-step error: windows of ``horizon + 1`` consecutive samples of one
    trajectory are integrated from their first state with the in-graph RK4
    integrator :func:`lnn.integrate.odeint`; the squared error of ``q`` and
    ``qd`` over the window, each coordinate divided by its standard deviation.

The train step is one ``tf.function`` with a fixed input signature (batch
dimension ``None``), traced once per :func:`fit` call: :attr:`History.traces`
counts its tracings. It differentiates through the model's Hessian (double
backpropagation), clips the global gradient norm, and applies no update when
the loss or a gradient is not finite: :func:`fit` then raises
:class:`TrainingDivergedError` naming the epoch and batch, with the model
holding the last good weights.

Training on several devices or machines: build the model inside a strategy's
scope and pass the strategy; the global batch is split over its replicas and
the gradients are summed before the update::

    strategy = tf.distribute.MirroredStrategy()          # all local GPUs (or CPUs)
    with strategy.scope():
        model = lnn.LagrangianNetwork(n, kind="structured")
    history = lnn.fit(model, data, strategy=strategy, batch_size=512 * strategy.num_replicas_in_sync)

Across machines use ``tf.distribute.MultiWorkerMirroredStrategy()`` the same
way, after setting the ``TF_CONFIG`` environment variable on every worker
(``{"cluster": {"worker": ["host1:port", "host2:port"]}, "task": {"type":
"worker", "index": i}}``) and running the same script on each; give every
worker its own ``checkpoint_dir`` (or a shared one written by worker 0 only).
"""

from __future__ import annotations

import csv
import json
import math
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Mapping, Sequence

import numpy as np
import tensorflow as tf

from lnn import mechanics

__all__ = [
    "LOSSES",
    "SCHEDULES",
    "History",
    "TrainingDivergedError",
    "fit",
    "cranmer_initialization",
]

#: Canonical loss terms and the aliases accepted for them.
LOSSES = {
    "acceleration": "acceleration-l2",
    "acceleration-l2": "acceleration-l2",
    "acceleration-l1": "acceleration-l1",
    "torque": "torque",
    "inverse-dynamics": "torque",
    "energy": "energy",
    "power": "energy",
    "rollout": "rollout",
}
#: Learning-rate schedules accepted by :func:`fit`.
SCHEDULES = ("cosine", "exponential", "constant")


class TrainingDivergedError(RuntimeError, FloatingPointError):
    """A non-finite loss or gradient stopped training.

    The update of the offending batch is not applied, so the model keeps the
    weights of the last good step.

    Attributes
    ----------
    epoch : int
        Epoch (0-based) of the offending batch.
    batch : int
        Batch index (0-based) within the epoch.
    terms : dict
        The loss terms of that batch (some non-finite).
    """

    def __init__(self, message: str, *, epoch: int, batch: int, terms: dict) -> None:
        super().__init__(message)
        self.epoch = int(epoch)
        self.batch = int(batch)
        self.terms = dict(terms)


@dataclass(frozen=True)
class History:
    """What happened during :func:`fit`, epoch by epoch.

    Attributes
    ----------
    epoch : ndarray of int, shape ``(E,)``
        Epoch numbers (0-based; a resumed run continues the numbering).
    train : dict of str to ndarray, shape ``(E,)``
        Mean training loss per term, and ``"total"`` (the weighted sum).
    validation : dict of str to ndarray, shape ``(E,)``
        The same on the validation set (empty without validation data).
    lr : ndarray, shape ``(E,)``
        Learning rate at the end of each epoch.
    time : ndarray, shape ``(E,)``
        Wall time (s) since the start of the call at the end of each epoch.
    best_epoch : int
        Epoch with the lowest monitored loss (validation total when there is
        validation data, else training total); its weights are the model's
        at return when ``restore_best`` is true. -1 if no epoch finished.
    best_loss : float
        That loss.
    stopped_reason : str
        ``"epochs"``, ``"time_limit"``, ``"early_stopping"`` or ``"callback"``.
    traces : int
        How often the train step was traced (1 for a healthy run).
    weights : dict of str to float
        The loss weights used, by canonical term name.
    """

    epoch: np.ndarray
    train: dict
    validation: dict
    lr: np.ndarray
    time: np.ndarray
    best_epoch: int
    best_loss: float
    stopped_reason: str
    traces: int
    weights: dict = field(default_factory=dict)

    def as_rows(self) -> list[dict]:
        """One dict per epoch: ``epoch, time, lr, train_<term>..., val_<term>...``."""
        rows = []
        for i, epoch in enumerate(self.epoch):
            row = {"epoch": int(epoch), "time": float(self.time[i]), "lr": float(self.lr[i])}
            row.update({f"train_{k}": float(v[i]) for k, v in self.train.items()})
            row.update({f"val_{k}": float(v[i]) for k, v in self.validation.items()})
            rows.append(row)
        return rows


# --------------------------------------------------------------------------- options


def _loss_weights(loss) -> dict[str, float]:
    if isinstance(loss, str):
        loss = {loss: 1.0}
    if not isinstance(loss, Mapping) or not loss:
        raise TypeError(f"loss must be a loss name or a non-empty dict of weights, got {loss!r}")
    weights: dict[str, float] = {}
    for name, weight in loss.items():
        if name not in LOSSES:
            raise ValueError(f"unknown loss term {name!r}; known terms: {sorted(LOSSES)}")
        weight = float(weight)
        if not (math.isfinite(weight) and weight >= 0):
            raise ValueError(f"loss weight of {name!r} must be finite and >= 0, got {weight!r}")
        canonical = LOSSES[name]
        weights[canonical] = weights.get(canonical, 0.0) + weight
    if not any(w > 0 for w in weights.values()):
        raise ValueError(f"at least one loss weight must be positive, got {loss!r}")
    return weights


def _positive(name: str, value, kind=float, allow_none: bool = False):
    if value is None and allow_none:
        return None
    if isinstance(value, bool) or not isinstance(value, (int, float, np.integer, np.floating)):
        raise TypeError(f"{name} must be a number, got {type(value).__name__} {value!r}")
    if not value > 0 or not math.isfinite(value):
        raise ValueError(f"{name} must be positive and finite, got {value!r}")
    return kind(value)


def _arrays(data, name: str) -> dict[str, np.ndarray]:
    """``q, qd, qdd, tau`` (N, n) and trajectory ids (N,) of a Dataset-like object."""
    try:
        out = {k: np.asarray(getattr(data, k), dtype=np.float64) for k in ("q", "qd", "qdd", "tau")}
    except AttributeError as exc:
        raise TypeError(
            f"{name} must be an lnn.Dataset (with q, qd, qdd, tau), got {type(data).__name__}"
        ) from exc
    shape = out["q"].shape
    if len(shape) != 2 or shape[0] == 0:
        raise ValueError(f"{name}.q must have shape (N, n) with N > 0, got {shape}")
    for key, value in out.items():
        if value.shape != shape:
            raise ValueError(f"{name}.{key} must have shape {shape} like {name}.q, got {value.shape}")
    ids = getattr(data, "trajectory", None)
    if ids is None:
        ids = getattr(data, "trajectory_ids", None)
    out["trajectory"] = (np.zeros(shape[0], dtype=np.int64) if ids is None
                         else np.asarray(ids).astype(np.int64).reshape(shape[0]))
    out["t"] = np.asarray(getattr(data, "t", np.arange(shape[0], dtype=np.float64)),
                          dtype=np.float64).reshape(shape[0])
    return out


def _split(dataset, validation, seed: int):
    """``(train, validation or None)`` from fit's ``validation`` argument."""
    if not all(hasattr(dataset, k) for k in ("q", "qd", "qdd", "tau")):
        raise TypeError(
            f"dataset must be an lnn.Dataset (with q, qd, qdd, tau), got {type(dataset).__name__}"
        )
    if validation is None:
        return dataset, None
    if isinstance(validation, (float, np.floating)) and not isinstance(validation, bool):
        fraction = float(validation)
        if not 0.0 < fraction < 1.0:
            raise ValueError(f"validation fraction must be in (0, 1), got {validation!r}")
        if not hasattr(dataset, "split"):
            raise TypeError(
                f"validation={validation!r} needs a dataset with split(), got {type(dataset).__name__}"
            )
        parts = dataset.split(fractions=(1.0 - fraction, fraction, 0.0), seed=seed)
        return parts.train, parts.validation
    if hasattr(validation, "q"):
        return dataset, validation
    raise TypeError(
        f"validation must be a Dataset, a fraction in (0, 1) or None, got {type(validation).__name__}"
    )


def _std(x: np.ndarray) -> np.ndarray:
    """Per-column standard deviation with zeros replaced by the mean one (or 1)."""
    s = np.nanstd(x, axis=0)
    fallback = s[s > 0].mean() if np.any(s > 0) else 1.0
    return np.where(s > 0, s, fallback)


def _rollout_windows(arrays: dict, horizon: int) -> tuple[np.ndarray, float]:
    """Start indices of windows of ``horizon + 1`` equally spaced samples of one trajectory."""
    ids, t = arrays["trajectory"], arrays["t"]
    n = ids.shape[0]
    if n <= horizon:
        return np.zeros(0, dtype=np.int64), math.nan
    starts = np.arange(n - horizon)
    same = ids[starts] == ids[starts + horizon]
    steps = np.diff(t)
    dt = float(np.median(steps[ids[1:] == ids[:-1]])) if n > 1 else math.nan
    if not (math.isfinite(dt) and dt > 0):
        return np.zeros(0, dtype=np.int64), math.nan
    ok = same & np.isclose(t[starts + horizon] - t[starts], horizon * dt, rtol=1e-6, atol=1e-9)
    return starts[ok], dt


# --------------------------------------------------------------------------- initialization


def cranmer_initialization(model, *, seed: int = 0) -> int:
    """Re-initialise a model's MLPs as Cranmer et al. chose for LNNs.

    ``lagrangian_nns/lnn.py::custom_init``: biases zero; the kernel of layer
    ``i`` (of ``L``) normal with standard deviation ``s / sqrt(n)``, ``n`` the
    larger of its fan-in and fan-out, and ``s = 2.2`` for the first layer,
    ``0.58 i`` for the hidden layers and ``n`` for the output layer. They
    found it by optimising the initial gradient statistics of an LNN's
    accelerations.

    Parameters
    ----------
    model : keras.Model
        A model whose MLPs are :class:`lnn._mlp.MLP` layers (a
        :class:`lnn.LagrangianNetwork`), or plain ``keras.layers.Dense``
        stacks (each model's Dense layers, in order, form one MLP).
    seed : int, keyword-only
        Seed of the new weights.

    Returns
    -------
    int
        Number of MLPs re-initialised.
    """
    from lnn._mlp import MLP

    rng = np.random.default_rng(seed)
    mlps = [layer for layer in _sublayers(model) if isinstance(layer, MLP)]
    for mlp in mlps:
        if mlp.nonnegative:  # input-convex nets keep their own non-negative init
            continue
        first = [w for w in (mlp.w_x, mlp.w_v) if w is not None]
        fan_in = sum(int(w.shape[0]) for w in first)
        n = max(fan_in, int(mlp.hidden[0]))
        rows = rng.normal(0.0, 2.2 / math.sqrt(n), (fan_in, int(mlp.hidden[0])))
        offset = 0
        for w in first:
            w.assign(rows[offset:offset + int(w.shape[0])].astype(w.dtype))
            offset += int(w.shape[0])
        mlp.b_1.assign(np.zeros(mlp.b_1.shape, dtype=mlp.b_1.dtype))
        kernels, biases = list(mlp._raw_kernels), list(mlp._biases)  # no output bias: one fewer
        _assign_layers([(k, biases[i] if i < len(biases) else None) for i, k in enumerate(kernels)],
                       rng, start=1)
    dense = [layer for layer in _sublayers(model)
             if type(layer).__name__ == "Dense" and getattr(layer, "kernel", None) is not None]
    if not mlps and dense:
        _assign_layers([(d.kernel, d.bias) for d in dense], rng, start=0)
        return 1
    return len(mlps)


def _assign_layers(pairs, rng, *, start: int) -> None:
    total = start + len(pairs)
    for j, (kernel, bias) in enumerate(pairs):
        i = start + j
        n = max(int(s) for s in kernel.shape)
        factor = 2.2 if i == 0 else (n if i == total - 1 else 0.58 * i)
        kernel.assign(rng.normal(0.0, factor / math.sqrt(n), tuple(kernel.shape)).astype(kernel.dtype))
        if bias is not None:
            bias.assign(np.zeros(tuple(bias.shape), dtype=bias.dtype))


def _sublayers(model):
    flatten = getattr(model, "_flatten_layers", None)
    if flatten is not None:
        return list(flatten(include_self=False, recursive=True))
    return list(getattr(model, "submodules", ()))


# --------------------------------------------------------------------------- the trainer


class _Trainer:
    """The compiled train and evaluation steps of one :func:`fit` call."""

    def __init__(self, model, weights, *, n: int, dtype, scales: dict, strategy,
                 optimizer, horizon: int, dt: float, signature, jit_compile: bool = False,
                 engine: str = "closed-form") -> None:
        self.model = model
        # "closed-form" (fit's, always) or "tapes": the generic engine of lnn.mechanics on
        # the networks, kept to check the closed form's weight gradients (tests); never
        # under XLA in fit, where it recompiles after every weight update.
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
        # The element spec of the (distributed) dataset: TensorSpecs with a None
        # batch dimension, or PerReplicaSpecs under a multi-replica strategy.
        self.signature = list(signature)
        self.jit_compile = bool(jit_compile)
        self._local = tf.function(self.local_gradients, jit_compile=self.jit_compile,
                                  autograph=False)
        self._train = tf.function(self._distributed_train, input_signature=self.signature,
                                  autograph=False)
        self._eval = tf.function(self._distributed_eval, input_signature=self.signature,
                                 autograph=False)
        self._train_call = self._eval_call = None  # compiled on first use (see _caller)

    # -- loss terms (per sample) -------------------------------------------
    def _per_sample_terms(self, q, qd, qdd, tau, *windows, training: bool):
        model, out = self.model, {}
        if "acceleration-l2" in self.terms or "acceleration-l1" in self.terms:
            if self.engine == "tapes":
                pred = model._acceleration_by_tapes(q, qd, tau)
            else:
                pred = model((q, qd, tau), training=training)
            z = (pred - qdd) / self.scales["qdd"]
            if "acceleration-l2" in self.terms:
                out["acceleration-l2"] = tf.reduce_mean(tf.square(z), axis=-1)
            if "acceleration-l1" in self.terms:
                out["acceleration-l1"] = tf.reduce_mean(tf.abs(z), axis=-1)
        if "torque" in self.terms:
            z = (model.inverse_dynamics(q, qd, qdd) - tau) / self.scales["tau"]
            out["torque"] = tf.reduce_mean(tf.square(z), axis=-1)
        if "energy" in self.terms:
            with tf.GradientTape(watch_accessed_variables=False) as tape:
                tape.watch([q, qd])
                energy = model.energy(q, qd)
            de_dq, de_dqd = tape.gradient(energy, [q, qd])
            de_dq = tf.zeros_like(q) if de_dq is None else de_dq
            de_dqd = tf.zeros_like(qd) if de_dqd is None else de_dqd
            power = tf.reduce_sum(de_dq * qd + de_dqd * qdd, axis=-1)
            force = tau
            if getattr(model, "damping", False) is True:  # learned viscous damping -D qd
                force = tau - tf.linalg.matvec(model.damping_matrix(), qd)
            residual = (power - tf.reduce_sum(qd * force, axis=-1)) / self.scales["power"]
            out["energy"] = tf.square(residual)
        if "rollout" in self.terms:
            # lnn.odeint's RK4, differentiable; inside this traced step it returns an
            # OdeintResult of tensors (batch dimension None).
            from lnn.odeint import odeint

            q_win, qd_win, tau_win = windows
            t = np.arange(self.horizon + 1) * self.dt
            path = odeint(model, q_win[:, 0], qd_win[:, 0], t, method="rk4", tau=tau_win)
            q_path, qd_path = path.q, path.qd
            zq = (q_path[:, 1:] - q_win[:, 1:]) / self.scales["q"]
            zv = (qd_path[:, 1:] - qd_win[:, 1:]) / self.scales["qd"]
            out["rollout"] = 0.5 * (tf.reduce_mean(tf.square(zq), axis=[1, 2])
                                    + tf.reduce_mean(tf.square(zv), axis=[1, 2]))
        return out

    def _replica_sums(self, batch, training: bool):
        """Sum over the local batch of each term, and the local batch size."""
        per_sample = self._per_sample_terms(*batch, training=training)
        sums = {k: tf.reduce_sum(v) for k, v in per_sample.items()}
        rows = tf.cast(tf.shape(batch[-1] if "rollout" in self.terms else batch[0])[0], self.dtype)
        return sums, rows

    # -- steps ---------------------------------------------------------------
    def local_gradients(self, *batch):
        """Term sums, rows and gradients of the weighted sum over one local batch.

        The compiled heart of the train step (with XLA when the trainer's
        ``jit_compile`` is on): a loss on the mechanics, differentiated twice.

        Parameters
        ----------
        *batch : tensors
            ``q, qd, qdd, tau`` of shape ``(B, n)`` (and the rollout windows).

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
        return {k: sums[k] for k in self.terms}, rows, grads

    def _replica_train(self, *batch):
        ctx = tf.distribute.get_replica_context()
        sums, rows, grads = self._local(*batch)
        # The loss is a mean over the global batch: scale the local sums' gradients.
        global_rows = ctx.all_reduce(tf.distribute.ReduceOp.SUM, rows)
        return sums, rows, [g / global_rows for g in grads]

    def _distributed_train(self, *batch):
        self.traces += 1  # Python side effect: runs once per tracing
        sums, rows, grads = self.strategy.run(self._replica_train, args=batch)
        reduce = lambda x: self.strategy.reduce(tf.distribute.ReduceOp.SUM, x, axis=None)  # noqa: E731
        grads = [reduce(g) for g in grads]
        sums, rows = {k: reduce(v) for k, v in sums.items()}, reduce(rows)
        finite = [tf.reduce_all(tf.math.is_finite(g)) for g in grads]
        finite += [tf.math.is_finite(v) for v in sums.values()]
        ok = tf.reduce_all(tf.stack(finite))
        variables = self.model.trainable_variables

        def apply():
            # Cross-replica context: the gradients are already summed over replicas.
            self.optimizer.apply_gradients(zip(grads, variables))
            return tf.constant(True)

        applied = tf.cond(ok, apply, lambda: tf.constant(False))
        return (sums, rows), applied

    def _replica_eval(self, *batch):
        sums, rows = self._replica_sums(batch, training=False)
        return {k: sums[k] for k in self.terms}, rows

    def _distributed_eval(self, *batch):
        self.eval_traces += 1
        sums, rows = self.strategy.run(self._replica_eval, args=batch)
        return self._reduce(sums, rows)

    def _reduce(self, sums, rows):
        reduce = lambda x: self.strategy.reduce(tf.distribute.ReduceOp.SUM, x, axis=None)  # noqa: E731
        return {k: reduce(v) for k, v in sums.items()}, reduce(rows)

    def _caller(self, function):
        """``function`` called past TensorFlow's Python dispatch when the batches are plain tensors.

        Under the default (single-replica) strategy the dataset yields plain
        tensors and the compiled step runs through
        :func:`lnn.mechanics.fast_caller` (a batch-8 step of a 2-DOF width-32
        model: 920-1015 -> 610-620 µs, one core); under a multi-replica
        strategy (per-replica values) it is called as it is.
        """
        if tf.distribute.has_strategy() or not all(
                isinstance(spec, tf.TensorSpec) for spec in self.signature):
            return function
        return mechanics.fast_caller(function.get_concrete_function())

    def train_step(self, batch):
        """Run one step; return ``(term sums, rows, applied)`` as numpy values."""
        if self._train_call is None:
            self._train_call = self._caller(self._train)
        (sums, rows), applied = self._train_call(*batch)
        return {k: float(v) for k, v in sums.items()}, float(rows), bool(applied)

    def eval_sums(self, batches) -> dict[str, float]:
        """Mean of every term over ``batches``, and the weighted total."""
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


def _learning_rate(schedule: str, base: float, progress: float, *, final_factor: float,
                   warmup: float) -> float:
    """Learning rate at ``progress`` in [0, 1] of the run."""
    progress = min(max(progress, 0.0), 1.0)
    if warmup > 0 and progress < warmup:
        return base * (0.1 + 0.9 * progress / warmup)
    if schedule == "constant":
        return base
    p = (progress - warmup) / max(1.0 - warmup, 1e-12)
    if schedule == "cosine":
        return base * (final_factor + (1.0 - final_factor) * 0.5 * (1.0 + math.cos(math.pi * p)))
    return base * final_factor ** p  # exponential


def _make_dataset(arrays: dict, index: np.ndarray, batch_size: int, dtype, windows, horizon: int):
    """A batched ``tf.data`` pipeline of ``(q, qd, qdd, tau[, q_win, qd_win, tau_win])``."""
    np_dtype = dtype.as_numpy_dtype
    if windows is None:
        tensors = tuple(arrays[k][index].astype(np_dtype) for k in ("q", "qd", "qdd", "tau"))
    else:
        starts = windows[index]
        span = starts[:, None] + np.arange(horizon + 1)[None, :]
        tensors = tuple(arrays[k][starts].astype(np_dtype) for k in ("q", "qd", "qdd", "tau")) + tuple(
            arrays[k][span].astype(np_dtype) for k in ("q", "qd", "tau"))
    ds = tf.data.Dataset.from_tensor_slices(tensors).batch(batch_size)
    return ds.prefetch(tf.data.AUTOTUNE)


def fit(
    model,
    dataset,
    *,
    loss="acceleration",
    epochs: int = 100,
    batch_size: int = 512,
    learning_rate: float = 3e-3,
    validation=0.1,
    seed: int = 0,
    time_limit: float | None = None,
    callbacks: Sequence[Callable[[int, dict], Any]] = (),
    checkpoint_dir=None,
    strategy: tf.distribute.Strategy | None = None,
    progress: Callable[..., None] | None = None,
    schedule: str = "cosine",
    final_learning_rate: float = 1e-2,
    warmup: float = 0.02,
    clipnorm: float | None = 10.0,
    patience: int | None = None,
    min_delta: float = 0.0,
    horizon: int = 5,
    initialization: str | None = None,
    adapt: bool = True,
    shuffle: bool = True,
    restore_best: bool = True,
    tensorboard_dir=None,
    csv_log=None,
    xla: bool | None = None,
) -> History:
    """Train a dynamics model on a dataset of states, accelerations and torques.

    Parameters
    ----------
    model : keras.Model
        ``model((q, qd, tau)) -> qdd`` for batches of shape ``(B, n)``; a
        :class:`lnn.LagrangianNetwork` or any Keras model with that call
        (see the module docstring for what each loss needs).
    dataset : lnn.Dataset
        Training data: ``q, qd, qdd, tau`` of shape ``(N, n)``, trajectory ids
        ``(N,)`` and times ``t (N,)`` (the rollout loss needs the last two).
    loss : str or dict of str to float, keyword-only
        A term name or ``{term: weight}``; terms ``"acceleration"`` (=
        ``"acceleration-l2"``), ``"acceleration-l1"``, ``"torque"`` (=
        ``"inverse-dynamics"``), ``"energy"`` (= ``"power"``), ``"rollout"``.
    epochs : int, keyword-only
        Number of passes over the training data.
    batch_size : int, keyword-only
        Global batch size (split over the replicas of ``strategy``).
    learning_rate : float, keyword-only
        Peak learning rate of Adam.
    validation : lnn.Dataset, float or None, keyword-only
        Validation data, a fraction of the trajectories of ``dataset`` to hold
        out (``dataset.split``), or None.
    seed : int, keyword-only
        Seed of the data split, the shuffling and ``initialization``.
    time_limit : float, optional, keyword-only
        Wall-time budget in seconds: training stops cleanly before exceeding
        it. The learning-rate schedule then follows the larger of the epoch
        and the time fraction, so that it decays within the budget.
    callbacks : sequence of callable, keyword-only
        Each called as ``callback(epoch, logs)`` after every epoch with the
        epoch's row of :meth:`History.as_rows`; returning True stops training.
    checkpoint_dir : str or Path, optional, keyword-only
        Save ``tf.train.Checkpoint`` s (model, optimizer, epoch, seed, history)
        every epoch, and resume from the latest one when it exists: a resumed
        run reproduces an uninterrupted one bit for bit (without a
        ``time_limit``, whose schedule depends on wall time).
    strategy : tf.distribute.Strategy, optional, keyword-only
        Distribute the batches over its replicas; the model must have been
        created inside ``strategy.scope()``.
    progress : callable, optional, keyword-only
        ``progress(done, total, message)`` with epochs done (fractional) out
        of ``epochs`` and the latest losses; under a ``time_limit`` that
        ends the run sooner, ``done / total`` is the elapsed fraction of it
        (so a progress bar's time left is right either way).
    schedule : {"cosine", "exponential", "constant"}, keyword-only
        Learning-rate schedule over the run (after a linear warm-up).
    final_learning_rate : float, keyword-only
        Final learning rate as a fraction of ``learning_rate``.
    warmup : float, keyword-only
        Fraction of the run spent warming the learning rate up from 10 %.
    clipnorm : float or None, keyword-only
        Clip the global gradient norm to this value.
    patience : int, optional, keyword-only
        Stop when the monitored loss has not improved for this many epochs.
    min_delta : float, keyword-only
        An epoch improves on the best one when its monitored loss is lower by
        more than this.
    horizon : int, keyword-only
        Steps of the rollout loss.
    initialization : {None, "cranmer"}, keyword-only
        Re-initialise the model's MLPs (:func:`cranmer_initialization`).
    adapt : bool, keyword-only
        Call ``model.adapt(q, qd, qdd)`` on the training data (input scaling
        stored in the model) when the model has it.
    shuffle : bool, keyword-only
        Shuffle the samples every epoch.
    restore_best : bool, keyword-only
        Return the model with the weights of the best epoch.
    tensorboard_dir : str or Path, optional, keyword-only
        Write the epoch scalars for TensorBoard there.
    csv_log : str or Path, optional, keyword-only
        Write one CSV row per epoch there (appended when resuming; an existing
        file is otherwise refused).
    xla : bool, optional, keyword-only
        Compile the loss and its gradient with XLA (``jit_compile=True``).
        Default: on for ``"kinetic-potential"`` :class:`lnn.LagrangianNetwork`
        models with ``xla=True`` (the defaults; 1.3-1.6x faster steps after a
        few seconds of compilation) unless the loss has a rollout term; the
        optimizer update runs outside XLA either way.

    Returns
    -------
    History

    Raises
    ------
    TrainingDivergedError
        When a batch gives a non-finite loss or gradient (the model keeps the
        weights before that batch).
    ValueError, TypeError
        For bad arguments, naming the argument and the value received.
    """
    weights = _loss_weights(loss)
    epochs = _positive("epochs", epochs, int)
    batch_size = _positive("batch_size", batch_size, int)
    learning_rate = _positive("learning_rate", learning_rate)
    time_limit = _positive("time_limit", time_limit, float, allow_none=True)
    clipnorm = _positive("clipnorm", clipnorm, float, allow_none=True)
    patience = _positive("patience", patience, int, allow_none=True)
    horizon = _positive("horizon", horizon, int)
    if not 0 < final_learning_rate <= 1:
        raise ValueError(f"final_learning_rate must be in (0, 1], got {final_learning_rate!r}")
    if not 0 <= warmup < 1:
        raise ValueError(f"warmup must be in [0, 1), got {warmup!r}")
    if schedule not in SCHEDULES:
        raise ValueError(f"schedule must be one of {SCHEDULES}, got {schedule!r}")
    if initialization not in (None, "cranmer"):
        raise ValueError(f"initialization must be None or 'cranmer', got {initialization!r}")
    if not callable(model):
        raise TypeError(f"model must be a callable keras.Model, got {type(model).__name__}")
    start = time.monotonic()

    def run_done(epochs_done: float) -> float:
        """Progress in epochs, or the elapsed share of ``time_limit`` (in epochs) when larger."""
        if time_limit is None:
            return epochs_done
        return max(epochs_done, min(1.0, (time.monotonic() - start) / time_limit) * epochs)

    train_data, val_data = _split(dataset, validation, seed)
    train = _arrays(train_data, "dataset")
    val = _arrays(val_data, "validation") if val_data is not None else None
    n = train["q"].shape[1]
    if val is not None and val["q"].shape[1] != n:
        raise ValueError(f"validation has {val['q'].shape[1]} coordinates, the dataset {n}")
    n_model = getattr(model, "n_dof", n)
    if n_model != n:
        raise ValueError(f"model.n_dof is {n_model} but the dataset has n = {n} coordinates")
    user_strategy = strategy is not None
    strategy = strategy if user_strategy else tf.distribute.get_strategy()
    if not isinstance(strategy, tf.distribute.Strategy):
        raise TypeError(f"strategy must be a tf.distribute.Strategy, got {type(strategy).__name__}")

    # Input scaling from the training data, then a probe call that builds the variables.
    if adapt and hasattr(model, "adapt"):
        model.adapt(train["q"], train["qd"], train["qdd"])
    dtype = _model_dtype(model)
    probe = tuple(tf.constant(train[k][:2], dtype=dtype) for k in ("q", "qd", "tau"))
    with strategy.scope():
        model(probe)
    dtype = _model_dtype(model)  # the variables' dtype, now that they exist
    if user_strategy:
        for var in model.trainable_variables:
            if not strategy.extended.variable_created_in_scope(getattr(var, "value", var)):
                raise ValueError(
                    "the model's variables were not created inside strategy.scope(); build the "
                    "model under `with strategy.scope():` before calling fit(..., strategy=...)"
                )
    if initialization == "cranmer":
        cranmer_initialization(model, seed=seed)

    scales = {"qdd": _std(train["qdd"]), "tau": _std(train["tau"]),
              "q": _std(train["q"]), "qd": _std(train["qd"])}
    power = np.sum(train["qd"] * train["tau"], axis=1)
    if not np.any(power[np.isfinite(power)] != 0):
        power = np.sum(train["qd"] * train["qdd"], axis=1)
    spread = float(np.nanstd(power)) if np.any(np.isfinite(power)) else 0.0
    scales["power"] = np.asarray(spread if spread > 0 else 1.0)

    windows = val_windows = None
    dt = math.nan
    if "rollout" in weights:
        windows, dt = _rollout_windows(train, horizon)
        if windows.size == 0:
            raise ValueError(
                f"the rollout loss needs trajectories of more than horizon={horizon} equally "
                "spaced samples; the dataset has none"
            )
        if val is not None:
            val_windows, _ = _rollout_windows(val, horizon)
    n_train = windows.size if windows is not None else train["q"].shape[0]

    with strategy.scope():
        import keras

        optimizer = keras.optimizers.Adam(learning_rate=learning_rate, global_clipnorm=clipnorm)
        optimizer.build(model.trainable_variables)
        epoch_var = tf.Variable(0, dtype=tf.int64, trainable=False)
        seed_var = tf.Variable(int(seed), dtype=tf.int64, trainable=False)
    def distribute(arrays, index):
        return strategy.experimental_distribute_dataset(
            _make_dataset(arrays, index, batch_size, dtype, windows if arrays is train else val_windows,
                          horizon))

    signature = distribute(train, np.arange(min(n_train, batch_size))).element_spec
    if xla is None:
        # Measured (benchmarks/bench_mechanics.py, "train"): XLA makes the kinetic-potential
        # step 1.3-1.6x faster after a 2-7 s compilation per batch shape; black-box models
        # gain nothing, and the structured kind's forward-mode term recompiles on every step.
        xla = (bool(getattr(model, "xla", False)) and getattr(model, "kind", None) == "kinetic-potential"
               and weights.get("rollout", 0.0) <= 0)
    # The accelerations come from the networks' closed form. Not from nested tapes, even
    # though under XLA those ran a fixed-weight step 5-35 % faster at width 32: XLA
    # recompiled that step after every weight update (0.6-0.9 s per step). (A minimal
    # ForwardAccumulator / batch_jacobian step does not recompile: the cause is not pinned.)
    trainer = _Trainer(model, weights, n=n, dtype=dtype, scales=scales, strategy=strategy,
                       optimizer=optimizer, horizon=horizon, dt=dt, signature=signature,
                       jit_compile=xla)

    # History (restored when resuming from a checkpoint).
    log: dict[str, list] = {"epoch": [], "lr": [], "time": []}
    train_log: dict[str, list] = {k: [] for k in trainer.terms + ["total"]}
    val_log: dict[str, list] = {k: [] for k in trainer.terms + ["total"]} if val is not None else {}
    best = {"loss": math.inf, "epoch": -1, "weights": None}
    time_offset = 0.0

    manager = best_manager = None
    if checkpoint_dir is not None:
        checkpoint_dir = Path(checkpoint_dir)
        checkpoint_dir.mkdir(parents=True, exist_ok=True)
        ckpt = tf.train.Checkpoint(model=model, optimizer=optimizer, epoch=epoch_var, seed=seed_var)
        manager = tf.train.CheckpointManager(ckpt, str(checkpoint_dir / "latest"), max_to_keep=2)
        best_ckpt = tf.train.Checkpoint(model=model)
        best_manager = tf.train.CheckpointManager(best_ckpt, str(checkpoint_dir / "best"), max_to_keep=1)
        if manager.latest_checkpoint:
            saved_seed = int(tf.train.load_variable(manager.latest_checkpoint, "seed/.ATTRIBUTES/VARIABLE_VALUE"))
            if saved_seed != int(seed):
                raise ValueError(
                    f"checkpoint_dir {str(checkpoint_dir)!r} holds a run with seed={saved_seed}, "
                    f"but fit was called with seed={seed}; use another directory"
                )
            ckpt.restore(manager.latest_checkpoint).assert_existing_objects_matched()
            state_file = checkpoint_dir / "history.json"
            if state_file.exists():
                state = json.loads(state_file.read_text())
                log = state["log"]
                train_log, val_log = state["train"], state["validation"]
                best["loss"], best["epoch"] = state["best_loss"], state["best_epoch"]
                time_offset = log["time"][-1] if log["time"] else 0.0
            if best_manager.latest_checkpoint and restore_best:
                current = [v.numpy() for v in model.variables]
                best_ckpt.restore(best_manager.latest_checkpoint)
                best["weights"] = [v.numpy() for v in model.variables]
                for v, value in zip(model.variables, current):
                    v.assign(value)

    csv_writer = _CsvLog(csv_log, resume=bool(log["epoch"])) if csv_log is not None else None
    summary = tf.summary.create_file_writer(str(tensorboard_dir)) if tensorboard_dir is not None else None

    steps_per_epoch = max(1, math.ceil(n_train / batch_size))
    total_steps = epochs * steps_per_epoch
    first_epoch = int(epoch_var.numpy())
    stopped = "epochs"
    epoch_seconds = None
    val_batches = None
    if val is not None:
        val_index = (np.arange(val_windows.size) if val_windows is not None
                     else np.arange(val["q"].shape[0]))
        if val_index.size:
            val_batches = distribute(val, val_index)
    since_best = 0 if best["epoch"] < 0 else (first_epoch - 1 - best["epoch"])

    for epoch in range(first_epoch, epochs):
        epoch_start = time.monotonic()
        if time_limit is not None and epoch_seconds is not None and \
                time.monotonic() - start + epoch_seconds > time_limit:
            stopped = "time_limit"
            break
        order = (np.random.default_rng([int(seed), epoch]).permutation(n_train) if shuffle
                 else np.arange(n_train))
        ds = distribute(train, order)
        sums = {k: 0.0 for k in trainer.terms}
        rows = 0.0
        timed_out = False
        for b, batch in enumerate(ds):
            step = epoch * steps_per_epoch + b
            fraction = step / total_steps
            if time_limit is not None:
                fraction = max(fraction, (time.monotonic() - start) / time_limit)
            optimizer.learning_rate = _learning_rate(schedule, learning_rate, fraction,
                                                     final_factor=final_learning_rate, warmup=warmup)
            batch_sums, batch_rows, applied = trainer.train_step(batch)
            if not applied:
                terms = {k: v / max(batch_rows, 1.0) for k, v in batch_sums.items()}
                raise TrainingDivergedError(
                    f"non-finite loss or gradient at epoch {epoch}, batch {b} (terms {terms}); "
                    "the update was not applied and the model keeps the last good weights. "
                    "Check the data for NaN/inf, or lower learning_rate / clipnorm",
                    epoch=epoch, batch=b, terms=terms)
            for k in trainer.terms:
                sums[k] += batch_sums[k]
            rows += batch_rows
            if progress is not None:
                progress(run_done(epoch + (b + 1) / steps_per_epoch), epochs,
                         _message(epoch, train_log, val_log))
            if time_limit is not None and time.monotonic() - start > time_limit:
                timed_out = True
                break
        means = {k: v / max(rows, 1.0) for k, v in sums.items()}
        means["total"] = sum(weights[k] * means[k] for k in trainer.terms)
        for k, v in means.items():
            train_log[k].append(v)
        monitored = means["total"]
        if val_batches is not None:
            val_means = trainer.eval_sums(val_batches)
            for k, v in val_means.items():
                val_log[k].append(v)
            monitored = val_means["total"]
        log["epoch"].append(epoch)
        log["lr"].append(float(np.asarray(optimizer.learning_rate)))
        log["time"].append(time_offset + time.monotonic() - start)
        epoch_var.assign(epoch + 1)
        if math.isfinite(monitored) and monitored < best["loss"] - min_delta:
            best.update(loss=monitored, epoch=epoch, weights=[v.numpy() for v in model.variables])
            since_best = 0
            if best_manager is not None:
                best_manager.save(checkpoint_number=epoch)
        else:
            since_best += 1
        if manager is not None:
            manager.save(checkpoint_number=epoch)
            (checkpoint_dir / "history.json").write_text(json.dumps({
                "log": log, "train": train_log, "validation": val_log,
                "best_loss": best["loss"], "best_epoch": best["epoch"]}))
        row = _row(log, train_log, val_log, -1)
        if csv_writer is not None:
            csv_writer.write(row)
        if summary is not None:
            with summary.as_default():
                for key, value in row.items():
                    if key != "epoch":
                        _scalar_summary(key, value, epoch)
            summary.flush()
        if progress is not None:
            progress(run_done(epoch + 1), epochs, _message(epoch, train_log, val_log))
        # The first epoch of a call includes tracing and XLA compilation (seconds for
        # a large model): it does not predict the next one, which the in-batch check bounds.
        epoch_seconds = time.monotonic() - epoch_start if epoch > first_epoch else None
        stop = False
        for callback in callbacks:
            stop = bool(callback(epoch, row)) or stop
        if timed_out:
            stopped = "time_limit"
            break
        if stop:
            stopped = "callback"
            break
        if patience is not None and since_best >= patience:
            stopped = "early_stopping"
            break

    if restore_best and best["weights"] is not None:
        for v, value in zip(model.variables, best["weights"]):
            v.assign(value)
    if csv_writer is not None:
        csv_writer.close()
    if summary is not None:
        summary.close()
    return History(
        epoch=np.asarray(log["epoch"], dtype=np.int64),
        train={k: np.asarray(v, dtype=np.float64) for k, v in train_log.items()},
        validation={k: np.asarray(v, dtype=np.float64) for k, v in val_log.items()},
        lr=np.asarray(log["lr"], dtype=np.float64),
        time=np.asarray(log["time"], dtype=np.float64),
        best_epoch=int(best["epoch"]),
        best_loss=float(best["loss"]),
        stopped_reason=stopped,
        traces=trainer.traces,
        weights=dict(weights),
    )


def _scalar_summary(tag: str, value: float, step: int) -> None:
    """A TensorBoard scalar written with TensorFlow alone (the tensorboard package is optional)."""
    from tensorflow.core.framework import summary_pb2

    metadata = summary_pb2.SummaryMetadata(data_class=summary_pb2.DATA_CLASS_SCALAR)
    metadata.plugin_data.plugin_name = "scalars"
    tf.summary.write(tag, tf.constant(value, tf.float32), step=step, metadata=metadata)


def _model_dtype(model) -> tf.DType:
    variables = getattr(model, "trainable_variables", None) or getattr(model, "variables", [])
    if variables:
        return tf.as_dtype(variables[0].dtype)
    for attr in ("compute_dtype", "dtype"):
        value = getattr(model, attr, None)
        if isinstance(value, str):
            return tf.as_dtype(value)
    return tf.float32


def _row(log, train_log, val_log, i) -> dict:
    row = {"epoch": int(log["epoch"][i]), "time": float(log["time"][i]), "lr": float(log["lr"][i])}
    row.update({f"train_{k}": float(v[i]) for k, v in train_log.items()})
    row.update({f"val_{k}": float(v[i]) for k, v in val_log.items()})
    return row


def _message(epoch, train_log, val_log) -> str:
    if not train_log.get("total"):
        return f"epoch {epoch + 1}"
    text = f"epoch {epoch + 1} loss {train_log['total'][-1]:.3g}"
    if val_log.get("total"):
        text += f" val {val_log['total'][-1]:.3g}"
    return text


class _CsvLog:
    """Per-epoch CSV rows; refuses to overwrite a file unless resuming (append)."""

    def __init__(self, path, *, resume: bool) -> None:
        self.path = Path(path)
        if self.path.exists() and not resume:
            raise FileExistsError(
                f"refusing to overwrite existing csv_log {str(self.path)!r}; remove it or pass "
                "another path (--force on the command line)"
            )
        if not self.path.parent.exists():
            raise FileNotFoundError(f"directory {str(self.path.parent)!r} of csv_log does not exist")
        self.handle = self.path.open("a" if resume else "w", newline="")
        self.writer = None

    def write(self, row: dict) -> None:
        if self.writer is None:
            self.writer = csv.DictWriter(self.handle, fieldnames=list(row))
            if self.handle.tell() == 0:
                self.writer.writeheader()
        self.writer.writerow(row)
        self.handle.flush()

    def close(self) -> None:
        self.handle.close()
