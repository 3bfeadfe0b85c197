"""Ensembles of Lagrangian networks: :class:`Ensemble`, its predictions with their spread, calibration.

An ensemble is ``K`` :class:`lnn.LagrangianNetwork` s of one configuration
(any kind, forces, prior) that differ by their initial weights (seeds
``seed, seed + 1, ...``) and, when trained by :func:`lnn.fit`, by a
bootstrap of the training trajectories (:mod:`lnn.train`). It is one Keras
model: :func:`lnn.fit` trains every member in one compiled step, it is saved
and loaded as one file (:func:`lnn.load_model`), and its compiled
predictions evaluate every member in one graph.

What it adds to a model:

- :meth:`Ensemble.predict`: the members' mean and standard deviation of
  ``qdd`` (and of ``tau`` given ``qdd``), with calibrated intervals
  (:class:`EnsemblePrediction`);
- :meth:`Ensemble.calibrate`: the scale and floor that turn the members'
  spread ``s`` into a predictive standard deviation ``sqrt((a s)² + b²)``,
  and the degrees of freedom of its (Student-t) tails, fitted per output on
  held-out data by maximum likelihood
  (:mod:`lnn.uncertainty`) and saved with the model; :func:`lnn.fit`
  calibrates on its validation data;
- :meth:`Ensemble.novelty`: the members' distance to the training states,
  and their disagreement once calibrated;
- the mechanics of the ensemble's **mean** (``acceleration``,
  ``inverse_dynamics``, ``mass_matrix``, ``energy``: means over the
  members), so that it is a :class:`lnn.MechanicalSystem`; :func:`lnn.rollout`
  rolls every member out (:class:`lnn.EnsembleTrajectory`).
"""

from __future__ import annotations

import dataclasses
import json
import os

import keras
import numpy as np
import tensorflow as tf

from lnn import _validate, mechanics, uncertainty
from lnn.models.compiled import CompiledOp
from lnn.models.network import LagrangianNetwork
from lnn.trajectory import Band

__all__ = ["Ensemble", "EnsembleCalibration", "EnsemblePrediction"]

#: Rows per compiled call of :meth:`Ensemble.predict` on large batches.
_CHUNK = 8192
#: The asset of a saved ensemble that holds its calibration summary (:meth:`EnsembleCalibration.to_json`).
CALIBRATION_FILE = "calibration.json"


@dataclasses.dataclass(frozen=True)
class EnsemblePrediction:
    """What :meth:`Ensemble.predict` returns: the members' mean and spread, and calibrated intervals.

    Attributes
    ----------
    qdd, qdd_std, qdd_spread : numpy.ndarray, shape ``(B, n)``
        The members' mean acceleration; the calibrated predictive standard
        deviation ``sqrt((a s)² + b²)``; the members' standard deviation
        ``s`` (``ddof=1``).
    qdd_members : numpy.ndarray, shape ``(K, B, n)``
        Every member's acceleration.
    tau, tau_std, tau_spread : numpy.ndarray ``(B, n)`` or None
        The same for the inverse dynamics, when ``qdd`` was given.
    tau_members : numpy.ndarray ``(K, B, n)`` or None
    calibrated : bool
        Whether the ensemble was calibrated (else ``*_std`` is the raw spread).
    qdd_dof, tau_dof : numpy.ndarray ``(n,)`` or None
        The calibrated tails' degrees of freedom per coordinate (a
        Student-t's; inf or None: Gaussian), which set the intervals'
        half-widths (:func:`lnn.uncertainty.standard_quantile`).
    """

    qdd: np.ndarray
    qdd_std: np.ndarray
    qdd_spread: np.ndarray
    qdd_members: np.ndarray
    tau: np.ndarray | None = None
    tau_std: np.ndarray | None = None
    tau_spread: np.ndarray | None = None
    tau_members: np.ndarray | None = None
    calibrated: bool = False
    qdd_dof: np.ndarray | None = None
    tau_dof: np.ndarray | None = None

    def interval(self, output: str = "qdd", *, level: float = 0.9) -> Band:
        """The nominal ``level`` interval ``mean ± k std`` of ``"qdd"`` or ``"tau"``: ``k`` the half-width of
        the calibrated tails (:func:`lnn.uncertainty.standard_quantile`; ``z(level)`` when Gaussian).

        Returns
        -------
        lnn.Band
            ``mean``, ``lower``, ``upper`` of shape ``(B, n)``.
        """
        if output not in ("qdd", "tau"):
            raise ValueError(f"output must be 'qdd' or 'tau', got {output!r}")
        mean, std = getattr(self, output), getattr(self, f"{output}_std")
        if mean is None:
            raise ValueError("this prediction has no tau: pass qdd= to Ensemble.predict")
        dof = getattr(self, f"{output}_dof")
        half = uncertainty.standard_quantile(level, np.inf if dof is None else dof) * std
        return Band(mean=mean, lower=mean - half, upper=mean + half, level=float(level))


