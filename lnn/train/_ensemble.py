"""Training an ensemble in one compiled step: bootstrap weights and :class:`EnsembleTrainer`.

An ensemble (a model with a ``members`` tuple, :class:`lnn.Ensemble`) is
trained by one train step whose graph holds every member's loss and
gradient side by side (under XLA for the kinds that compile well), one
optimizer over all the members' variables, and one ``tf.data`` pipeline:

- **Bootstrap**: member ``k`` weighs every training sample by how often its
  *unit* was drawn in a bootstrap resample of the units (``Multinomial(U,
  1/U)`` counts, seeded by fit's ``seed`` and ``k``). A unit is a
  trajectory when the training data have at least :data:`MIN_UNITS` of
  them, else one of :data:`MIN_UNITS` contiguous blocks of the samples (one
  long recording). So every member sees the full batch, weighted by its own
  resample (about 37 % of the units weigh zero for a member), which is the
  bootstrap of the trajectories in distribution and costs no second
  pipeline. The weights travel as one more ``(B, K)`` tensor of the batch;
  validation samples weigh one for every member.
- **Loss**: each term is the mean over the members of each member's weighted
  sum (so the reported losses read like one model's); the gradient of each
  member is its own loss's.
- **Clipping**: fit's ``clipnorm`` bounds the global gradient norm of each
  member separately (Keras's optimizer clip would couple the members), and a
  step that is not finite for any member is not applied to any.

After training, :func:`lnn.fit` calibrates the ensemble on its validation
data and, when those are fewer than :data:`MIN_UNITS` recordings, on the
training samples some member never saw too, each against the mean of the
members that never saw it (:meth:`lnn.Ensemble.calibrate`'s out-of-bag
samples): one validation recording is no measure of the next (a real
robot's error varies several-fold from one log to the next).
"""

from __future__ import annotations

from types import SimpleNamespace

import numpy as np
import tensorflow as tf

from lnn.train import _steps
from lnn.train._data import TrainingData
from lnn.train._losses import TERMS, Batch
from lnn.train._steps import _Trainer, use_xla

__all__ = [
    "MIN_UNITS",
    "OUT_OF_BAG_SAMPLES",
    "EnsembleTrainer",
    "bootstrap_weights",
    "build_trainer",
    "calibrate",
    "calibrate_on",
    "is_ensemble",
    "member_weights",
    "weighted",
]

#: Fewer training trajectories than this: the bootstrap resamples this many contiguous blocks instead;
#: fewer validation trajectories than this: the out-of-bag samples join the calibration (:func:`calibrate`).
MIN_UNITS = 10
#: At most this many training samples calibrate an ensemble out of bag (every k-th one): neighbouring
#: samples of a log share a derivative window (a hundred samples or more on a real log) and those of a simulated
#: trajectory a smooth path, so more add time, not information.
OUT_OF_BAG_SAMPLES = 8192


def is_ensemble(model) -> bool:
    """Whether ``model`` is an ensemble (a non-empty ``members`` tuple)."""
    members = getattr(model, "members", None)
    return isinstance(members, tuple) and len(members) > 0


def bootstrap_weights(trajectory: np.ndarray, members: int, *, seed: int, bootstrap: bool = True) -> np.ndarray:
    """Per-sample weights of every member: its bootstrap count of the sample's unit.

    Parameters
    ----------
    trajectory : numpy.ndarray, shape ``(N,)``
        Trajectory id of every training sample, in the data's order.
    members : int
        ``K``.
    seed : int, keyword-only
    bootstrap : bool, keyword-only
        False: every weight is one.

    Returns
    -------
    numpy.ndarray, shape ``(N, K)``, float64
        Member ``k``'s weight of each sample (integers, mean about one).
    """
    n = trajectory.shape[0]
    if not bootstrap:
        return np.ones((n, members))
    ids, units = np.unique(trajectory, return_inverse=True)
    if ids.size < MIN_UNITS:
        units = (np.arange(n) * min(MIN_UNITS, n)) // n
    count = int(units.max()) + 1
    out = np.empty((n, members))
    for k in range(members):
        draws = np.random.default_rng([int(seed), k]).multinomial(count, np.full(count, 1.0 / count))
        out[:, k] = draws[units]
    return out


def member_weights(model, trajectory, *, seed: int) -> np.ndarray:
    """The weights :func:`lnn.fit` gives ``model``'s members on training samples of these trajectory ids.

    Parameters
    ----------
    model : lnn.Ensemble
    trajectory : array_like, shape ``(N,)``
        The trajectory id of every training sample, in the training data's
        order (a dataset given to ``fit`` with a separate ``validation=``).
    seed : int, keyword-only
        ``fit``'s seed.

    Returns
    -------
    numpy.ndarray, shape ``(N, K)``
        Member ``k``'s bootstrap count of each sample; 0 where member ``k``
        never saw it (the sample is *out of bag* for that member), for
        :meth:`lnn.Ensemble.calibrate`'s ``weights``.
    """
    bootstrap = bool(getattr(model, "bootstrap", True))
    return bootstrap_weights(np.asarray(trajectory), len(model.members), seed=seed, bootstrap=bootstrap)


def weighted(data: TrainingData, model, *, seed: int) -> TrainingData:
    """``data`` with the members' bootstrap weights (``"weights"``, ``(N, K)``) beside its training and validation
    arrays."""
    k = len(model.members)
    train = dict(data.train)
    train["weights"] = member_weights(model, train["trajectory"], seed=seed)
    validation = None
    if data.validation is not None:
        validation = dict(data.validation, weights=np.ones((data.validation["q"].shape[0], k)))
    return TrainingData(train, validation, data.n, data.horizon, data.windows, data.val_windows, data.dt)


