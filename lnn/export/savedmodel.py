"""A TensorFlow SavedModel of a learned model that a controller calls without ``lnn``.

:func:`export_savedmodel` writes ``tf.saved_model.save`` of a plain
``tf.Module`` whose three ``tf.function`` s, each with a fixed
``input_signature`` (batch dimension ``None``, the model's dtype), are the
serving signatures:

- ``inverse_dynamics(q, qd, qdd) -> {"tau": (B, n)}``
- ``acceleration(q, qd, tau) -> {"qdd": (B, n)}``
- ``mass_matrix(q) -> {"M": (B, n, n)}``

They are traced from the model's TensorFlow mathematics (the graphs that
``LagrangianNetwork`` inlines inside a ``tf.function``), not from its
compiled operations: no XLA cluster, no background compilation, no object of
:mod:`lnn._runtime` is captured. The learned forces (friction, offsets, the
passive friction networks) are part of the graphs exactly as in
``model.inverse_dynamics``; an :class:`lnn.Ensemble` is exported as the mean
of its members (``Ensemble.inverse_dynamics`` etc.). The weights are the
module's variables, restored by ``tf.saved_model.load`` without any Keras or
``lnn`` class: TensorFlow alone (Python, or the C API's
``TF_LoadSessionFromSavedModel`` with tag ``serve``) loads it.

``mass_matrix(q)`` is ``M`` at ``qd = 0`` for the few kinds whose ``M``
depends on ``qd`` (``kinetic-potential``, ``black-box``); the rigid-body,
structured and trigonometric kinds' ``M`` depends on ``q`` only.
"""

from __future__ import annotations

import os
import shutil
from dataclasses import dataclass

import tensorflow as tf

__all__ = ["SIGNATURES", "ExportedModel", "export_savedmodel"]

#: The serving signatures of an exported model: name -> (inputs, output).
SIGNATURES = {
    "inverse_dynamics": (("q", "qd", "qdd"), "tau"),
    "acceleration": (("q", "qd", "tau"), "qdd"),
    "mass_matrix": (("q",), "M"),
}


@dataclass(frozen=True)
class ExportedModel:
    """What :func:`export_savedmodel` wrote.

    Attributes
    ----------
    path : str
        The SavedModel directory.
    n_dof : int
        Size of ``q`` (the signatures take ``(B, n_dof)``).
    dtype : str
        ``"float32"`` or ``"float64"``: the inputs' and outputs' dtype.
    signatures : tuple of str
        The serving signatures' names (:data:`SIGNATURES`).
    members : int
        Members averaged (1 for a single network).
    """

    path: str
    n_dof: int
    dtype: str
    signatures: tuple[str, ...]
    members: int


def _graphs(model):
    """The members' plain-TensorFlow graph functions (one network: itself; an ensemble: its members)."""
    members = tuple(getattr(model, "members", None) or (model,))
    for member in members:
        if not hasattr(member, "_inverse_dynamics_graph"):
            raise TypeError(
                f"export needs an lnn.LagrangianNetwork or lnn.Ensemble (or an IdentifiedModel); got "
                f"{type(member).__name__}"
            )
    return members


class _Served(tf.Module):
    """The exported module: the weights as variables and the three signature functions."""

    def __init__(self, members, n: int, dtype, xla: bool) -> None:
        super().__init__(name="lnn_export")
        # Every weight the graphs read, tracked so that tf.saved_model.save writes it as a plain variable.
        self.weights = [_plain_variable(v) for m in members for v in m.weights]
        k = float(len(members))

        def mean(values):
            return values[0] if len(values) == 1 else tf.add_n(values) / k

        vector = lambda name: tf.TensorSpec([None, n], dtype, name=name)  # noqa: E731

        @tf.function(input_signature=[vector("q"), vector("qd"), vector("qdd")], autograph=False, jit_compile=xla)
        def inverse_dynamics(q, qd, qdd):
            return {"tau": mean([m._inverse_dynamics_graph(q, qd, qdd) for m in members])}

        @tf.function(input_signature=[vector("q"), vector("qd"), vector("tau")], autograph=False, jit_compile=xla)
        def acceleration(q, qd, tau):
            return {"qdd": mean([m._acceleration_graph(q, qd, tau) for m in members])}

        @tf.function(input_signature=[vector("q")], autograph=False, jit_compile=xla)
        def mass_matrix(q):
            qd = tf.zeros_like(q)
            return {"M": mean([m._mass_matrix_graph(q, qd) for m in members])}

        self.inverse_dynamics = inverse_dynamics
        self.acceleration = acceleration
        self.mass_matrix = mass_matrix


def _plain_variable(variable):
    """The ``tf.Variable`` behind a Keras 3 variable (the variable itself when it is one)."""
    if isinstance(variable, tf.Variable):
        return variable
    value = getattr(variable, "value", None)
    if isinstance(value, tf.Variable):
        return value
    raise TypeError(f"cannot export the weight {getattr(variable, 'path', variable)!r}: not a TensorFlow variable")


def export_savedmodel(model, path, *, force: bool = False, xla: bool = False) -> ExportedModel:
    """Write ``model`` as a TensorFlow SavedModel with the signatures of :data:`SIGNATURES`.

    Parameters
    ----------
    model : lnn.LagrangianNetwork, lnn.Ensemble or lnn.IdentifiedModel
        The learned model (of an :class:`lnn.IdentifiedModel`, its ``network``:
        the chosen stage with its learned forces).
    path : str or os.PathLike
        The SavedModel directory to write.
    force : bool, keyword-only
        Replace ``path`` if it exists.
    xla : bool, keyword-only
        Mark the signature functions ``jit_compile=True``: the loading
        runtime compiles each with XLA on its first call per input shape (one
        fused kernel instead of the graph's many small operations).

    Returns
    -------
    ExportedModel

    Raises
    ------
    FileExistsError
        If ``path`` exists and ``force`` is False.
    TypeError
        If ``model`` is not an ``lnn`` model.
    """
    network = getattr(model, "network", model)
    members = _graphs(network)
    path = os.fspath(path)
    if os.path.exists(path) and not force:
        raise FileExistsError(f"{path} exists; pass force=True (--force) to replace it")
    n = int(network.n_dof)
    dtype = tf.as_dtype(str(members[0].dtype))
    module = _Served(members, n, dtype, bool(xla))
    # The tf.functions themselves, not their concrete functions: each has an input signature, so it has
    # one trace, and save reuses it (given concrete functions, save traces every signature a second time).
    signatures = {name: getattr(module, name) for name in SIGNATURES}
    if os.path.isdir(path):
        shutil.rmtree(path)
    elif os.path.exists(path):
        os.remove(path)
    tf.saved_model.save(module, path, signatures=signatures)
    return ExportedModel(path=path, n_dof=n, dtype=dtype.name, signatures=tuple(SIGNATURES), members=len(members))