@dataclasses.dataclass(frozen=True)
class EnsembleCalibration:
    """What :meth:`Ensemble.calibrate` fitted (and stored in the ensemble).

    Attributes
    ----------
    qdd, tau : lnn.uncertainty.Calibration
        Per output: the scale and floor, coverages of the nominal 50 % and
        90 % intervals and the negative log-likelihood on the calibration
        data, calibrated and raw.
    disagreement_scale : float
        The 99th percentile, over the held-out states, of the members'
        root-mean-square relative spread of ``qdd`` (disagreement novelty 1.0).
    out_of_bag : int
        Training samples that calibrated as out-of-bag samples (0 without
        ``training=``); the held-out ones are the rest of ``qdd.samples``.

    Each output's ``recordings`` and ``recording_coverage`` say how each
    calibration recording (``"held-out <id>"``, ``"training <id>"`` for the
    out-of-bag samples of a training trajectory) would have been covered
    had the intervals been fitted on the others: the spread of those
    figures is how far from nominal a new recording's coverage may fall.
    """

    qdd: uncertainty.Calibration
    tau: uncertainty.Calibration
    disagreement_scale: float
    out_of_bag: int = 0

    def to_json(self) -> dict:
        """This summary as JSON types (:meth:`from_json`'s input; what an ensemble saves beside its weights)."""
        return dict(
            qdd=self.qdd.to_json(),
            tau=self.tau.to_json(),
            disagreement_scale=float(self.disagreement_scale),
            out_of_bag=int(self.out_of_bag),
        )

    @classmethod
    def from_json(cls, data: dict) -> EnsembleCalibration:
        """The summary :meth:`to_json` wrote.

        Raises
        ------
        ValueError
            If ``data`` lacks a field or a field is not of its type.
        """
        try:
            return cls(
                qdd=uncertainty.Calibration.from_json(data["qdd"]),
                tau=uncertainty.Calibration.from_json(data["tau"]),
                disagreement_scale=float(data["disagreement_scale"]),
                out_of_bag=int(data.get("out_of_bag", 0)),
            )
        except (KeyError, TypeError) as error:
            raise ValueError(
                f"not an ensemble calibration written by to_json: {type(error).__name__}: {error}"
            ) from None


