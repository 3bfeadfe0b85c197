"""Reading models back: :func:`load_model`."""

from __future__ import annotations

import os
import zipfile

import keras

__all__ = ["load_model"]


def load_model(path):
    """Load an lnn model saved with ``model.save(path)``.

    Parameters
    ----------
    path : str or os.PathLike
        A ``.keras`` file holding a :class:`lnn.LagrangianNetwork`, an
        :class:`lnn.Ensemble` or the plain-MLP baseline
        :class:`lnn.baseline.AccelerationMLP`.

    Returns
    -------
    LagrangianNetwork, Ensemble or lnn.baseline.AccelerationMLP
        With the saved configuration and bit-identical weights.

    Raises
    ------
    FileNotFoundError
        If ``path`` does not exist.
    ValueError
        If it is not a Keras archive of an lnn model.
    """
    from lnn.baseline import AccelerationMLP
    from lnn.models.ensemble import Ensemble
    from lnn.models.mlp import MLP
    from lnn.models.network import LagrangianNetwork

    path = os.fspath(path)
    if not os.path.exists(path):
        raise FileNotFoundError(f"no such model file: {path!r}")
    if not path.endswith(".keras") or not zipfile.is_zipfile(path):
        raise ValueError(f"{path!r} is not a Keras '.keras' model archive")
    try:
        model = keras.saving.load_model(
            path,
            custom_objects={
                "LagrangianNetwork": LagrangianNetwork,
                "Ensemble": Ensemble,
                "MLP": MLP,
                "AccelerationMLP": AccelerationMLP,
            },
        )
    except Exception as exc:  # Keras raises many types for foreign archives
        raise ValueError(f"cannot load {path!r} as an lnn model: {exc}") from exc
    if not isinstance(model, (LagrangianNetwork, Ensemble, AccelerationMLP)):
        raise ValueError(
            f"{path!r} holds a {type(model).__name__}, not an lnn LagrangianNetwork, Ensemble or AccelerationMLP"
        )
    return model