def build_trainer(model, weights: dict, *, xla: bool | None, clipnorm: float | None, **options) -> EnsembleTrainer:
    """fit's :class:`EnsembleTrainer`: :func:`lnn.train._steps.build_trainer`, with XLA as for one member."""
    xla = use_xla(model.members[0], weights, xla)
    return _steps.build_trainer(model, weights, xla=xla, trainer=EnsembleTrainer, clipnorm=clipnorm, **options)


def calibrate(model, data: TrainingData):
    """Calibrate an ensemble on fit's validation arrays, and on its training samples out of some member's bag
    when the validation data are fewer than :data:`MIN_UNITS` trajectories.

    The out-of-bag samples (:meth:`lnn.Ensemble.calibrate`'s ``training=``)
    are every k-th training sample, :data:`OUT_OF_BAG_SAMPLES` at most. They
    join only a validation set of few recordings, which cannot show how the
    error varies from one recording to the next (identify's one held-out
    log); an out-of-bag sample's error is that of the mean of the members
    that never saw it (about ``0.37 K`` of them), larger than the whole
    mean's where the members' disagreement is most of the error: on the
    default data (26 validation trajectories, noise-free) calibrating on
    them too took the held-out 90 % ``qdd`` cover to 95.8 / 96.1 % and the
    50 % one to 65 % (``benchmarks/bench_ensemble.py --section accuracy``).

    When they join, the validation samples are thinned by the same stride,
    so that every recording weighs by its length: unthinned, one long
    validation log would weigh as much as several training logs, and the
    intervals would follow that one log.
    Returns None without validation data.
    """
    if data.validation is None or not callable(getattr(model, "calibrate", None)):
        return None
    return calibrate_on(model, data.validation, data.train, data.train.get("weights"))


def calibrate_on(model, validation, train, weights):
    """:func:`calibrate` on any arrays: ``validation`` and ``train`` map (or have as attributes) ``q, qd, qdd,
    tau`` ``(N, n)`` and ``trajectory`` ``(N,)``; ``weights`` ``(M, K)`` are the members' bootstrap counts of the
    ``train`` samples (:func:`member_weights`; None: the validation data alone calibrate).

    :func:`lnn.identify` calls it in place of :func:`lnn.fit`'s calibration (``calibrate=False``) with the
    training torques as recorded, each recording's bias kept: fit trains on them less the bias the linear stage
    fitted per recording, and a new recording's bias is unknown, so its error includes it, as the held-out
    recording's does.
    """
    fields = ("q", "qd", "qdd", "tau", "trajectory")

    def field(arrays, name):
        return np.asarray(arrays[name] if isinstance(arrays, dict) else getattr(arrays, name))

    recordings = np.unique(field(validation, "trajectory")).size
    if weights is None or not (np.asarray(weights) == 0).any() or recordings >= MIN_UNITS:
        return model.calibrate(SimpleNamespace(**{k: field(validation, k) for k in fields}))
    weights = np.asarray(weights)
    every = slice(None, None, -(-weights.shape[0] // OUT_OF_BAG_SAMPLES))
    thinned = every if np.arange(field(validation, "q").shape[0])[every].size >= 2 else slice(None)
    held_out = SimpleNamespace(**{k: field(validation, k)[thinned] for k in fields})
    training = SimpleNamespace(**{k: field(train, k)[every] for k in fields})
    return model.calibrate(held_out, training=training, weights=weights[every])


class EnsembleTrainer(_Trainer):
    """The compiled train and evaluation steps of an ensemble (see the module docstring).

    Parameters
    ----------
    model : lnn.Ensemble
    clipnorm : float or None, keyword-only
        Bound of each member's global gradient norm (the optimizer must not clip).
    **options
        Those of :class:`lnn.train._steps._Trainer`; the batches end with the
        weights ``(B, K)``.
    """

    def __init__(self, model, weights, *, clipnorm: float | None, **options) -> None:
        members = model.members
        position = {id(v): i for i, v in enumerate(model.trainable_variables)}
        self.groups = [[position[id(v)] for v in m.trainable_variables] for m in members]
        self.clipnorm = clipnorm
        super().__init__(model, weights, **options)

    def _replica_sums(self, batch, training: bool):
        """Mean over the members of each term's weighted sum over the local batch, and the batch size."""
        *tensors, sample_weights = batch
        members = self.model.members
        per_term = {k: [] for k in self.terms}
        view = None
        for i, member in enumerate(members):
            view = Batch(
                member,
                tensors,
                scales=self.scales,
                training=training,
                horizon=self.horizon,
                dt=self.dt,
                engine=self.engine,
            )
            w = sample_weights[:, i]
            for k in self.terms:
                per_term[k].append(tf.reduce_sum(w * TERMS[k].value(view)))
        sums = {k: tf.add_n(v) / float(len(members)) for k, v in per_term.items()}
        return sums, tf.cast(view.rows, self.dtype)

    def _clipped(self, grads: list) -> list:
        """Each member's gradients clipped to global norm ``clipnorm`` (scaled to its own loss)."""
        grads = [g * float(len(self.groups)) for g in grads]  # the loss is the members' mean
        if self.clipnorm is None:
            return grads
        out = list(grads)
        for group in self.groups:
            clipped, _ = tf.clip_by_global_norm([grads[i] for i in group], self.clipnorm)
            for i, g in zip(group, clipped):
                out[i] = g
        return out
