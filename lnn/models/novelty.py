"""How far states lie from the training states: the *novelty* of every model.

A state's novelty is the distance, in the networks' own input features
(``sin q, cos q`` of the angles, standardised other coordinates, ``qd /
qd_std``: :mod:`lnn.models.features`), to its :data:`NEIGHBOURS`-th nearest
training state, divided by the 99th percentile (:data:`PERCENTILE`) of the
same distance for training states. So ``novelty <= 1`` for 99 % of states
drawn like the training data, and it grows linearly with the distance from
them: a learned model's predictions at ``novelty > 1`` are extrapolations.

What the model stores (:meth:`lnn.LagrangianNetwork.adapt`, saved with it):
up to :data:`REFERENCE_SIZE` training states' features (a uniform subsample,
seeded) and the scale. The scale is measured on training states that are not
in the same contiguous block of the data as their neighbours (the data are
cut into :data:`BLOCKS` blocks in order: a trajectory's own neighbouring
samples, ``dt`` apart, would make the training states look denser than a new
trajectory drawn from the same distribution sees them). Queries use a k-d
tree (:class:`scipy.spatial.cKDTree`) over the reference states.

numpy only (the model's TensorFlow is not involved).
"""

from __future__ import annotations

import dataclasses

import numpy as np

__all__ = ["BLOCKS", "NEIGHBOURS", "PERCENTILE", "REFERENCE_SIZE", "NoveltyReference", "build_reference", "features"]

#: Training states kept as the reference (a uniform subsample when there are more).
REFERENCE_SIZE = 2048
#: The novelty is the distance to the k-th nearest reference state.
NEIGHBOURS = 5
#: The percentile of the training states' distances that maps to novelty 1.0.
PERCENTILE = 99.0
#: Contiguous blocks of the training data whose states do not count as each other's neighbours for the scale.
BLOCKS = 20


def features(feature_map, q, qd) -> np.ndarray:
    """The networks' input features of states: ``[x(q), qd / qd_scale]``.

    Parameters
    ----------
    feature_map : lnn.models.FeatureMap
        ``x = q @ A + sin(q) @ B_sin + cos(q) @ B_cos + c`` and ``qd_scale``.
    q, qd : array_like, shape ``(N, n)``

    Returns
    -------
    numpy.ndarray, shape ``(N, F + n)``, float64
    """
    q = np.asarray(q, np.float64)
    qd = np.asarray(qd, np.float64)
    f = feature_map
    x = q @ f.A + np.sin(q) @ f.B_sin + np.cos(q) @ f.B_cos + f.c
    return np.concatenate([x, qd / np.asarray(f.qd_scale, np.float64)], axis=-1)


@dataclasses.dataclass(frozen=True, eq=False)
class NoveltyReference:
    """The stored summary of the training states.

    Attributes
    ----------
    points : numpy.ndarray, shape ``(M, d)``
        Features of ``M`` training states.
    scale : float
        The :data:`PERCENTILE` th percentile of the training states' distance
        to their :data:`NEIGHBOURS`-th nearest reference state (novelty 1.0).
    """

    points: np.ndarray
    scale: float

    @property
    def neighbours(self) -> int:
        """The ``k`` of the k-th nearest reference state (fewer when there are fewer references)."""
        return max(1, min(NEIGHBOURS, self.points.shape[0]))

    def distance(self, x) -> np.ndarray:
        """Distance of features ``x (N, d)`` to their k-th nearest reference state, shape ``(N,)``."""
        from scipy.spatial import cKDTree

        x = np.asarray(x, np.float64)
        out = np.full(x.shape[0], np.nan)
        finite = np.all(np.isfinite(x), axis=1)
        if not finite.any():
            return out
        k = self.neighbours
        dist, _ = cKDTree(self.points).query(x[finite], k=k)
        out[finite] = dist if k == 1 else dist[:, -1]
        return out

    def novelty(self, x) -> np.ndarray:
        """:meth:`distance` in units of :attr:`scale` (1.0: the training states' 99th percentile), ``(N,)``."""
        return self.distance(x) / self.scale


def build_reference(x, *, seed: int = 0, size: int = REFERENCE_SIZE) -> NoveltyReference:
    """The :class:`NoveltyReference` of training features ``x``, in the order of the data.

    Parameters
    ----------
    x : array_like, shape ``(N, d)``
        Features of the training states (:func:`features`), ``N >= 2``, in
        the order of the data (trajectories one after the other).
    seed : int, keyword-only
        Seed of the subsamples.
    size : int, keyword-only
        At most this many reference states.

    Returns
    -------
    NoveltyReference
    """
    x = np.asarray(x, np.float64)
    x = x[np.all(np.isfinite(x), axis=1)]
    n = x.shape[0]
    if n < 2:
        raise ValueError(f"the novelty reference needs at least 2 finite states, got {n}")
    rng = np.random.default_rng(seed)
    blocks = (np.arange(n) * min(BLOCKS, n)) // n
    ref = np.sort(rng.choice(n, size=min(n, size), replace=False))
    query = np.sort(rng.choice(n, size=min(n, size), replace=False))
    # Distances of the query states to the references of the other blocks.
    d2 = np.sum(x[query] ** 2, axis=1)[:, None] + np.sum(x[ref] ** 2, axis=1)[None, :] - 2.0 * x[query] @ x[ref].T
    dist = np.sqrt(np.maximum(d2, 0.0))
    dist[blocks[query][:, None] == blocks[ref][None, :]] = np.inf
    k = max(1, min(NEIGHBOURS, ref.size - int(np.max(np.bincount(blocks[ref])))))
    kth = np.partition(dist, k - 1, axis=1)[:, k - 1]
    kth = kth[np.isfinite(kth)]
    scale = float(np.percentile(kth, PERCENTILE)) if kth.size else 0.0
    tiny = 1e-12 * max(1.0, float(np.max(np.abs(x))))
    return NoveltyReference(points=x[ref], scale=max(scale, tiny))
