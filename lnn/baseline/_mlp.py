"""The field's baseline: a plain MLP that predicts accelerations directly (:class:`AccelerationMLP`).

Every paper on Lagrangian and Hamiltonian networks compares against a
multilayer perceptron mapping the state to ``qdd`` with no physics inside.
:class:`AccelerationMLP` is that baseline, trained by :func:`lnn.fit` with the
acceleration loss and rolled out by :func:`lnn.rollout` exactly like a
:class:`lnn.LagrangianNetwork`, so that comparisons use the same data, budget,
integrator and metrics. It has no energy, mass matrix or inverse dynamics:
the metrics that need them use the true system's (for example Cranmer et
al.'s energy error evaluates the *true* energy along the predicted states).
"""

from __future__ import annotations

import keras
import numpy as np
import tensorflow as tf

from lnn import _validate
from lnn._runtime import fast_caller

__all__ = ["AccelerationMLP"]

_ACTIVATIONS = ("softplus", "tanh", "sigmoid", "swish", "relu")


@keras.saving.register_keras_serializable(package="lnn")
class AccelerationMLP(keras.Model):
    """An MLP ``qdd = f(q, qd, tau)``: the black-box baseline of the field.

    Angular coordinates enter as ``(sin q, cos q)``, the others and the
    velocities standardised with the scales of :meth:`adapt`, torques scaled
    by their standard deviation; the output is scaled by the standard
    deviation of the training accelerations.

    Parameters
    ----------
    n_dof : int
        Number of degrees of freedom ``n``.
    hidden : tuple of int, keyword-only
        Hidden widths.
    activation : str, keyword-only
        Hidden activation (one of softplus, tanh, sigmoid, swish, relu).
    angular : tuple of bool, optional, keyword-only
        Which coordinates are angles (default: none).
    dtype : {"float32", "float64"}, keyword-only
        Weights and computation dtype.
    seed : int, optional, keyword-only
        Seed of the weight initialisation.
    """

    def __init__(
        self,
        n_dof: int,
        *,
        hidden=(256, 256),
        activation: str = "softplus",
        angular=None,
        dtype="float32",
        seed=None,
        **kwargs,
    ):
        n_dof = _validate.positive("n_dof", n_dof, integer=True)
        hidden = tuple(int(h) for h in hidden)
        if not hidden or min(hidden) < 1:
            raise ValueError(f"hidden must be a non-empty tuple of positive widths, got {hidden!r}")
        if activation not in _ACTIVATIONS:
            raise ValueError(f"activation must be one of {_ACTIVATIONS}, got {activation!r}")
        angular = (False,) * int(n_dof) if angular is None else tuple(bool(a) for a in angular)
        if len(angular) != n_dof:
            raise ValueError(f"angular must have n_dof={n_dof} entries, got {len(angular)}")
        super().__init__(dtype=dtype, **kwargs)
        self.n_dof = int(n_dof)
        self.hidden = hidden
        self.activation = activation
        self._angular = angular
        self.seed = seed
        init = keras.initializers.GlorotUniform(seed=seed)
        self.hidden_layers = [
            keras.layers.Dense(h, activation=activation, kernel_initializer=init, dtype=dtype, name=f"hidden_{i}")
            for i, h in enumerate(hidden)
        ]
        self.output_layer = keras.layers.Dense(self.n_dof, kernel_initializer=init, dtype=dtype, name="qdd")
        n = self.n_dof
        self.q_mean = self.add_weight(shape=(n,), initializer="zeros", trainable=False, name="q_mean")
        self.q_std = self.add_weight(shape=(n,), initializer="ones", trainable=False, name="q_std")
        self.qd_std = self.add_weight(shape=(n,), initializer="ones", trainable=False, name="qd_std")
        self.tau_std = self.add_weight(shape=(n,), initializer="ones", trainable=False, name="tau_std")
        self.qdd_std = self.add_weight(shape=(n,), initializer="ones", trainable=False, name="qdd_std")
        self._mask = tf.constant(np.asarray(angular, dtype=bool))
        self._compiled = None

    @property
    def angular(self) -> tuple[bool, ...]:
        """Which coordinates are angles, one flag per coordinate."""
        return self._angular

    def get_config(self) -> dict:
        """The constructor arguments (Keras serialisation)."""
        return {
            "n_dof": self.n_dof,
            "hidden": list(self.hidden),
            "activation": self.activation,
            "angular": list(self._angular),
            "dtype": self.dtype,
            "seed": self.seed,
            "name": self.name,
        }

    @classmethod
    def from_config(cls, config: dict) -> AccelerationMLP:
        """Rebuild from :meth:`get_config`."""
        config = dict(config)
        n_dof = config.pop("n_dof")
        return cls(n_dof, **config)

    def adapt(self, q, qd, qdd=None, tau=None) -> None:
        """Set the input and output scaling from training data.

        Parameters
        ----------
        q, qd : array_like, shape ``(N, n)``
            Sample states.
        qdd : array_like, shape ``(N, n)``, optional
            Sample accelerations: the output scale.
        tau : array_like, shape ``(N, n)``, optional
            Sample torques: the torque input scale.
        """
        std = _validate.spread
        q = np.asarray(q, dtype=np.float64)
        mask = np.asarray(self._angular)
        self.q_mean.assign(np.where(mask, 0.0, q.mean(axis=0)))
        self.q_std.assign(np.where(mask, 1.0, std(q)))
        self.qd_std.assign(std(qd))
        if qdd is not None:
            self.qdd_std.assign(std(qdd))
        if tau is not None:
            self.tau_std.assign(std(tau))

    def call(self, inputs):
        """Accelerations: ``inputs = (q, qd)`` or ``(q, qd, tau)``, each ``(B, n)`` -> ``(B, n)``."""
        if not isinstance(inputs, (tuple, list)) or len(inputs) not in (2, 3):
            raise ValueError(f"inputs must be a tuple (q, qd) or (q, qd, tau), got {type(inputs).__name__}")
        dtype = tf.as_dtype(self.dtype)
        q, qd = (tf.cast(x, dtype) for x in inputs[:2])
        tau = tf.cast(inputs[2], dtype) if len(inputs) == 3 and inputs[2] is not None else tf.zeros_like(qd)
        plain = (q - self.q_mean) / self.q_std
        features = [
            tf.where(self._mask, tf.sin(q), plain),
            tf.where(self._mask, tf.cos(q), 0.0 * q),
            qd / self.qd_std,
            tau / self.tau_std,
        ]
        h = tf.concat(features, axis=-1)
        for layer in self.hidden_layers:
            h = layer(h)
        return self.output_layer(h) * self.qdd_std

    def _check(self, name: str, value) -> np.ndarray:
        return _validate.state(name, value, self.n_dof)[0]

    def acceleration(self, q, qd, tau=None):
        """Predicted ``qdd`` as a tensor, shape ``(B, n)``.

        Parameters
        ----------
        q, qd : array_like, shape ``(B, n)`` or ``(n,)``
        tau : array_like, shape ``(B, n)``, optional
        """
        q, qd = self._check("q", q), self._check("qd", qd)
        if q.shape != qd.shape:
            raise ValueError(f"q and qd must have the same shape, got {q.shape} and {qd.shape}")
        tau = np.zeros_like(q) if tau is None else np.broadcast_to(self._check("tau", tau), q.shape)
        if self._compiled is None:
            spec = tf.TensorSpec([None, self.n_dof], tf.as_dtype(self.dtype))
            self._compiled = fast_caller(
                tf.function(lambda a, b, c: self((a, b, c)), input_signature=[spec] * 3).get_concrete_function()
            )
        dtype = np.dtype(self.dtype)
        return self._compiled(
            tf.constant(q.astype(dtype)),
            tf.constant(qd.astype(dtype)),
            tf.constant(np.ascontiguousarray(tau, dtype=dtype)),
        )

    def numpy_acceleration(self, q, qd, tau=None) -> np.ndarray:
        """Predicted ``qdd`` as a float64 numpy array, shape ``(B, n)`` (the integrator's hot path)."""
        return np.asarray(self.acceleration(q, qd, tau), dtype=np.float64)
