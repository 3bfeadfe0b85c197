"""Re-initialising a model's MLPs for training: :func:`cranmer_initialization`."""

from __future__ import annotations

import math

import numpy as np

from lnn import _runtime

__all__ = ["INITIALIZATIONS", "cranmer_initialization", "initialize"]

#: The ``initialization`` options of :func:`lnn.fit` (None keeps the model's own weights).
INITIALIZATIONS = (None, "cranmer")


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
        A model whose MLPs are :class:`lnn.models.mlp.MLP` layers (a
        :class:`lnn.LagrangianNetwork`), or plain ``keras.layers.Dense``
        stacks (each model's Dense layers, in order, form one MLP).
    seed : int, keyword-only
        Seed of the new weights.

    Returns
    -------
    int
        Number of MLPs re-initialised.
    """
    from lnn.models.mlp import MLP

    rng = np.random.default_rng(seed)
    layers = _runtime.sublayers(model)
    mlps = [layer for layer in layers if isinstance(layer, MLP)]
    for mlp in mlps:
        if mlp.nonnegative:  # input-convex nets keep their own non-negative init
            continue
        first = [w for w in (mlp.w_x, mlp.w_v) if w is not None]
        fan_in = sum(int(w.shape[0]) for w in first)
        n = max(fan_in, int(mlp.hidden[0]))
        rows = rng.normal(0.0, 2.2 / math.sqrt(n), (fan_in, int(mlp.hidden[0])))
        offset = 0
        for w in first:
            w.assign(rows[offset : offset + int(w.shape[0])].astype(w.dtype))
            offset += int(w.shape[0])
        mlp.b_1.assign(np.zeros(mlp.b_1.shape, dtype=mlp.b_1.dtype))
        kernels, biases = list(mlp._raw_kernels), list(mlp._biases)  # no output bias: one fewer
        _assign_layers([(k, biases[i] if i < len(biases) else None) for i, k in enumerate(kernels)], rng, start=1)
    dense = [
        layer for layer in layers if type(layer).__name__ == "Dense" and getattr(layer, "kernel", None) is not None
    ]
    if not mlps and dense:
        _assign_layers([(d.kernel, d.bias) for d in dense], rng, start=0)
        return 1
    return len(mlps)


def _assign_layers(pairs, rng, *, start: int) -> None:
    """Cranmer's normal kernels and zero biases for layers ``start, start + 1, ...`` of one MLP."""
    total = start + len(pairs)
    for j, (kernel, bias) in enumerate(pairs):
        i = start + j
        n = max(int(s) for s in kernel.shape)
        factor = 2.2 if i == 0 else (n if i == total - 1 else 0.58 * i)
        kernel.assign(rng.normal(0.0, factor / math.sqrt(n), tuple(kernel.shape)).astype(kernel.dtype))
        if bias is not None:
            bias.assign(np.zeros(tuple(bias.shape), dtype=bias.dtype))


def initialize(model, initialization, *, seed: int) -> None:
    """Apply fit's ``initialization`` option (one of :data:`INITIALIZATIONS`)."""
    if initialization == "cranmer":
        cranmer_initialization(model, seed=seed)
