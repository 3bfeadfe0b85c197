"""Inertial parameters of rigid bodies: pseudo-inertia, log-Cholesky, physical consistency.

A body's 10 inertial parameters, in Pinocchio's order (``Inertia.toDynamicParameters``),
are ``theta = [m, h_x, h_y, h_z, I_xx, I_xy, I_yy, I_xz, I_yz, I_zz]`` with
``h = m c`` the first moment and ``I`` the rotational inertia about the
body's joint-frame origin (``I = I_c + m S(c)^T S(c)``). They are physically
consistent (a real mass distribution has them) if and only if the
pseudo-inertia

    J = [[Sigma, h], [h^T, m]],    Sigma = tr(I) / 2 * 1 - I   (so I = tr(Sigma) 1 - Sigma)

is positive definite (Wensing, Kim & Slotine 2017). The log-Cholesky
parametrisation (Rucker & Wensing 2022) writes ``J = U U^T`` with

    U = exp(alpha) [[exp(d1), s12, s13, t1],
                    [0,  exp(d2), s23, t2],
                    [0,  0,  exp(d3), t3],
                    [0,  0,  0,       1 ]]

so that every ``eta = (alpha, d1, d2, d3, s12, s23, s13, t1, t2, t3)`` in
``R^10`` gives a physically consistent body and every such body has exactly
one ``eta``: an unconstrained parametrisation for a least-squares fit.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

__all__ = [
    "PhysicalConsistency",
    "log_cholesky_to_parameters",
    "parameters_of_pseudo_inertia",
    "parameters_to_log_cholesky",
    "pseudo_inertia",
    "physical_consistency",
]

#: Positions of ``theta[4:]`` = (I_xx, I_xy, I_yy, I_xz, I_yz, I_zz) in the 3x3 inertia.
_INERTIA_INDEX = ((0, 0), (0, 1), (1, 1), (0, 2), (1, 2), (2, 2))
#: Positions of (s12, s23, s13, t1, t2, t3) in the 4x4 ``U``.
_OFF_DIAGONAL = ((0, 1), (1, 2), (0, 2), (0, 3), (1, 3), (2, 3))


def _inertia_matrix(theta: np.ndarray) -> np.ndarray:
    """``(..., 10)`` -> the rotational inertia ``(..., 3, 3)``."""
    out = np.empty(theta.shape[:-1] + (3, 3))
    for k, (i, j) in enumerate(_INERTIA_INDEX):
        out[..., i, j] = out[..., j, i] = theta[..., 4 + k]
    return out


def pseudo_inertia(theta) -> np.ndarray:
    """The 4x4 pseudo-inertia ``J`` of inertial parameters.

    Parameters
    ----------
    theta : array_like, shape ``(..., 10)``
        ``[m, h_x, h_y, h_z, I_xx, I_xy, I_yy, I_xz, I_yz, I_zz]``.

    Returns
    -------
    ndarray, shape ``(..., 4, 4)``
        ``[[Sigma, h], [h^T, m]]`` with ``Sigma = tr(I) / 2 - I``.
    """
    theta = np.asarray(theta, dtype=np.float64)
    if theta.shape[-1:] != (10,):
        raise ValueError(f"theta must have shape (..., 10); got shape {theta.shape}")
    inertia = _inertia_matrix(theta)
    trace = np.trace(inertia, axis1=-2, axis2=-1)
    out = np.zeros(theta.shape[:-1] + (4, 4))
    out[..., :3, :3] = 0.5 * trace[..., None, None] * np.eye(3) - inertia
    out[..., :3, 3] = out[..., 3, :3] = theta[..., 1:4]
    out[..., 3, 3] = theta[..., 0]
    return out


def parameters_of_pseudo_inertia(j) -> np.ndarray:
    """The inertial parameters ``(..., 10)`` of a pseudo-inertia ``(..., 4, 4)`` (inverse of :func:`pseudo_inertia`)."""
    j = np.asarray(j, dtype=np.float64)
    sigma = j[..., :3, :3]
    inertia = np.trace(sigma, axis1=-2, axis2=-1)[..., None, None] * np.eye(3) - sigma
    theta = np.empty(j.shape[:-2] + (10,))
    theta[..., 0] = j[..., 3, 3]
    theta[..., 1:4] = j[..., :3, 3]
    for k, (a, b) in enumerate(_INERTIA_INDEX):
        theta[..., 4 + k] = inertia[..., a, b]
    return theta


def _factor(eta: np.ndarray) -> np.ndarray:
    """``(..., 10)`` log-Cholesky coordinates -> the upper-triangular ``U`` ``(..., 4, 4)``."""
    u = np.zeros(eta.shape[:-1] + (4, 4))
    for k in range(3):
        u[..., k, k] = np.exp(eta[..., 1 + k])
    u[..., 3, 3] = 1.0
    for k, (a, b) in enumerate(_OFF_DIAGONAL):
        u[..., a, b] = eta[..., 4 + k]
    return np.exp(eta[..., 0])[..., None, None] * u


def log_cholesky_to_parameters(eta, *, jacobian: bool = False):
    """Inertial parameters of log-Cholesky coordinates (always physically consistent).

    Parameters
    ----------
    eta : array_like, shape ``(..., 10)``
        ``(alpha, d1, d2, d3, s12, s23, s13, t1, t2, t3)``.
    jacobian : bool, keyword-only
        Also return ``d theta / d eta``.

    Returns
    -------
    theta : ndarray, shape ``(..., 10)``
    d_theta : ndarray, shape ``(..., 10, 10)``
        Only with ``jacobian=True``: ``d_theta[..., i, k] = d theta_i / d eta_k``.
    """
    eta = np.asarray(eta, dtype=np.float64)
    if eta.shape[-1:] != (10,):
        raise ValueError(f"eta must have shape (..., 10); got shape {eta.shape}")
    u = _factor(eta)
    theta = parameters_of_pseudo_inertia(u @ np.swapaxes(u, -1, -2))
    if not jacobian:
        return theta
    scale = np.exp(eta[..., 0])[..., None, None]
    du = np.zeros(eta.shape[:-1] + (10, 4, 4))
    du[..., 0, :, :] = u  # d U / d alpha = U
    for k in range(3):
        du[..., 1 + k, k, k] = u[..., k, k]
    for k, (a, b) in enumerate(_OFF_DIAGONAL):
        du[..., 4 + k, a, b] = scale[..., 0, 0]
    uu = u[..., None, :, :]
    dj = du @ np.swapaxes(uu, -1, -2) + uu @ np.swapaxes(du, -1, -2)  # (..., 10, 4, 4)
    return theta, np.swapaxes(parameters_of_pseudo_inertia(dj), -1, -2)


def parameters_to_log_cholesky(theta, *, floor: float = 1e-9) -> np.ndarray:
    """Log-Cholesky coordinates of inertial parameters, made positive definite first.

    A pseudo-inertia that is only positive semi-definite (a thin rod, a point
    mass) or slightly indefinite is projected first: its eigenvalues are
    raised to at least ``floor`` times its largest one.

    Parameters
    ----------
    theta : array_like, shape ``(..., 10)``
        Inertial parameters with a mass > 0.
    floor : float, keyword-only
        Smallest relative eigenvalue kept, in ``(0, 1)``.

    Returns
    -------
    ndarray, shape ``(..., 10)``

    Raises
    ------
    ValueError
        For a mass <= 0 (no physical body is near it).
    """
    theta = np.asarray(theta, dtype=np.float64)
    if np.any(theta[..., 0] <= 0):
        raise ValueError(f"log-Cholesky coordinates need masses > 0; got masses {theta[..., 0]!r}")
    j = pseudo_inertia(theta)
    w, v = np.linalg.eigh(j)
    w = np.maximum(w, floor * w.max(axis=-1, keepdims=True))
    j = (v * w[..., None, :]) @ np.swapaxes(v, -1, -2)
    flip = np.eye(4)[::-1]
    lower = np.linalg.cholesky(flip @ j @ flip)
    u = flip @ lower @ flip  # upper triangular, J = U U^T
    alpha = np.log(u[..., 3, 3])
    u = u / u[..., 3:4, 3:4]
    eta = np.empty(theta.shape[:-1] + (10,))
    eta[..., 0] = alpha
    for k in range(3):
        eta[..., 1 + k] = np.log(u[..., k, k])
    for k, (a, b) in enumerate(_OFF_DIAGONAL):
        eta[..., 4 + k] = u[..., a, b]
    return eta


@dataclass(frozen=True)
class PhysicalConsistency:
    """Whether inertial parameters describe real bodies, link by link.

    Attributes
    ----------
    mass : ndarray, shape ``(n_links,)``
        The masses.
    pseudo_inertia_eigenvalue : ndarray, shape ``(n_links,)``
        Smallest eigenvalue of each pseudo-inertia (> 0 for a physical body).
    principal_moments : ndarray, shape ``(n_links, 3)``
        Principal moments of inertia about each centre of mass, ascending.
    triangle_margin : ndarray, shape ``(n_links,)``
        ``J1 + J2 - J3`` of the principal moments (>= 0 for a physical body).
    consistent : ndarray of bool, shape ``(n_links,)``
        Mass > 0 and pseudo-inertia positive definite (which implies the
        triangle inequalities).
    """

    mass: np.ndarray
    pseudo_inertia_eigenvalue: np.ndarray
    principal_moments: np.ndarray
    triangle_margin: np.ndarray
    consistent: np.ndarray

    @property
    def all(self) -> bool:
        """Every link is physically consistent."""
        return bool(np.all(self.consistent))


def physical_consistency(theta) -> PhysicalConsistency:
    """Check inertial parameters link by link (mass, pseudo-inertia, triangle inequalities).

    Parameters
    ----------
    theta : array_like, shape ``(n_links, 10)``

    Returns
    -------
    PhysicalConsistency
    """
    theta = np.atleast_2d(np.asarray(theta, dtype=np.float64))
    mass = theta[:, 0]
    eig = np.linalg.eigvalsh(pseudo_inertia(theta))[:, 0]
    with np.errstate(divide="ignore", invalid="ignore"):
        com = np.where(mass[:, None] != 0, theta[:, 1:4] / mass[:, None], 0.0)
    skew = np.zeros((len(theta), 3, 3))
    skew[:, 0, 1], skew[:, 0, 2], skew[:, 1, 2] = -com[:, 2], com[:, 1], -com[:, 0]
    skew = skew - np.swapaxes(skew, -1, -2)
    about_com = _inertia_matrix(theta) - mass[:, None, None] * np.swapaxes(skew, -1, -2) @ skew
    moments = np.linalg.eigvalsh(about_com)
    triangle = moments[:, 0] + moments[:, 1] - moments[:, 2]
    scale = np.maximum(np.abs(pseudo_inertia(theta)).max(axis=(-2, -1)), np.finfo(float).tiny)
    consistent = (mass > 0) & (eig > 1e-12 * scale)
    return PhysicalConsistency(
        mass=mass,
        pseudo_inertia_eigenvalue=eig,
        principal_moments=moments,
        triangle_margin=triangle,
        consistent=consistent,
    )
