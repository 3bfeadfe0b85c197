"""A learned model's solve in float64: a twin of the model with its weights cast once per rollout.

A float32 model's vector field is smooth only to float32's resolution
(``2**-23``, 1.2e-7): at tolerances within a factor of it, an adaptive
solver's error estimate is dominated by the right-hand side's rounding noise
and the step size collapses (issue 54: DOP853 at ``rtol = 1e-7`` took 5.6x
the time of ``1e-6`` where an 8th-order method should pay about 1.3x). The
weights themselves are exact numbers in float64, so evaluating the same
function in float64 removes the noise without changing the model:
:func:`widened` builds, once per model, a twin of the same configuration in
the wider dtype and copies the current weights into it (a cast of a few
thousand numbers) each time it is asked, so later training is seen.

Every path of :func:`lnn.rollout` uses the twin of a float32 model: the numpy
snapshot of scipy's methods (:meth:`lnn.LagrangianNetwork.numpy_snapshot`),
the compiled pairs of :mod:`lnn.solvers` (their graphs are traced on the twin
and kept with it) and the Jacobian of the implicit methods
(:meth:`lnn.LagrangianNetwork.acceleration_jacobian`).
"""

from __future__ import annotations

import weakref

import numpy as np

__all__ = ["widened"]

#: model -> {dtype name: twin}; weak in the model, so a twin lives as long as its model.
_TWINS: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()


def widened(model, dtype: str = "float64"):
    """``model`` computing in ``dtype``: ``model`` itself if it already does, else its twin with the current weights.

    Parameters
    ----------
    model : lnn.LagrangianNetwork
    dtype : {"float64", "float32"}
        The dtype of the twin's weights and arithmetic.

    Returns
    -------
    lnn.LagrangianNetwork
        Built once per model and dtype (its compiled functions are kept with
        it), its weights assigned from ``model``'s at every call. A weight at
        the narrow dtype's largest finite value (an unbounded side of the
        training box) becomes the wide dtype's largest one.

    Raises
    ------
    ValueError
        If ``dtype`` is not a float dtype of the package, or if the twin's
        variables do not match the model's (a model whose configuration does
        not rebuild it).
    """
    from lnn import _validate

    dtype = _validate.float_dtype(dtype)
    if str(model.dtype) == dtype:
        return model
    twins = _TWINS.setdefault(model, {})
    twin = twins.get(dtype)
    if twin is None:
        config = dict(model.get_config(), dtype=dtype)
        config.pop("name", None)
        twin = type(model).from_config(config)
        twins[dtype] = twin
    sources, targets = model.weights, twin.weights
    shapes = [tuple(v.shape) for v in sources], [tuple(v.shape) for v in targets]
    if shapes[0] != shapes[1]:
        raise ValueError(
            f"the {dtype} twin of {type(model).__name__} {model.name!r} does not have the model's variables "
            f"(shapes {shapes[1]} against {shapes[0]})"
        )
    narrow, wide = np.finfo(np.dtype(str(model.dtype))).max, np.finfo(np.dtype(dtype)).max
    for source, target in zip(sources, targets):
        value = np.asarray(source.numpy(), dtype=np.dtype(dtype))
        value = np.where(np.abs(value) >= narrow, np.sign(value) * wide, value)
        target.assign(value)
    return twin
