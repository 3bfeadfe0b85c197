"""The model's side of a fit: checks against the data and the strategy, input scaling, building."""

from __future__ import annotations

import tensorflow as tf

from lnn.train._initialization import initialize

__all__ = ["model_dtype", "prepare", "require_callable"]


def require_callable(model) -> None:
    """Refuse a model that cannot be called on ``(q, qd, tau)``."""
    if not callable(model):
        raise TypeError(f"model must be a callable keras.Model, got {type(model).__name__}")


def model_dtype(model) -> tf.DType:
    """The dtype of the model's variables (or of its computation before it has any)."""
    variables = getattr(model, "trainable_variables", None) or getattr(model, "variables", [])
    if variables:
        return tf.as_dtype(variables[0].dtype)
    for attr in ("compute_dtype", "dtype"):
        value = getattr(model, attr, None)
        if isinstance(value, str):
            return tf.as_dtype(value)
    return tf.float32


def prepare(model, data, *, strategy, adapt: bool, initialization, seed: int):
    """Check, adapt, build and initialise the model for ``data`` (a ``TrainingData``).

    Parameters
    ----------
    model : keras.Model
    data : lnn.train._data.TrainingData
    strategy : tf.distribute.Strategy or None, keyword-only
        None: the default strategy. A given strategy must have created the
        model's variables.
    adapt : bool, keyword-only
        Call ``model.adapt(q, qd, qdd)`` on the training data when the model has it.
    initialization : {None, "cranmer"}, keyword-only
    seed : int, keyword-only

    Returns
    -------
    strategy : tf.distribute.Strategy
    dtype : tf.DType
        The dtype of the model's variables.
    """
    n_model = getattr(model, "n_dof", data.n)
    if n_model != data.n:
        raise ValueError(f"model.n_dof is {n_model} but the dataset has n = {data.n} coordinates")
    user_strategy = strategy is not None
    strategy = strategy if user_strategy else tf.distribute.get_strategy()
    if not isinstance(strategy, tf.distribute.Strategy):
        raise TypeError(f"strategy must be a tf.distribute.Strategy, got {type(strategy).__name__}")
    train = data.train
    if adapt and hasattr(model, "adapt"):
        model.adapt(train["q"], train["qd"], train["qdd"])
    dtype = model_dtype(model)
    probe = tuple(tf.constant(train[k][:2], dtype=dtype) for k in ("q", "qd", "tau"))
    with strategy.scope():
        model(probe)  # builds the variables
    if user_strategy:
        for var in model.trainable_variables:
            if not strategy.extended.variable_created_in_scope(getattr(var, "value", var)):
                raise ValueError(
                    "the model's variables were not created inside strategy.scope(); build the "
                    "model under `with strategy.scope():` before calling fit(..., strategy=...)"
                )
    initialize(model, initialization, seed=seed)
    return strategy, model_dtype(model)
