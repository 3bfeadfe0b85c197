"""Training any dynamics model on trajectory data: :func:`fit` and its :class:`History`.

A model is anything that maps ``(q, qd, tau)`` to ``qdd`` (``model((q, qd,
tau))``): a :class:`lnn.LagrangianNetwork`, or a plain ``keras.Model``
baseline. The torque loss also needs ``model.inverse_dynamics(q, qd, qdd)``,
the power-balance loss ``model.energy(q, qd)``, the rollout loss an
``acceleration`` method (for :func:`lnn.integrate.odeint`).

Losses (each term is reported separately in the history; a ``dict`` of
weights combines them, e.g. ``{"acceleration": 1.0, "energy": 0.1}``; the
registry is :data:`TERMS`, the accepted names :data:`LOSSES`):

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

``"auto"`` (fit's default)
    :func:`default_loss`: the accelerations for unforced data, the torques
    for data with torques (with the accelerations for the structured kind).

What the data identify: on unforced data the acceleration and rollout
losses fix ``L`` only up to a factor (``c L`` has the same accelerations),
and the torque and energy losses are minimised by ``L = 0``; :func:`fit`
trains either way and warns (:class:`IdentifiabilityWarning`).

The budget: ``fit(model, data, time_limit=seconds)`` without ``epochs``
trains until the time limit (the learning-rate schedule spans it); without
either, 100 epochs (:data:`DEFAULT_EPOCHS`); with both, the first reached.

The train step is one ``tf.function`` with a fixed input signature (batch
dimension ``None``), traced once per :func:`fit` call: :attr:`History.traces`
counts its tracings. It differentiates through the model's Hessian (double
backpropagation), clips the global gradient norm, and applies no update when
the loss or a gradient is not finite: :func:`fit` then raises
:class:`TrainingDivergedError` naming the epoch and batch, with the model
holding the last good weights.

``callbacks`` takes plain callables ``callback(epoch, logs) -> stop?`` and
Keras's own ``keras.callbacks.Callback`` objects (``EarlyStopping``,
``CSVLogger``, ``ModelCheckpoint``, ``BackupAndRestore``, ``TerminateOnNaN``).

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
Two workers on one machine give the losses and weights of one process with
the same global batch (``tests/test_multiworker.py``).

Ensembles: ``fit(lnn.Ensemble(n, members=K), data)`` trains the ``K``
members in one compiled step, each on a full batch weighted by its own
bootstrap of the training trajectories (of contiguous blocks when there are
fewer than 10 trajectories), each member's gradient clipped on its own, and
calibrates the ensemble's intervals on the validation data at the end
(``_ensemble``).

The parts, one module each: ``_losses`` (the terms), ``_schedule`` (the
learning rate), ``_steps`` (the compiled steps), ``_data`` (arrays, split,
windows, tf.data), ``_model`` (checks, adapt, build), ``_initialization``,
``_checkpoints`` (resume, best weights), ``_epoch_logs`` (the epochs' CSV and TensorBoard
logs; the robot logs are :mod:`lnn.logs`),
``_callbacks`` (callables and Keras callbacks), ``_clock`` (time limit),
``_loop`` (one epoch), ``_history`` (the results), ``_ensemble`` (an ensemble's step and
bootstrap) and ``_fit`` (the loop).
"""

from lnn.train._ensemble import member_weights
from lnn.train._fit import fit
from lnn.train._history import History, TrainingDivergedError
from lnn.train._identifiability import IdentifiabilityWarning, default_loss
from lnn.train._initialization import cranmer_initialization
from lnn.train._losses import LOSSES, TERMS, LossTerm
from lnn.train._options import DEFAULT_EPOCHS
from lnn.train._schedule import SCHEDULES
from lnn.train._steps import _Trainer  # noqa: F401  (tests and benchmarks build steps directly)

__all__ = [
    "DEFAULT_EPOCHS",
    "LOSSES",
    "SCHEDULES",
    "TERMS",
    "History",
    "IdentifiabilityWarning",
    "LossTerm",
    "TrainingDivergedError",
    "fit",
    "cranmer_initialization",
    "default_loss",
    "member_weights",
]
