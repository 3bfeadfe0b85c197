"""The Keras model of a learned Lagrangian: :class:`LagrangianNetwork`.

It keeps the configuration, the input scaling, saving and the public
mechanics; the structure of ``T``, ``V`` and ``L`` is its *kind*'s
(:mod:`lnn.models.registry`: one module per kind, TensorFlow and numpy side
by side), and it never branches on a kind. Angular coordinates enter the
networks as ``(sin q_i, cos q_i)``, the others as ``(q_i - mean_i) / std_i``,
velocities as ``qd_i / qd_std_i`` (:mod:`lnn.models.features`; scales set by
:meth:`LagrangianNetwork.adapt`, saved with the model). Optional learned
forces join the Lagrangian's (``friction="viscous+coulomb+network"``,
``damping=True``): the registry of :mod:`lnn.models.forces`, used through the
:class:`lnn.models.forces.Force` interface only.

The public methods validate their inputs and run a compiled operation
(:mod:`lnn.models.compiled`: graph mode at once, XLA for recurring batch
sizes compiled off the caller's path, so a new batch size never stalls a
call), through :func:`lnn._runtime.fast_caller` (past TensorFlow's Python
call path when no tape records), and return tensors in the model dtype; on
symbolic tensors (inside a training step) they inline their graph.
"""

from __future__ import annotations

import keras
import numpy as np
import tensorflow as tf

from lnn import _validate, mechanics
from lnn.mechanics import MassMatrixHealth, PowerBalance
from lnn.models import novelty
from lnn.models.activations import ACTIVATIONS
from lnn.models.compiled import CompiledOp
from lnn.models.features import FeatureMap, Features, InputMap
from lnn.models.forces import FORCES, FRICTION_VELOCITY, friction_names
from lnn.models.mlp import MLPLayer, NumpyNet
from lnn.models.registry import KINDS
from lnn.models.support import TrainingBox

__all__ = ["LagrangianNetwork"]


def _angular_flags(angular, n_dof: int) -> tuple[bool, ...]:
    if angular is None or isinstance(angular, (bool, np.bool_)):
        return (bool(angular),) * n_dof
    try:
        flags = tuple(bool(a) for a in angular)
    except TypeError:
        raise TypeError(f"angular must be a bool or {n_dof} bools, got {angular!r}") from None
    if len(flags) != n_dof:
        raise ValueError(f"angular must have n_dof = {n_dof} entries, got {len(flags)}: {angular!r}")
    return flags


def _hidden_widths(hidden) -> tuple[int, ...]:
    if isinstance(hidden, (int, np.integer)):
        raise TypeError(f"hidden must be a tuple of widths, got the integer {hidden!r}")
    widths = tuple(int(h) for h in hidden)
    if not widths or min(widths) < 1:
        raise ValueError(f"hidden must be a non-empty tuple of positive widths, got {hidden!r}")
    return widths


def _check_options(kind, activation, convex, convex_init, epsilon, prior=None, residual=False):
    """The kind class and ``convex_init`` after checking the kind-dependent options."""
    if kind not in KINDS:
        raise ValueError(f"kind must be one of {tuple(KINDS)}, got {kind!r}")
    if prior is not None and not KINDS[kind].takes_prior:
        prior_kinds = [k for k, c in KINDS.items() if c.takes_prior]
        raise ValueError(f"prior= applies to kind {' or '.join(map(repr, prior_kinds))} only, got kind {kind!r}")
    if residual and not KINDS[kind].takes_residual:
        residual_kinds = [k for k, c in KINDS.items() if c.takes_residual]
        raise ValueError(f"residual= applies to kind {' or '.join(map(repr, residual_kinds))} only, got kind {kind!r}")
    if activation not in ACTIVATIONS:
        raise ValueError(f"activation must be one of {sorted(ACTIVATIONS)}, got {activation!r}")
    cls = KINDS[kind]
    if convex and not cls.convex:
        convex_kinds = [k for k, c in KINDS.items() if c.convex]
        raise ValueError(f"convex=True applies to kind {' or '.join(map(repr, convex_kinds))} only, got kind {kind!r}")
    if convex and activation != "softplus":
        raise ValueError(
            f"convex=True needs a convex non-decreasing activation: use activation='softplus', got {activation!r}"
        )
    if convex_init is None:
        convex_init = activation == "softplus"
    if convex_init and activation != "softplus":
        raise ValueError(f"convex_init=True needs a convex activation: use activation='softplus', got {activation!r}")
    if not (float(epsilon) >= 0.0):
        raise ValueError(f"epsilon must be >= 0, got {epsilon!r}")
    return cls, bool(convex_init)


class _PaddedStore:
    """A Keras variable store with ``extra`` values appended (the variables an older file lacks)."""

    def __init__(self, store, extra) -> None:
        self.store, self.extra, self.size = store, list(extra), len(store.keys())

    def keys(self):
        return [str(i) for i in range(self.size + len(self.extra))]

    def __getitem__(self, key):
        i = int(key)
        return self.store[key] if i < self.size else self.extra[i - self.size]