@keras.saving.register_keras_serializable(package="lnn")
class Ensemble(keras.Model):
    """``K`` Lagrangian networks of one configuration, trained, saved and evaluated as one model.

    Parameters
    ----------
    n_dof : int
        Degrees of freedom ``n``.
    members : int
        Number of members ``K >= 2``.
    bootstrap : bool, keyword-only
        Whether :func:`lnn.fit` trains every member on its own bootstrap of
        the training trajectories (:mod:`lnn.train`); else the members differ
        by their initial weights only.
    seed : int, optional, keyword-only
        Member ``k`` gets ``seed + k`` (default: random initial weights).
    dtype : {"float32", "float64"}, keyword-only
    name : str, optional, keyword-only
    **network_options
        Anything :class:`lnn.LagrangianNetwork` takes (``kind``, ``hidden``,
        ``angular``, ``friction``, ``prior``, ...), the same for every member.

    Attributes
    ----------
    members : tuple of LagrangianNetwork
    n_dof, angular, kind, dtype
        The members'.
    """

    def __init__(
        self,
        n_dof: int,
        members: int = 5,
        *,
        bootstrap: bool = True,
        seed: int | None = None,
        dtype: str = "float32",
        name: str | None = None,
        **network_options,
    ) -> None:
        n_dof = _validate.positive("n_dof", n_dof, integer=True)
        count = _validate.positive("members", members, integer=True)
        if count < 2:
            raise ValueError(f"members must be at least 2 (a spread needs two), got {members!r}")
        if seed is not None and not isinstance(seed, (int, np.integer)):
            raise TypeError(f"seed must be an int or None, got {seed!r}")
        dtype = _validate.float_dtype(dtype)
        super().__init__(name=name, dtype=dtype)
        first = LagrangianNetwork(n_dof, dtype=dtype, seed=seed, name="member_0", **network_options)
        config = first.get_config()
        for key in ("n_dof", "seed", "name", "dtype"):
            config.pop(key, None)
        rest = [
            LagrangianNetwork.from_config(
                dict(config, n_dof=n_dof, dtype=dtype, seed=None if seed is None else int(seed) + k, name=f"member_{k}")
            )
            for k in range(1, count)
        ]
        self._members = [first, *rest]
        self.n_dof, self.bootstrap, self.seed = n_dof, bool(bootstrap), None if seed is None else int(seed)
        object.__setattr__(self, "network_config", config)
        object.__setattr__(self, "_ops", {})
        object.__setattr__(self, "_calibration", None)
        self._np_dtype, self._tf_dtype = np.dtype(dtype), tf.as_dtype(dtype)

        def weight(name, value, shape=(n_dof,)):
            var = self.add_weight(name=name, shape=shape, initializer="zeros", dtype=dtype, trainable=False)
            var.assign(np.full(shape, value, dtype=dtype))
            return var

        self.qdd_scale, self.qdd_floor = weight("qdd_scale", 1.0), weight("qdd_floor", 0.0)
        self.tau_scale, self.tau_floor = weight("tau_scale", 1.0), weight("tau_floor", 0.0)
        self.disagreement_scale = weight("disagreement_scale", 0.0, shape=())
        self.calibrated_flag = weight("calibrated", 0.0, shape=())
        # The tails' degrees of freedom come last: files saved before them hold the six above (load_own_variables).
        self.qdd_dof, self.tau_dof = weight("qdd_dof", np.inf), weight("tau_dof", np.inf)
        self.built = True

    # -- configuration -------------------------------------------------------------
    @property
    def members(self) -> tuple:
        """The member networks, ``K`` :class:`lnn.LagrangianNetwork` s."""
        return tuple(self._members)

    @property
    def n_members(self) -> int:
        """``K``."""
        return len(self._members)

    @property
    def angular(self) -> tuple[bool, ...]:
        """Which coordinates are angles (the members')."""
        return self._members[0].angular

    @property
    def kind(self) -> str:
        """The members' kind."""
        return self._members[0].kind

    @property
    def numpy_dtype(self) -> np.dtype:
        """The model dtype as a numpy dtype."""
        return self._np_dtype

    @property
    def calibrated(self) -> bool:
        """Whether :meth:`calibrate` has run (else intervals use the raw spread)."""
        return bool(float(self.calibrated_flag.numpy()) > 0)

    @property
    def calibration(self) -> EnsembleCalibration | None:
        """What the last :meth:`calibrate` fitted (None before it), saved with the model (``calibration.json``
        among the ``.keras`` file's assets) and read back by :func:`lnn.load_model`."""
        return self._calibration

    def load_own_variables(self, store) -> None:
        """Keras loading hook: files saved before the tails were calibrated (without ``qdd_dof`` and
        ``tau_dof``, the last two variables) load with Gaussian tails, as they were fitted."""
        own = [self.qdd_scale, self.qdd_floor, self.tau_scale, self.tau_floor]  # in the order they were made
        own += [self.disagreement_scale, self.calibrated_flag, self.qdd_dof, self.tau_dof]
        if len(store.keys()) == len(own) - 2:
            for k, variable in enumerate(own[:-2]):
                variable.assign(store[str(k)])
            for variable in own[-2:]:
                variable.assign(np.full(variable.shape, np.inf, self._np_dtype))
            return
        super().load_own_variables(store)

    def save_assets(self, dir_path) -> None:
        """Keras saving hook: write :attr:`calibration` (when there is one) as :data:`CALIBRATION_FILE`."""
        if self._calibration is not None:
            with open(os.path.join(dir_path, CALIBRATION_FILE), "w", encoding="utf-8") as file:
                json.dump(self._calibration.to_json(), file)

    def load_assets(self, dir_path) -> None:
        """Keras loading hook: read :attr:`calibration` back (None from files saved without one)."""
        path = os.path.join(dir_path, CALIBRATION_FILE)
        if os.path.exists(path):
            with open(path, encoding="utf-8") as file:
                object.__setattr__(self, "_calibration", EnsembleCalibration.from_json(json.load(file)))

    @property
    def rollout_band_scale(self) -> float:
        """The factor on the members' spread in the bands of :func:`lnn.rollout` (1.0: the raw spread)."""
        return 1.0

    def get_config(self) -> dict:
        """Constructor arguments (Keras serialisation)."""
        return dict(
            n_dof=self.n_dof,
            members=self.n_members,
            bootstrap=self.bootstrap,
            seed=self.seed,
            dtype=self._np_dtype.name,
            name=self.name,
            network=dict(self.network_config),
        )

    @classmethod
    def from_config(cls, config: dict) -> Ensemble:
        """Rebuild from :meth:`get_config`."""
        config = dict(config)
        network = dict(config.pop("network", {}))
        dtype = config.pop("dtype", "float32")
        if isinstance(dtype, dict):  # a serialised DTypePolicy
            dtype = keras.dtype_policies.deserialize(dtype).name
        n_dof = config.pop("n_dof")
        return cls(n_dof, config.pop("members", 5), dtype=dtype, **config, **network)

    @classmethod
    def from_members(cls, models, *, name: str | None = None) -> Ensemble:
        """An ensemble of trained networks of one configuration (their weights and scalings, copied).

        For members trained separately (e.g. ``lnn.identify`` run ``K``
        times with different seeds); calibrate the result on held-out data
        (:meth:`calibrate`) before trusting its intervals.

        Parameters
        ----------
        models : sequence of LagrangianNetwork
            At least 2, of one configuration (everything but ``seed`` and ``name``).
        name : str, optional, keyword-only

        Returns
        -------
        Ensemble
            Uncalibrated; ``bootstrap`` False (the members were trained elsewhere).
        """
        models = list(models)
        if len(models) < 2 or not all(isinstance(m, LagrangianNetwork) for m in models):
            kinds = [type(m).__name__ for m in models]
            raise TypeError(f"models must be at least 2 LagrangianNetwork s, got {kinds}")
        configs = []
        for m in models:
            config = m.get_config()
            for key in ("seed", "name"):
                config.pop(key, None)
            configs.append(config)
        for k, config in enumerate(configs[1:], start=1):
            if config != configs[0]:
                diff = sorted(key for key in set(config) | set(configs[0]) if config.get(key) != configs[0].get(key))
                raise ValueError(f"models[{k}] differs from models[0] in its configuration: {diff}")
        config = dict(configs[0])
        n_dof, dtype = config.pop("n_dof"), config.pop("dtype")
        ensemble = cls(n_dof, len(models), bootstrap=False, dtype=dtype, name=name, **config)
        for source, target in zip(models, ensemble.members):
            for a, b in zip(source.variables, target.variables):
                if tuple(a.shape) != tuple(b.shape):
                    raise ValueError(f"variable {a.path} {tuple(a.shape)} does not match {b.path} {tuple(b.shape)}")
                b.assign(a.numpy())
        return ensemble

    # -- data ----------------------------------------------------------------------
    def adapt(self, q, qd, qdd=None) -> None:
        """Set every member's input scaling and novelty summary from data (:meth:`LagrangianNetwork.adapt`).

        Parameters
        ----------
        q, qd : array_like, shape ``(N, n)``
        qdd : array_like, shape ``(N, n)``, optional
        """
        for member in self._members:
            member.adapt(q, qd, qdd)

    # -- Keras -----------------------------------------------------------------------
    def call(self, inputs):
        """The members' mean acceleration for Keras: ``inputs = (q, qd)`` or ``(q, qd, tau)``, each ``(B, n)``."""
        return tf.add_n([member(inputs) for member in self._members]) / float(self.n_members)

    # -- compiled member outputs -------------------------------------------------------
    def _member_op(self, op: str) -> CompiledOp:
        """A compiled op whose output stacks every member's, ``(B, K, n)``, on packed ``(B, k n)`` inputs."""
        fn = self._ops.get(op)
        if fn is not None:
            return fn
        n, members = self.n_dof, self._members
        graphs = {
            "acceleration": (lambda m, a: m._acceleration_graph(*a), 3),
            "acceleration_free": (lambda m, a: m._acceleration_graph(*a), 2),
            "inverse_dynamics": (lambda m, a: m._inverse_dynamics_graph(*a), 3),
        }
        graph, n_args = graphs[op]

        def body(x):
            parts = [x[:, i * n : (i + 1) * n] for i in range(n_args)]
            return tf.stack([graph(m, parts) for m in members], axis=1)

        xla = all(m.xla for m in members) and n <= mechanics.UNROLLED_CHOLESKY_MAX_N
        fn = CompiledOp(body, width=n_args * n, dtype=self._tf_dtype, xla=xla, name=f"ensemble {op}")
        self._ops[op] = fn
        return fn

    def tracing_count(self, op: str) -> int:
        """Traces of the compiled member op ``op`` (``"acceleration"``, ``"acceleration_free"``,
        ``"inverse_dynamics"``): 1 after its first call."""
        fn = self._ops.get(op)
        return 0 if fn is None else fn.tracing_count()

    def _members_of(self, op: str, arrays, fallback) -> np.ndarray:
        """Every member's output ``(K, B, n)`` of ``op`` on checked ``(B, n)`` float64 arrays."""
        packed = np.concatenate(arrays, axis=1).astype(self._np_dtype)
        fn = self._member_op(op)
        parts = [fn(packed[i : i + _CHUNK]).numpy() for i in range(0, packed.shape[0], _CHUNK)]
        out = np.concatenate(parts, axis=0) if parts else np.zeros((0, self.n_members, self.n_dof))
        if not np.all(np.isfinite(out)):  # a member's M is not positive definite: its own call explains
            for member in self._members:
                fallback(member)
        return np.transpose(out, (1, 0, 2)).astype(np.float64)

    # -- predictions ----------------------------------------------------------------------
    def predict(self, q, qd, *, tau=None, qdd=None) -> EnsemblePrediction:
        """The members' mean and spread of ``qdd`` (and of ``tau`` given ``qdd``), with calibrated intervals.

        Parameters
        ----------
        q, qd : array_like, shape ``(B, n)``
        tau : array_like, shape ``(B, n)``, optional, keyword-only
            Generalized forces of the forward dynamics (default zero).
        qdd : array_like, shape ``(B, n)``, optional, keyword-only
            Accelerations: also predict the inverse dynamics ``tau``.

        Returns
        -------
        EnsemblePrediction
            Arrays of shape ``(B, n)`` (members ``(K, B, n)``), float64.

        Raises
        ------
        lnn.MassMatrixError
            When a member's mass matrix is not positive definite at a state.
        """
        (q, qd, tau, qdd), single = _validate.states([("q", q), ("qd", qd), ("tau", tau), ("qdd", qdd)], self.n_dof)
        if single:
            raise ValueError(f"q must be a batch of shape (B, {self.n_dof}); pass q[None] for one state")
        if tau is None:
            acc = self._members_of("acceleration_free", [q, qd], lambda m: m.acceleration(q, qd))
        else:
            acc = self._members_of("acceleration", [q, qd, tau], lambda m: m.acceleration(q, qd, tau))
        mean, spread = acc.mean(axis=0), acc.std(axis=0, ddof=1)
        out = dict(qdd=mean, qdd_spread=spread, qdd_members=acc, calibrated=self.calibrated)
        out.update(qdd_dof=self.qdd_dof.numpy().astype(np.float64), tau_dof=self.tau_dof.numpy().astype(np.float64))
        out["qdd_std"] = uncertainty.interval_std(spread, self.qdd_scale.numpy(), self.qdd_floor.numpy())
        if qdd is not None:
            torque = self._members_of("inverse_dynamics", [q, qd, qdd], lambda m: None)
            spread = torque.std(axis=0, ddof=1)
            out.update(tau=torque.mean(axis=0), tau_spread=spread, tau_members=torque)
            out["tau_std"] = uncertainty.interval_std(spread, self.tau_scale.numpy(), self.tau_floor.numpy())
        return EnsemblePrediction(**out)

    def calibrate(self, data, *, training=None, weights=None) -> EnsembleCalibration:
        """Fit the intervals of ``qdd`` and ``tau`` on held-out data and store them (saved with the model).

        Per output, the predictive standard deviation is ``sqrt((a s)² + b²)``
        with ``s`` the members' spread, ``a`` a scale and ``b`` a floor, and
        the tails a Student-t's of ``ν`` degrees of freedom (inf: Gaussian),
        fitted by maximum likelihood (:func:`lnn.uncertainty.fit_calibration`); the
        ``qdd`` interval comes from the forward dynamics at the data's
        ``tau``, the ``tau`` interval from the inverse dynamics at the data's
        ``qdd``. Also stores the scale of the disagreement novelty.

        Given the ``training`` data and the members' bootstrap ``weights`` on
        it, every training sample that some member never saw (weight 0) is a
        calibration sample too: its error is that of the mean of the members
        that did not see it (the *out-of-bag* error of bagging), its spread
        the members' spread. One held-out recording says how far off the model
        is on that recording; the out-of-bag samples say it on every
        recording the bootstrap left out, so that a held-out recording easier
        (or harder) than the rest does not set the intervals alone
        (:func:`lnn.identify` calibrates so).

        Every sample is labelled by its recording (``data.trajectory`` and
        ``training.trajectory`` when they have one), so that the result also
        reports each recording's coverage when calibrated on the others
        (:class:`EnsembleCalibration`); the result is kept as
        :attr:`calibration`.

        Parameters
        ----------
        data : lnn.Dataset
            Held-out samples (not trained on): ``q, qd, qdd, tau`` of shape
            ``(N, n)``, and ``trajectory`` ``(N,)`` if it has one.
        training : lnn.Dataset, optional, keyword-only
            The samples the members were trained on, shape ``(M, n)`` each
            (and ``trajectory`` ``(M,)``).
        weights : array_like, shape ``(M, K)``, optional, keyword-only
            Member ``k``'s bootstrap count of each training sample
            (:func:`lnn.train.member_weights`); required with ``training``.

        Returns
        -------
        EnsembleCalibration

        Raises
        ------
        TypeError
            If ``data`` or ``training`` is not a dataset with ``q, qd, qdd, tau``.
        ValueError
            If a shape is wrong, or only one of ``training`` and ``weights`` is given.
        """
        q, qd, qdd, tau = self._calibration_arrays("data", data)
        if q.shape[0] < 2:
            raise ValueError(f"calibrate needs at least 2 samples of shape (N, {self.n_dof}), got {q.shape}")
        prediction = self.predict(q, qd, tau=tau, qdd=qdd)
        truth = {"qdd": [qdd], "tau": [tau]}
        mean = {"qdd": [prediction.qdd], "tau": [prediction.tau]}
        spread = {"qdd": [prediction.qdd_spread], "tau": [prediction.tau_spread]}
        recording = [_recordings("held-out", data, q.shape[0])]
        bagged = 0
        if (training is None) != (weights is None):
            raise ValueError("calibrate takes training= and weights= together (the members' bootstrap of training)")
        if training is not None:
            bagged = self._out_of_bag(training, weights, truth, mean, spread, recording)
        fits = {
            output: uncertainty.fit_calibration(
                output,
                np.concatenate(truth[output]),
                np.concatenate(mean[output]),
                np.concatenate(spread[output]),
                recording=np.concatenate(recording),
            )
            for output in ("qdd", "tau")
        }
        # 1.0 at the 99th percentile of every calibration state, the out-of-bag ones too: one held-out log
        # alone can set it far lower (an easy log) and flag ordinary states of the next log as novel.
        relative = self._relative_spread(np.concatenate(spread["qdd"]))
        scale = float(np.nanpercentile(relative, 99.0)) if np.isfinite(relative).any() else 0.0
        self.qdd_scale.assign(fits["qdd"].scale.astype(self._np_dtype))
        self.qdd_floor.assign(fits["qdd"].floor.astype(self._np_dtype))
        self.tau_scale.assign(fits["tau"].scale.astype(self._np_dtype))
        self.tau_floor.assign(fits["tau"].floor.astype(self._np_dtype))
        self.qdd_dof.assign(fits["qdd"].dof.astype(self._np_dtype))
        self.tau_dof.assign(fits["tau"].dof.astype(self._np_dtype))
        self.disagreement_scale.assign(np.asarray(scale, self._np_dtype))
        self.calibrated_flag.assign(np.asarray(1.0, self._np_dtype))
        result = EnsembleCalibration(qdd=fits["qdd"], tau=fits["tau"], disagreement_scale=scale, out_of_bag=bagged)
        object.__setattr__(self, "_calibration", result)
        return result

    def _calibration_arrays(self, name: str, data) -> tuple[np.ndarray, ...]:
        """``q, qd, qdd, tau`` of a dataset, checked, float64 ``(N, n)``."""
        try:
            arrays = [np.asarray(getattr(data, k), np.float64) for k in ("q", "qd", "qdd", "tau")]
        except AttributeError:
            raise TypeError(f"{name} must be an lnn.Dataset (q, qd, qdd, tau), got {type(data).__name__}") from None
        checked, _ = _validate.states(list(zip(("q", "qd", "qdd", "tau"), arrays)), self.n_dof)
        if checked[0].ndim != 2:
            raise ValueError(f"{name} must hold samples of shape (N, {self.n_dof}), got q of shape {checked[0].shape}")
        return tuple(checked)

    def _out_of_bag(self, training, weights, truth: dict, mean: dict, spread: dict, recording: list) -> int:
        """Append the training samples' out-of-bag errors to the calibration arrays; how many samples."""
        q, qd, qdd, tau = self._calibration_arrays("training", training)
        weights = np.asarray(weights, np.float64)
        if weights.shape != (q.shape[0], self.n_members):
            raise ValueError(
                f"weights must have shape (M, K) = ({q.shape[0]}, {self.n_members}) (a bootstrap count per "
                f"training sample and member, lnn.train.member_weights), got {weights.shape}"
            )
        unseen = weights == 0  # (M, K): member k never saw the sample
        rows = np.flatnonzero(unseen.any(axis=1))
        if rows.size == 0:
            return 0
        prediction = self.predict(q[rows], qd[rows], tau=tau[rows], qdd=qdd[rows])
        share = unseen[rows].astype(np.float64) / unseen[rows].sum(axis=1, keepdims=True)  # (R, K)
        for output, target in (("qdd", qdd[rows]), ("tau", tau[rows])):
            members = getattr(prediction, f"{output}_members")  # (K, R, n)
            truth[output].append(target)
            mean[output].append(np.einsum("rk,krn->rn", share, members))
            spread[output].append(getattr(prediction, f"{output}_spread"))
        recording.append(_recordings("training", training, q.shape[0])[rows])
        return int(rows.size)

    def _relative_spread(self, spread: np.ndarray) -> np.ndarray:
        """Root mean square over coordinates of the members' ``qdd`` spread / the training ``qdd`` RMS, ``(B,)``."""
        reference = np.asarray(self._members[0].qdd_std.numpy(), np.float64)
        return np.sqrt(np.mean((spread / reference) ** 2, axis=-1))

    def novelty(self, q, qd, *, disagreement: bool = True) -> np.ndarray:
        """How far states lie from the training states (1.0: the training data's 99th percentile).

        The smallest of the members' distance novelties
        (:meth:`LagrangianNetwork.novelty`; equal for members trained
        together); with ``disagreement`` and once calibrated, the larger of
        that and the members' disagreement (their root-mean-square relative
        spread of ``qdd``, 1.0 at the 99th percentile of the calibration
        states).

        Parameters
        ----------
        q, qd : array_like, shape ``(B, n)``
        disagreement : bool, keyword-only

        Returns
        -------
        numpy.ndarray, shape ``(B,)``, float64 (a float for a single state ``(n,)``)
        """
        single = np.ndim(q) == 1
        q, qd = np.atleast_2d(np.asarray(q, np.float64)), np.atleast_2d(np.asarray(qd, np.float64))
        distances = []
        seen = []
        for member in self._members:
            points = member.novelty_points.numpy()
            if any(np.array_equal(points, other) for other in seen):
                continue
            seen.append(points)
            distances.append(np.asarray(member.novelty(q, qd), np.float64))
        out = np.min(np.stack(distances), axis=0) if len(distances) > 1 else distances[0]
        scale = float(self.disagreement_scale.numpy())
        if disagreement and self.calibrated and scale > 0:
            finite = np.all(np.isfinite(q) & np.isfinite(qd), axis=1)
            relative = np.full(q.shape[0], np.nan)
            if finite.any():
                relative[finite] = self._relative_spread(self.predict(q[finite], qd[finite]).qdd_spread) / scale
            out = np.fmax(out, relative)
        return float(out[0]) if single else out

    def export(self, path, *, force: bool = False, xla: bool = False):
        """Write the members' mean as a TensorFlow SavedModel (:func:`lnn.export.export_savedmodel`).

        The signatures of :meth:`lnn.LagrangianNetwork.export`, each the mean
        of the members' graphs (as :meth:`inverse_dynamics` etc.).

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

    # -- the mechanics of the mean -----------------------------------------------------------
    def _mean(self, method: str, *args):
        """The members' mean of ``method(*args)``, a tensor (gradients reach the inputs and weights under a tape)."""
        return tf.add_n([getattr(m, method)(*args) for m in self._members]) / float(self.n_members)

    def acceleration(self, q, qd, tau=None):
        """The members' mean forward dynamics ``qdd``.

        Parameters
        ----------
        q, qd : array_like or tensor, shape ``(B, n)`` or ``(n,)``
        tau : array_like or tensor, same shape, optional

        Returns
        -------
        tensor, shape ``(B, n)`` (``(n,)`` for a single state)
        """
        if isinstance(q, tf.Tensor) or np.ndim(q) != 2:  # tensors (tapes, graphs) and single states
            return self._mean("acceleration", q, qd, tau)
        return tf.constant(self.predict(q, qd, tau=tau).qdd, self._tf_dtype)

    def inverse_dynamics(self, q, qd, qdd):
        """The members' mean inverse dynamics ``tau``.

        Parameters
        ----------
        q, qd, qdd : array_like or tensor, shape ``(B, n)`` or ``(n,)``

        Returns
        -------
        tensor, shape ``(B, n)`` (``(n,)`` for a single state)
        """
        return self._mean("inverse_dynamics", q, qd, qdd)

    def mass_matrix(self, q, qd=None):
        """The members' mean mass matrix.

        Parameters
        ----------
        q, qd : array_like or tensor, shape ``(B, n)`` or ``(n,)``

        Returns
        -------
        tensor, shape ``(B, n, n)`` (``(n, n)`` for a single state)
        """
        return self._mean("mass_matrix", q, qd)

    def energy(self, q, qd):
        """The members' mean energy.

        Parameters
        ----------
        q, qd : array_like or tensor, shape ``(B, n)`` or ``(n,)``

        Returns
        -------
        tensor, shape ``(B,)`` (scalar for a single state)
        """
        return self._mean("energy", q, qd)


def _recordings(kind: str, data, count: int) -> np.ndarray:
    """The recording label of each of ``data``'s ``count`` samples: ``"<kind> <trajectory id>"`` (``kind``
    alone when ``data`` has no ``trajectory`` of that length)."""
    trajectory = getattr(data, "trajectory", None)
    if trajectory is None or np.shape(trajectory) != (count,):
        return np.full(count, kind)
    return np.char.add(f"{kind} ", np.asarray(trajectory).astype(str))