@keras.saving.register_keras_serializable(package="lnn")
class LagrangianNetwork(keras.Model):
    """A learned Lagrangian ``L(q, qd)`` with its mechanics.

    Parameters
    ----------
    n_dof : int
        Number of degrees of freedom ``n``.
    kind : str
        Model structure, a registered kind (:data:`lnn.models.KINDS`):
        ``"structured"`` (the default: ``T = 1/2 qd^T M(q) qd`` with ``M(q) =
        C C^T + eps I`` from a Cholesky MLP, and a potential MLP ``V(q)``;
        ``M`` is positive definite at every state by construction),
        ``"kinetic-potential"`` (``T(q, qd)`` and ``V(q)`` MLPs, the LNN
        paper's generality: any kinetic energy, ``M`` positive definite only
        where training made it so), ``"black-box"`` (one MLP ``L``),
        ``"rigid-body"`` (a rigid-body chain with trainable inertias, with
        ``prior``), or one you register (:func:`lnn.models.register_kind`).
        The default was chosen by experiment (``benchmarks/bench_defaults.py``;
        the double pendulum, the planar arm and the cart-pole, whose kinetic
        energy is quadratic in ``qd`` like every mechanical system's):
        ``"structured"`` learns them 10x more accurately in the same time.
    hidden : tuple of int
        Hidden widths of every MLP.
    activation : {"softplus", "tanh", "sigmoid", "swish"}
        Smooth hidden activation (``convex=True`` requires ``"softplus"``).
    angular : bool or tuple of bool, length ``n_dof``, optional
        Which coordinates are angles (fed as ``sin, cos``); one bool applies
        to all. Default: none.
    damping : bool
        Learn a constant positive-definite viscous damping ``D``; the
        generalized force ``-D qd`` is added to ``tau`` (short for the
        ``"damping"`` term of ``friction``).
    friction : str, optional
        Learned forces added to ``tau``, registered names joined by ``+``
        (:mod:`lnn.models.forces`): ``"viscous+coulomb"`` (``-b qd - c
        tanh(qd / v0)``, ``b, c >= 0``), ``"viscous"``, ``"coulomb"``,
        ``"offset"`` (a constant torque bias ``-o``), ``"network"`` (a
        learned passive friction ``-g(q, qd) tanh(qd / v0)``, ``g >= 0``:
        Stribeck, asymmetric, position-dependent), ``"joint_network"`` (the
        same with each joint's level a function of its own ``q_j, qd_j``
        only: one small MLP per joint), ``"damping"``, or None (default).
    friction_velocity : float
        The smoothing velocity ``v0 > 0`` of the Coulomb and network terms (rad/s or m/s).
    convex : bool
        Input-convex kinetic MLP (kinds that allow it: ``"kinetic-potential"``).
    epsilon : float
        The ``epsilon I`` added to ``M`` by the structured and convex models.
    prior : optional
        The rigid body of kind ``"rigid-body"``: a
        :class:`lnn.models.chain.RigidBodyChain`, a ``simulations.URDFRobot``
        or a ``simulations.PlanarArm`` (:mod:`lnn.models.rigid_body`).
    residual : bool
        Kinds ``"rigid-body"`` and ``"trigonometric"``: add a structured residual Lagrangian network.
    harmonics : {1, 2}, optional
        Kind ``"trigonometric"``: the harmonics of the angles in its basis
        (default :func:`lnn.models.trigonometric.choose_basis`).
    dtype : {"float32", "float64"}
        Weights, computations and outputs.
    seed : int, optional
        Seed of the initial weights.
    convex_init : bool, optional
        Initialise the kinetic (or black-box) MLP convex in ``qd``:
        non-negative kernels after the first layer, unconstrained during
        training, so that ``M`` is positive definite at initialisation (an
        unconstrained random ``T`` is indefinite at some states, and a batch
        containing one gives NaN accelerations). Needs
        ``activation="softplus"``. Default (None): on exactly when the
        activation is softplus.
    xla : bool
        Let the eager mass-matrix, acceleration, inverse-dynamics and
        Jacobian calls run under XLA once their (padded) batch size recurs,
        compiled in the background (:mod:`lnn.models.compiled`): the fastest
        path measured, with no compilation on the caller's path.
        ``model(...)`` inside a training step is never forced to XLA.
    name : str, optional
        Keras model name.

    Attributes
    ----------
    n_dof, angular, kind, dtype
        As given (``angular`` as a tuple of ``n_dof`` bools).
    """

    def __init__(
        self,
        n_dof: int,
        *,
        kind: str = "structured",
        hidden=(128, 128),
        activation: str = "softplus",
        angular=None,
        damping: bool = False,
        friction: str | None = None,
        friction_velocity: float = FRICTION_VELOCITY,
        convex: bool = False,
        epsilon: float = 1e-4,
        dtype: str = "float32",
        seed: int | None = None,
        convex_init: bool | None = None,
        xla: bool = True,
        prior=None,
        residual: bool = False,
        harmonics: int | None = None,
        name: str | None = None,
        **kwargs,
    ) -> None:
        n_dof = _validate.positive("n_dof", n_dof, integer=True)
        kind_cls, convex_init = _check_options(kind, activation, convex, convex_init, epsilon, prior, residual)
        if harmonics is not None and not kind_cls.takes_harmonics:
            harmonic_kinds = [k for k, c in KINDS.items() if c.takes_harmonics]
            raise ValueError(f"harmonics= applies to kind {' or '.join(map(repr, harmonic_kinds))} only, got {kind!r}")
        hidden = _hidden_widths(hidden)
        angular = _angular_flags(angular, n_dof)
        force_terms = friction_names(friction)
        if damping:  # short for the "damping" term
            force_terms = friction_names("+".join(("damping",) + force_terms))
        friction_velocity = _validate.positive("friction_velocity", friction_velocity)
        dtype = _validate.float_dtype(dtype)
        super().__init__(name=name, dtype=dtype, **kwargs)
        self.n_dof, self.kind, self.hidden = n_dof, kind, hidden
        self.activation_name, self._angular = activation, angular
        # The configuration keeps damping=True for the "damping" term and friction= for the
        # others: the form of the configurations that saved models carry.
        self.damping, self.convex = "damping" in force_terms, bool(convex)
        self.friction_terms = "+".join(t for t in force_terms if t != "damping") or None
        self.friction_velocity = float(friction_velocity)
        self.epsilon, self.seed, self.xla = float(epsilon), seed, bool(xla)
        self.convex_init = convex_init
        self._np_dtype, self._tf_dtype = np.dtype(dtype), tf.as_dtype(dtype)
        # Plain Python attributes (not tracked by Keras: no weights of their own).
        object.__setattr__(self, "input_map", InputMap.from_angular(angular, dtype))
        object.__setattr__(self, "_functions", {})

        def stat(name, value):
            var = self.add_weight(name=name, shape=(n_dof,), initializer="zeros", dtype=dtype, trainable=False)
            var.assign(np.full(n_dof, value, dtype=dtype))
            return var

        self.q_mean, self.q_std = stat("q_mean", 0.0), stat("q_std", 1.0)
        self.qd_std, self.qdd_std = stat("qd_std", 1.0), stat("qdd_std", 1.0)
        object.__setattr__(self, "kind_model", kind_cls(self))
        seeds = np.random.SeedSequence(seed).generate_state(4)
        self.kind_model.build(
            n_features=self.input_map.n_features,
            seeds=seeds,
            options=dict(
                hidden=hidden,
                activation=activation,
                dtype=dtype,
                convex=self.convex,
                convex_init=convex_init,
                epsilon=self.epsilon,
                prior=prior,
                residual=bool(residual),
                harmonics=harmonics,
            ),
        )
        object.__setattr__(self, "forces", tuple(FORCES[name](self) for name in force_terms))
        self._add_novelty_weights()
        self._add_box_weights()
        self.built = True

    # -- configuration -------------------------------------------------------------
    @property
    def angular(self) -> tuple[bool, ...]:
        """Which coordinates are angles, length ``n_dof``."""
        return self._angular

    @property
    def numpy_dtype(self) -> np.dtype:
        """The model dtype as a numpy dtype."""
        return self._np_dtype

    def get_config(self) -> dict:
        """Constructor arguments (Keras serialisation)."""
        return dict(
            **self.kind_model.config(),
            n_dof=self.n_dof,
            kind=self.kind,
            hidden=list(self.hidden),
            activation=self.activation_name,
            angular=list(self._angular),
            damping=self.damping,
            friction=self.friction_terms,
            friction_velocity=self.friction_velocity,
            convex=self.convex,
            epsilon=self.epsilon,
            dtype=self.dtype,
            seed=self.seed,
            convex_init=self.convex_init,
            xla=self.xla,
            name=self.name,
        )

    @classmethod
    def from_config(cls, config: dict) -> LagrangianNetwork:
        """Rebuild from :meth:`get_config`."""
        config = dict(config)
        dtype = config.pop("dtype", "float32")
        if isinstance(dtype, dict):  # a serialised DTypePolicy
            dtype = keras.dtype_policies.deserialize(dtype).name
        return cls(config.pop("n_dof"), dtype=dtype, **config)

    def feature_map(self) -> FeatureMap:
        """The input map of the networks as numpy arrays (see :class:`lnn.models.FeatureMap`)."""
        return self.input_map.feature_map(np.asarray(self.q_mean), np.asarray(self.q_std), np.asarray(self.qd_std))

    def mlp_layers(self) -> dict[str, list[MLPLayer]]:
        """Effective layers of every network, for re-implementations.

        Returns
        -------
        dict
            Network name -> list of :class:`lnn.models.mlp.MLPLayer`: for the
            built-in kinds ``{"kinetic", "potential"}`` (kinetic-potential),
            ``{"lagrangian"}`` (black-box) or ``{"cholesky", "potential"}``
            (structured). The first kernel stacks the rows for the features
            ``x`` (``F`` rows) over those for ``qd / qd_scale`` (``n`` rows,
            kinetic and black-box). The cholesky network outputs ``n`` raw
            diagonal entries (through softplus) then the strictly lower
            entries in ``numpy.tril_indices(n, -1)`` order.
        """
        return {net.name: net.layers() for net in self.kind_model.nets()}

    def damping_matrix(self):
        """The learned viscous matrix ``D``, shape ``(n, n)``: the sum of the forces that are exactly ``-D_k qd``.

        ``D`` of ``damping=True`` plus ``diag(b)`` of ``"viscous"``
        (:meth:`lnn.models.forces.Force.damping_matrix`); zeros without any.
        The other forces (Coulomb, offset, network) are not in it.
        """
        total = tf.zeros((self.n_dof, self.n_dof), self.dtype)
        for term in self.forces:
            matrix = term.damping_matrix()
            if matrix is not None:
                total = total + matrix
        return total

    @property
    def damping_force(self):
        """Deprecated: the ``"damping"`` force term (:class:`lnn.models.forces.damping.Damping`), or None.

        Use :meth:`damping_matrix` (``D``) or ``model.forces``.
        """
        import warnings

        warnings.warn(
            "LagrangianNetwork.damping_force is deprecated: use damping_matrix() or model.forces",
            DeprecationWarning,
            stacklevel=2,
        )
        return next((term for term in self.forces if term.name == "damping"), None)

    # -- input scaling ---------------------------------------------------------------
    def adapt(self, q, qd, qdd=None) -> None:
        """Set the input scaling from data (non-trainable weights, saved with the model).

        Also stores the summary of the training states that :meth:`novelty`
        measures from, and their per-coordinate range that learned forces
        read their state clipped to (:meth:`training_box`).

        Parameters
        ----------
        q, qd : array_like, shape ``(N, n)``
            Sample states: the mean and standard deviation of the non-angular
            ``q`` and the root mean square of ``qd`` (about 0) are stored
            (:func:`lnn._validate.spread`).
        qdd : array_like, shape ``(N, n)``, optional
            Sample accelerations: their root mean square is stored as
            ``model.qdd_std`` for loss normalisation (not used by the model).
        """
        pairs = [("q", q), ("qd", qd)] + ([("qdd", qdd)] if qdd is not None else [])
        for name, x in pairs:
            if np.ndim(x) != 2:
                raise ValueError(f"{name} must have shape (N, {self.n_dof}), got shape {np.shape(x)}")
        arrays, _ = _validate.states(pairs, self.n_dof)
        if len(arrays[0]) < 2:
            raise ValueError(f"adapt needs at least 2 samples, q has {len(arrays[0])}")
        q_arr, qd_arr = arrays[0], arrays[1]
        mean = np.where(self._angular, 0.0, q_arr.mean(axis=0))
        std = np.where(self._angular, 1.0, _validate.spread(q_arr))
        self.q_mean.assign(mean.astype(self._np_dtype))
        self.q_std.assign(std.astype(self._np_dtype))
        self.qd_std.assign(_validate.spread(qd_arr, center=False).astype(self._np_dtype))
        if qdd is not None:
            self.qdd_std.assign(_validate.spread(arrays[2], center=False).astype(self._np_dtype))
        self._store_novelty_reference(q_arr, qd_arr)
        box = TrainingBox.of(q_arr, qd_arr, angular=self._angular)
        for var, values in zip(self._box_weights(), (box.q_low, box.q_high, box.qd_low, box.qd_high)):
            var.assign(self._stored_bound(values))

    # -- the training states' box (lnn.models.support): where learned forces are trusted ----------
    def _add_box_weights(self) -> None:
        """``q_low, q_high, qd_low, qd_high`` (non-trainable, saved; the model's last variables), unbounded.

        An unbounded side is stored as the dtype's largest finite number (a model's weights stay finite) and
        read back as infinite (:meth:`training_box`).
        """

        unbounded = TrainingBox.unbounded(self.n_dof)

        def bound(name):
            var = self.add_weight(
                name=name, shape=(self.n_dof,), initializer="zeros", dtype=self.dtype, trainable=False
            )
            var.assign(self._stored_bound(getattr(unbounded, name)))
            return var

        self.q_low, self.q_high = bound("q_low"), bound("q_high")
        self.qd_low, self.qd_high = bound("qd_low"), bound("qd_high")

    def _box_weights(self) -> tuple:
        """The four variables of the box, in :class:`TrainingBox` field order."""
        return self.q_low, self.q_high, self.qd_low, self.qd_high

    def _stored_bound(self, values) -> np.ndarray:
        """Bounds as stored: infinite ones as the largest finite number of the model's dtype."""
        largest = np.finfo(self._np_dtype).max
        return np.clip(np.asarray(values, np.float64), -largest, largest).astype(self._np_dtype)

    def training_box(self) -> TrainingBox:
        """The per-coordinate range of the training states (:class:`lnn.models.support.TrainingBox`), float64.

        Set by :meth:`adapt`; unbounded before. Learned forces read their
        state clipped to it.
        """
        largest = np.finfo(self._np_dtype).max
        bounds = [np.asarray(v.numpy(), np.float64) for v in self._box_weights()]
        bounds = [np.where(np.abs(b) >= largest, np.sign(b) * np.inf, b) for b in bounds]
        return TrainingBox(q_low=bounds[0], q_high=bounds[1], qd_low=bounds[2], qd_high=bounds[3])

    def box_q(self, q):
        """``q (B, n)`` clipped to the training states' range, coordinate by coordinate (a tensor).

        What a learned force reads: beyond the training states it holds its
        value at the nearest edge (:mod:`lnn.models.support`).
        """
        return tf.clip_by_value(q, tf.cast(self.q_low, q.dtype), tf.cast(self.q_high, q.dtype))

    def box_qd(self, qd):
        """``qd (B, n)`` clipped to the training states' range, coordinate by coordinate (a tensor)."""
        return tf.clip_by_value(qd, tf.cast(self.qd_low, qd.dtype), tf.cast(self.qd_high, qd.dtype))

    # -- novelty: the distance to the training states (lnn.models.novelty) --------------
    def _add_novelty_weights(self) -> None:
        """The stored summary of the training states (non-trainable, saved; the model's last variables)."""
        width = self.input_map.n_features + self.n_dof
        dtype = self.dtype
        self.novelty_points = self.add_weight(
            name="novelty_points",
            shape=(novelty.REFERENCE_SIZE, width),
            initializer="zeros",
            dtype=dtype,
            trainable=False,
        )
        self.novelty_size = self.add_weight(
            name="novelty_size", shape=(), initializer="zeros", dtype=dtype, trainable=False
        )
        self.novelty_scale = self.add_weight(
            name="novelty_scale", shape=(), initializer="ones", dtype=dtype, trainable=False
        )

    def _store_novelty_reference(self, q, qd) -> None:
        """Summarise the training states ``q, qd (N, n)`` for :meth:`novelty` (called by :meth:`adapt`)."""
        reference = novelty.build_reference(novelty.features(self.feature_map(), q, qd), seed=0)
        points = np.zeros(tuple(self.novelty_points.shape), self._np_dtype)
        points[: reference.points.shape[0]] = reference.points
        self.novelty_points.assign(points)
        self.novelty_size.assign(np.asarray(reference.points.shape[0], self._np_dtype))
        self.novelty_scale.assign(np.asarray(reference.scale, self._np_dtype))

    def novelty_reference(self):
        """The stored summary of the training states (:class:`lnn.models.novelty.NoveltyReference`), or None.

        None before :meth:`adapt` (which :func:`lnn.fit` calls) has seen data.
        """
        size = int(round(float(self.novelty_size.numpy())))
        if size < 1:
            return None
        points = np.asarray(self.novelty_points.numpy()[:size], np.float64)
        return novelty.NoveltyReference(points=points, scale=float(self.novelty_scale.numpy()))

    def novelty(self, q, qd) -> np.ndarray:
        """How far states lie from the training states: 1.0 is the training data's 99th percentile.

        The distance, in the networks' input features (``sin q, cos q`` of the
        angles, standardised other coordinates, ``qd / qd_std``), to the 5th
        nearest of up to 2048 training states stored by :meth:`adapt`,
        divided by the 99th percentile of the same distance for training
        states (:mod:`lnn.models.novelty`). Predictions at ``novelty > 1``
        are extrapolations; :func:`lnn.rollout` records when a trajectory
        first gets there (``Trajectory.novel_at``).

        Parameters
        ----------
        q, qd : array_like, shape ``(B, n)`` or ``(n,)``

        Returns
        -------
        numpy.ndarray, shape ``(B,)`` (a float for a single state), float64
            NaN for a model that has not seen data (:meth:`adapt`) and for
            non-finite states.
        """
        single = np.ndim(q) == 1
        q_arr = np.atleast_2d(np.asarray(q, np.float64))
        qd_arr = np.atleast_2d(np.asarray(qd, np.float64))
        for name, x in (("q", q_arr), ("qd", qd_arr)):
            if x.ndim != 2 or x.shape[-1] != self.n_dof:
                raise ValueError(f"{name} must have shape (B, {self.n_dof}) or ({self.n_dof},), got {np.shape(x)}")
        if q_arr.shape != qd_arr.shape:
            raise ValueError(f"q and qd must have the same shape, got {q_arr.shape} and {qd_arr.shape}")
        reference = self.novelty_reference()
        if reference is None:
            out = np.full(q_arr.shape[0], np.nan)
        else:
            out = reference.novelty(novelty.features(self.feature_map(), q_arr, qd_arr))
        return float(out[0]) if single else out

    def load_own_variables(self, store) -> None:
        """Keras loading; a file saved before the training box (or before the novelty summary too) loads
        with an unbounded box (and novelty NaN): the variables it lacks are the model's last ones."""
        late = [self.novelty_points, self.novelty_size, self.novelty_scale, *self._box_weights()]
        for missing in (0, 4, len(late)):
            try:
                padded = _PaddedStore(store, [v.numpy() for v in late[len(late) - missing :]])
                super().load_own_variables(padded if missing else store)
                return
            except ValueError:
                if missing == len(late):
                    raise

    # -- graph mathematics (tensors in, tensors out) ------------------------------------
    def features(self, q) -> Features:
        """The networks' features of ``q (B, n)`` (tensors; see :mod:`lnn.models.features`)."""
        return Features.of(self.input_map, q, self.q_mean, self.q_std)

    def _kinetic(self, q, qd):
        return self.kind_model.kinetic(q, qd)

    def _potential(self, q):
        return self.kind_model.potential(q)

    def _lagrangian(self, q, qd):
        return self.kind_model.lagrangian(q, qd)

    def _euler_lagrange(self, q, qd):
        """``(M, dL/dq - (d2L/dqd dq) qd)`` of ``M qdd = rhs + tau`` (without forces)."""
        t = self.kind_model.terms(q, qd, hessian=True, mixed=True, grad_q=True)
        return t.mass, t.grad_q - t.mixed

    def _force_graph(self, q, qd):
        """The sum of the learned forces ``f(q, qd)`` (B, n), or None without any."""
        total = None
        for term in self.forces:
            f = term.force(q, qd)
            total = f if total is None else total + f
        return total

    def _require_q(self, q) -> None:
        """Raise when ``q`` is None and a force depends on ``q``."""
        if q is None:
            needs = [term.name for term in self.forces if term.needs_q]
            if needs:
                raise ValueError(
                    f"the force(s) {', '.join(map(repr, needs))} of this model depend on q: "
                    "pass the positions too, friction(qd, q=q); got q=None"
                )

    def _friction_force(self, qd, q=None):
        """The learned forces beside the Lagrangian (damping, friction, offset, network); zeros without.

        ``q`` may be omitted when no force depends on it (else ValueError).
        """
        self._require_q(q)
        total = self._force_graph(tf.zeros_like(qd) if q is None else q, qd)
        return tf.zeros_like(qd) if total is None else total

    def friction_parameters(self) -> dict:
        """The learned force terms' parameters: name -> numpy array (e.g. ``"viscous": b (n,)``)."""
        out = {}
        for term in self.forces:
            out.update(term.parameters())
        return out

    def _generalized_force(self, q, qd, tau):
        force = self._force_graph(q, qd)
        if force is None:
            return tau
        return force if tau is None else tau + force

    def _linear_system(self, q, qd, tau=None):
        """``(M, rhs)`` of the Euler-Lagrange equations ``M qdd = rhs``."""
        mass, rhs = self._euler_lagrange(q, qd)
        force = self._generalized_force(q, qd, tau)
        return mass, rhs if force is None else rhs + force

    def _acceleration_graph(self, q, qd, tau=None, regularize=None):
        return mechanics.solve_cholesky(*self._linear_system(q, qd, tau), regularize)

    def _acceleration_by_tapes(self, q, qd, tau=None):
        """Accelerations whose ``M``, ``dL/dq`` and mixed term come from nested tapes.

        The generic engine of :mod:`lnn.mechanics` applied to the kind's
        energies, instead of its closed form (equal to rounding): a check of
        the closed form's weight gradients. Not for XLA training steps: an XLA
        train step built on it was recompiled after every weight update
        (0.6-0.9 s a step; ``tests/test_train.py`` counts the compilations).
        """
        force = self._generalized_force(q, qd, tau)
        force = tf.zeros_like(q) if force is None else force
        return mechanics._acceleration_body(self.kind_model.tape_lagrangian(), q, qd, force, "reverse", None)

    def _inverse_dynamics_graph(self, q, qd, qdd):
        tau = self.kind_model.inverse_dynamics(q, qd, qdd)
        force = self._force_graph(q, qd)
        return tau if force is None else tau - force

    def _mass_matrix_graph(self, q, qd):
        return self.kind_model.mass_matrix(q, qd)

    def _energy_graph(self, q, qd):
        return self.kind_model.energy(q, qd)

    def _jacobian_graph(self, q, qd, tau=None):
        state = tf.concat([q, qd], axis=1)
        n = self.n_dof
        with tf.GradientTape() as tape:
            tape.watch(state)
            qdd = self._acceleration_graph(state[:, :n], state[:, n:], tau)
        return tape.batch_jacobian(qdd, state)

    def numpy_mechanics(self):
        """The kind's numpy twin of the current weights (:class:`lnn.models.NumpyKind`), or None."""
        inputs = self.input_map
        s, offset = inputs.affine_np(np.asarray(self.q_mean), np.asarray(self.q_std))
        qd_scale = np.asarray(self.qd_std, np.float64)

        def fold(net):
            return NumpyNet.fold(net.layers(), inputs.n_features, s, offset, qd_scale, self._np_dtype)

        return self.kind_model.numpy(fold)

    # -- compiled dispatch ---------------------------------------------------------------
    #: op -> (graph method, number of (B, n) inputs, XLA form allowed).
    _OPS = {
        "lagrangian": ("_lagrangian", 2, False),
        "kinetic_energy": ("_kinetic", 2, False),
        "potential_energy": ("_potential", 1, False),
        "mass_matrix": ("_mass_matrix_graph", 2, True),
        "acceleration": ("_acceleration_graph", 3, True),
        "acceleration_free": ("_acceleration_graph", 2, True),
        "inverse_dynamics": ("_inverse_dynamics_graph", 3, True),
        "energy": ("_energy_graph", 2, False),
        "acceleration_jacobian": ("_jacobian_graph", 2, True),
        "acceleration_jacobian_tau": ("_jacobian_graph", 3, True),
    }

    def _compiled_op(self, op: str, regularize=None) -> CompiledOp:
        """The :class:`lnn.models.compiled.CompiledOp` of ``op`` for packed ``(B, k n)`` inputs."""
        key = (op, regularize)
        fn = self._functions.get(key)
        if fn is not None:
            return fn
        method, n_args, xla = self._OPS[op]
        graph = getattr(self, method)
        n = self.n_dof
        if op.startswith("acceleration_jacobian"):
            xla = xla and self.kind_model.xla_jacobian
        elif op.startswith("acceleration"):

            def graph(q, qd, tau=None):
                return mechanics.solve_cholesky(*self._linear_system(q, qd, tau), regularize)

        def body(x):  # one packed input, split here (mechanics.pack_columns)
            return graph(*[x[:, i * n : (i + 1) * n] for i in range(n_args)])

        xla_body = None
        if (
            xla
            and op.startswith("acceleration")
            and not op.startswith("acceleration_jacobian")
            and n > mechanics.UNROLLED_CHOLESKY_MAX_N
        ):
            # XLA's CPU Cholesky is slow: the linear system under XLA, TensorFlow's Cholesky outside.
            system = tf.function(self._linear_system, jit_compile=True, autograph=False)

            def xla_body(x):
                parts = [x[:, i * n : (i + 1) * n] for i in range(n_args)]
                return mechanics.solve_cholesky(*system(*parts), regularize)

        fn = CompiledOp(
            body, width=n_args * n, dtype=self._tf_dtype, xla=self.xla and xla, xla_body=xla_body, name=str(op)
        )
        self._functions[key] = fn
        return fn

    def tracing_count(self, op: str) -> int:
        """Number of traces of the compiled ``op`` (0 before its first call, 1 after).

        Parameters
        ----------
        op : str
            One of ``"lagrangian"``, ``"kinetic_energy"``, ``"potential_energy"``,
            ``"mass_matrix"``, ``"acceleration"``, ``"acceleration_free"``
            (without ``tau``), ``"inverse_dynamics"``, ``"energy"``,
            ``"acceleration_jacobian"``, ``"acceleration_jacobian_tau"``, ``"gravity"``,
            ``"coriolis"``, ``"friction_torque"``, ``"friction_torque_state"`` (with ``q=``).
        """
        if op not in self._OPS:
            raise ValueError(f"op must be one of {sorted(self._OPS)}, got {op!r}")
        fn = self._functions.get((op, None))
        return 0 if fn is None else fn.tracing_count()

    def compiled_ops(self) -> dict:
        """The compiled operations built so far: ``(op, regularize) -> CompiledOp`` (a copy)."""
        return dict(self._functions)

    def _prepare(self, *pairs):
        return mechanics._inputs(pairs, self._tf_dtype, n=self.n_dof)

    def _dispatch(self, op, graph, names, *values):
        """Check ``values``; inline ``graph(*args)`` on symbolic tensors, else run compiled ``op``.

        The compiled functions take the inputs side by side in one ``(B, k n)``
        tensor (one conversion and one bound input per call instead of ``k``).
        ``names`` (one per value) word the errors of the full checks.
        """
        x = mechanics.packed_plain(values, self._np_dtype, self._tf_dtype, self.n_dof)
        if x is not None:  # finite (B, n) batches of the model's dtype: the hot path
            return self._compiled_op(op)(x)
        args, single, _ = self._prepare(*zip(names, values))
        if mechanics._is_symbolic(args[0]):
            return graph(*args)
        out = self._compiled_op(op)(mechanics.pack_columns(args, self._tf_dtype))
        return mechanics._unbatch(out, single)

    # -- public mechanics ---------------------------------------------------------------
    def lagrangian(self, q, qd):
        """Lagrangian ``L``.

        Parameters
        ----------
        q, qd : array_like or tensor, shape ``(B, n)`` or ``(n,)``

        Returns
        -------
        tensor, shape ``(B,)`` (scalar for a single state)
        """
        return self._dispatch("lagrangian", self._lagrangian, ("q", "qd"), q, qd)

    def kinetic_energy(self, q, qd):
        """Kinetic energy ``T``.

        Parameters
        ----------
        q, qd : array_like or tensor, shape ``(B, n)`` or ``(n,)``

        Returns
        -------
        tensor, shape ``(B,)`` (scalar for a single state)
        """
        return self._dispatch("kinetic_energy", self._kinetic, ("q", "qd"), q, qd)

    def potential_energy(self, q):
        """Potential energy ``V``.

        Parameters
        ----------
        q : array_like or tensor, shape ``(B, n)`` or ``(n,)``

        Returns
        -------
        tensor, shape ``(B,)`` (scalar for a single state)
        """
        return self._dispatch("potential_energy", self._potential, ("q",), q)

    def mass_matrix(self, q, qd=None):
        """Mass matrix ``M = d2T/dqd2`` (closed form).

        Parameters
        ----------
        q : array_like or tensor, shape ``(B, n)`` or ``(n,)``
        qd : array_like or tensor, same shape, optional
            Needed unless the kind's ``M`` depends on ``q`` only
            (``"structured"``); default zeros.

        Returns
        -------
        tensor, shape ``(B, n, n)`` (``(n, n)`` for a single state)
        """
        x = mechanics.packed_plain((q, qd), self._np_dtype, self._tf_dtype, self.n_dof)
        if x is not None:  # the hot path of scripts and integrators, as in _dispatch
            return self._compiled_op("mass_matrix")(x)
        if qd is None:
            qd = tf.zeros_like(q) if isinstance(q, tf.Tensor) else np.zeros_like(np.asarray(q, float))
        return self._dispatch("mass_matrix", self._mass_matrix_graph, ("q", "qd"), q, qd)

    def acceleration(self, q, qd, tau=None, *, regularize: float | None = None):
        """Forward dynamics ``qdd = M^{-1} (dL/dq - (d2L/dqd dq) qd + tau + f(q, qd))``, ``f`` the learned forces.

        Parameters
        ----------
        q, qd : array_like or tensor, shape ``(B, n)`` or ``(n,)``
        tau : array_like or tensor, same shape, optional
            Generalized forces (default zero).
        regularize : float, optional
            Solve with ``M + regularize I`` (explicit, caller-chosen). Default:
            none; a mass matrix that is not positive definite raises.

        Returns
        -------
        tensor, shape ``(B, n)`` (``(n,)`` for a single state)

        Raises
        ------
        lnn.mechanics.MassMatrixError
            (a ``ValueError``) naming how many samples have a mass matrix that is
            not positive definite and the smallest eigenvalue.
        """
        # The hot path of integrators and scripts, written out (no closures): see _dispatch.
        x = mechanics.packed_plain((q, qd) if tau is None else (q, qd, tau), self._np_dtype, self._tf_dtype, self.n_dof)
        op = "acceleration_free" if tau is None else "acceleration"
        shift = None if regularize is None else float(regularize)
        single = False
        if x is not None:
            try:
                qdd = self._compiled_op(op, shift)(x)
                if mechanics._all_finite(qdd.numpy()):
                    return qdd
            except tf.errors.InvalidArgumentError as exc:
                if "cholesky" not in str(exc).lower():  # not a refused M: nothing to explain, nothing to retry
                    raise
                # TensorFlow's Cholesky (large n) refused M: say which samples and how (no second solve)
                mass = self._compiled_op("mass_matrix")(x[:, : 2 * self.n_dof])
                raise mechanics.not_positive_definite_error(mass, shift) from None
            packed = mechanics._make_eager(x, self._tf_dtype)
        else:
            pairs = (("q", q), ("qd", qd)) + ((("tau", tau),) if tau is not None else ())
            args, single, _ = self._prepare(*pairs)
            if mechanics._is_symbolic(args[0]):
                return self._acceleration_graph(*args, regularize=regularize)
            packed = mechanics.pack_columns(args, self._tf_dtype)
        # The full call: a failed Cholesky or a non-finite result is explained (raises).
        n2 = 2 * self.n_dof
        qdd = mechanics.call_checked(
            self._compiled_op(op, shift), (packed,), lambda: self._compiled_op("mass_matrix")(packed[:, :n2]), shift
        )
        return qdd[0] if single else qdd

    # -- fast numpy inference (lnn.fast) ----------------------------------------------------
    @property
    def numpy_acceleration(self):
        """:meth:`acceleration` in numpy, ``f(q, qd, tau=None) -> ndarray`` (the integrator's hot path).

        Looking the attribute up takes a numpy snapshot of the current weights
        (:class:`lnn.fast.FastLagrangian`: the closed-form derivatives of the
        built-in networks, equal to :meth:`acceleration` to rounding), so a
        call costs tens of microseconds instead of a ``tf.function`` dispatch.
        Keep the returned function for repeated calls (``lnn.rollout`` does)
        and look it up again after the weights change.

        Returns
        -------
        callable
            ``f(q, qd, tau=None)`` with ``q, qd, tau`` of shape ``(B, n)`` or
            ``(n,)``, returning a numpy array of the same shape in the model
            dtype; it raises :class:`lnn.fast.IndefiniteMassMatrixError` (a
            ``ValueError`` listing the ``trajectories``) where ``M`` is not
            positive definite.
        """
        return self.numpy_snapshot().acceleration

    def export(self, path, *, force: bool = False, xla: bool = False):
        """Write a TensorFlow SavedModel a controller calls without ``lnn`` (:func:`lnn.export.export_savedmodel`).

        Serving signatures ``inverse_dynamics(q, qd, qdd) -> tau``,
        ``acceleration(q, qd, tau) -> qdd`` and ``mass_matrix(q) -> M`` (inputs
        ``(B, n)`` with ``B`` free, the model's dtype), the learned forces
        included. This replaces ``keras.Model.export``, whose signature is the
        Keras ``call``.

        Parameters
        ----------
        path : str or os.PathLike
            The SavedModel directory.
        force : bool, keyword-only
            Replace ``path`` if it exists (else ``FileExistsError``).
        xla : bool, keyword-only
            Signature functions marked ``jit_compile=True`` (compiled by the
            loading runtime at their first call per batch size; faster calls,
            ``docs/how-to/export.md``).

        Returns
        -------
        lnn.export.ExportedModel
        """
        from lnn.export import export_savedmodel

        return export_savedmodel(self, path, force=force, xla=xla)

    def numpy_snapshot(self):
        """A numpy snapshot of the current weights (:class:`lnn.fast.FastLagrangian`).

        It evaluates ``acceleration``, ``inverse_dynamics``, ``mass_matrix``
        and ``energy`` in numpy (equal to the TensorFlow path to rounding) and
        does not see later changes of the weights. ``lnn.rollout`` takes one
        per rollout for the solver's right-hand side and the energies at the
        samples.

        Returns
        -------
        lnn.fast.FastLagrangian
        """
        from lnn.fast import FastLagrangian

        return FastLagrangian.from_model(self)

    def widened(self, dtype: str = "float64") -> LagrangianNetwork:
        """This model computing in ``dtype``: itself if it does, else its twin holding the current weights.

        :func:`lnn.rollout` solves a float32 model with its float64 twin (on
        every path: scipy's methods, the compiled pairs, the implicit methods'
        Jacobian), so that tolerances below float32's resolution are met
        without the step size collapsing on rounding noise. The twin is built
        once per model and dtype (:func:`lnn.models.precision.widened`) and
        its weights are assigned from this model's at every call: the same
        function, evaluated in the wider arithmetic.

        Parameters
        ----------
        dtype : {"float64", "float32"}

        Returns
        -------
        LagrangianNetwork
        """
        from lnn.models.precision import widened

        return widened(self, dtype)

    def acceleration_jacobian(self, q, qd, tau=None) -> np.ndarray:
        """Exact ``d qdd / d [q, qd]`` by autodiff, for scipy's implicit solvers.

        Parameters
        ----------
        q, qd : array_like, shape ``(B, n)`` or ``(n,)``
        tau : array_like, same shape, optional (held fixed)

        Returns
        -------
        numpy.ndarray, shape ``(B, n, 2n)`` (``(n, 2n)`` for a single state), float64
        """
        from lnn.fast import acceleration_jacobian

        return acceleration_jacobian(self, q, qd, tau)

    def inverse_dynamics(self, q, qd, qdd):
        """Inverse dynamics ``tau = M qdd + (d2L/dqd dq) qd - dL/dq - f(q, qd)``, ``f`` the learned forces.

        Parameters
        ----------
        q, qd, qdd : array_like or tensor, shape ``(B, n)`` or ``(n,)``

        Returns
        -------
        tensor, shape ``(B, n)`` (``(n,)`` for a single state)
            The generalized force that produces ``qdd``.
        """
        return self._dispatch("inverse_dynamics", self._inverse_dynamics_graph, ("q", "qd", "qdd"), q, qd, qdd)

    def energy(self, q, qd):
        """Energy ``E = qd . dL/dqd - L``.

        Parameters
        ----------
        q, qd : array_like or tensor, shape ``(B, n)`` or ``(n,)``

        Returns
        -------
        tensor, shape ``(B,)`` (scalar for a single state)
        """
        return self._dispatch("energy", self._energy_graph, ("q", "qd"), q, qd)

    def energy_rate(self, q, qd, qdd):
        """``dE/dt`` along ``(qd, qdd)`` by automatic differentiation.

        Parameters
        ----------
        q, qd, qdd : array_like or tensor, shape ``(B, n)`` or ``(n,)``

        Returns
        -------
        tensor, shape ``(B,)`` (scalar for a single state)
        """
        return mechanics.energy_rate(self._lagrangian, q, qd, qdd, dtype=self.dtype)

    def power_balance(self, q, qd, tau=None) -> PowerBalance:
        """Check ``dE/dt = qd . (tau + f(q, qd))`` along the model's own accelerations (``f`` the learned forces).

        Parameters
        ----------
        q, qd : array_like, shape ``(B, n)``
        tau : array_like, shape ``(B, n)``, optional

        Returns
        -------
        lnn.mechanics.PowerBalance
            ``input_power`` includes the forces' power ``qd . f`` (e.g. ``-qd . D qd``); the
            residual is zero up to rounding for a well-conditioned ``M``.
        """
        q_arr = np.atleast_2d(np.asarray(q, np.float64))
        qd_arr = np.atleast_2d(np.asarray(qd, np.float64))
        qdd = self.acceleration(q_arr, qd_arr, tau).numpy()
        force = np.zeros_like(qd_arr) if tau is None else np.atleast_2d(np.asarray(tau, np.float64))
        if self.forces:
            force = force + np.asarray(
                self._force_graph(tf.constant(q_arr, self.dtype), tf.constant(qd_arr, self.dtype)), np.float64
            )
        return mechanics.power_balance(self._lagrangian, q_arr, qd_arr, qdd, force, dtype=self.dtype)

    def mass_matrix_health(self, q, qd=None) -> MassMatrixHealth:
        """Health report of ``M`` on a batch of states.

        Parameters
        ----------
        q : array_like, shape ``(B, n)``
        qd : array_like, shape ``(B, n)``, optional

        Returns
        -------
        lnn.mechanics.MassMatrixHealth
            Smallest eigenvalue, condition numbers, fraction of samples that
            are not positive definite.
        """
        return mechanics.mass_matrix_health(self.mass_matrix(q, qd))

    # -- the parts of the inverse dynamics, and typed copies --------------------------------
    # inverse_dynamics = M qdd + coriolis(q, qd) + gravity(q) + friction_torque(qd), with the
    # gauge of every built-in kind: T(q, 0) = 0 and V(q) = -L(q, 0) the potential.
    _OPS = {
        **_OPS,
        "gravity": ("_gravity_graph", 1, True),
        "coriolis": ("_coriolis_graph", 2, True),
        "friction_torque": ("_friction_torque_graph", 1, True),
        "friction_torque_state": ("_friction_torque_state_graph", 2, True),
    }

    def _grad_q_at_rest(self, q):
        """``dL/dq (q, 0) = -dV/dq``, shape ``(B, n)``."""
        return self.kind_model.terms(q, tf.zeros_like(q), hessian=False, mixed=False, grad_q=True).grad_q

    def _gravity_graph(self, q):
        return -self._grad_q_at_rest(q)

    def _coriolis_graph(self, q, qd):
        t = self.kind_model.terms(q, qd, hessian=False, mixed=True, grad_q=True)
        return t.mixed - t.grad_q + self._grad_q_at_rest(q)

    def _friction_torque_graph(self, qd):
        return -self._friction_force(qd)

    def _friction_torque_state_graph(self, q, qd):
        return -self._friction_force(qd, q)

    def gravity(self, q):
        """The gravity torque ``g(q) = dV/dq`` (the torque that holds the system still at ``q``).

        ``V(q) = -L(q, 0)`` for every built-in kind (``T(q, 0) = 0``), so
        ``g`` is the part of :meth:`inverse_dynamics` that neither the
        velocities nor the accelerations cause.

        Parameters
        ----------
        q : array_like or tensor, shape ``(B, n)`` or ``(n,)``

        Returns
        -------
        tensor, shape ``(B, n)`` (``(n,)`` for a single state)
        """
        return self._dispatch("gravity", self._gravity_graph, ("q",), q)

    def coriolis(self, q, qd):
        """The velocity terms ``c(q, qd) = (d2L/dqd dq) qd - dT/dq`` (Coriolis, centrifugal, gyroscopic).

        Everything in :meth:`inverse_dynamics` that is neither ``M qdd``, nor
        :meth:`gravity`, nor :meth:`friction_torque`: ``c = (d2L/dqd dq) qd -
        dL/dq (q, qd) + dL/dq (q, 0)``; zero at ``qd = 0``.

        Parameters
        ----------
        q, qd : array_like or tensor, shape ``(B, n)`` or ``(n,)``

        Returns
        -------
        tensor, shape ``(B, n)`` (``(n,)`` for a single state)
        """
        return self._dispatch("coriolis", self._coriolis_graph, ("q", "qd"), q, qd)

    def friction_torque(self, qd, *, q=None):
        """The torque that overcomes the learned forces, ``-f(q, qd)`` (e.g. ``D qd``).

        Sign convention: the part of :meth:`inverse_dynamics` (the torque the
        motors apply) spent on the learned forces, the opposite of the
        generalized force ``f`` that :meth:`acceleration` adds to ``tau``;
        ``qd . friction_torque(qd) >= 0`` for dissipative forces; zeros for a
        model without any. (``model.friction_terms`` is the configuration
        string of the friction terms; :meth:`friction` is this method.)

        Parameters
        ----------
        qd : array_like or tensor, shape ``(B, n)`` or ``(n,)``
        q : array_like or tensor, same shape, keyword-only, optional
            The positions: needed when a force depends on them (``"network"``).

        Returns
        -------
        tensor, shape ``(B, n)`` (``(n,)`` for a single state)

        Raises
        ------
        ValueError
            If ``q`` is None and a force of the model depends on ``q``.
        """
        if q is None:
            self._require_q(q)
            return self._dispatch("friction_torque", self._friction_torque_graph, ("qd",), qd)
        return self._dispatch("friction_torque_state", self._friction_torque_state_graph, ("q", "qd"), q, qd)

    def friction(self, qd, *, q=None):
        """The friction part of :meth:`inverse_dynamics`, ``-f(q, qd)`` (:meth:`friction_torque`).

        ``mass_matrix @ qdd + coriolis + gravity + friction = inverse_dynamics``.

        Parameters
        ----------
        qd : array_like or tensor, shape ``(B, n)`` or ``(n,)``
        q : array_like or tensor, same shape, keyword-only, optional
            The positions: needed when a force depends on them (``"network"``).

        Returns
        -------
        tensor, shape ``(B, n)`` (``(n,)`` for a single state)
        """
        return self.friction_torque(qd, q=q)

    def astype(self, dtype: str) -> LagrangianNetwork:
        """A copy of this model in ``dtype``: same configuration, weights and input scaling, cast.

        For evaluation at tight tolerances (scipy's solvers on a float64
        right-hand side) of a model trained in float32. The copy is a new
        model with its own compiled operations; this model is unchanged.

        Parameters
        ----------
        dtype : {"float32", "float64"}

        Returns
        -------
        LagrangianNetwork
            Its variables (trainable and not: weights, damping or friction
            parameters, ``q_mean``, ``q_std``, ``qd_std``, ``qdd_std``) equal
            this model's, cast to ``dtype``.
        """
        dtype = _validate.float_dtype(dtype)
        config = self.get_config()
        config["dtype"] = dtype
        copy = type(self).from_config(config)
        mine, theirs = self.variables, copy.variables
        if len(mine) != len(theirs):
            raise RuntimeError(f"the {dtype} copy has {len(theirs)} variables, the model {len(mine)}")
        for source, target in zip(mine, theirs):
            if tuple(source.shape) != tuple(target.shape) or source.path.split("/")[-1] != target.path.split("/")[-1]:
                raise RuntimeError(
                    f"variable {source.path} {tuple(source.shape)} does not match "
                    f"{target.path} {tuple(target.shape)} of the {dtype} copy"
                )
            target.assign(np.asarray(source.numpy(), dtype=np.dtype(dtype)))
        return copy

    # -- Keras ------------------------------------------------------------------------------
    def call(self, inputs):
        """Accelerations for Keras: ``inputs = (q, qd)`` or ``(q, qd, tau)``, each ``(B, n)``.

        Returns
        -------
        tensor, shape ``(B, n)``
        """
        if not isinstance(inputs, (tuple, list)) or len(inputs) not in (2, 3):
            raise ValueError(
                "inputs must be a tuple (q, qd) or (q, qd, tau), got "
                f"{type(inputs).__name__} of length "
                f"{len(inputs) if isinstance(inputs, (tuple, list)) else 'n/a'}"
            )
        dtype = tf.as_dtype(self.dtype)
        q, qd = (tf.cast(x, dtype) for x in inputs[:2])
        tau = tf.cast(inputs[2], dtype) if len(inputs) == 3 and inputs[2] is not None else None
        return self._acceleration_graph(q, qd, tau)
