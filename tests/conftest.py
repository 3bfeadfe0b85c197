"""Helpers that several test files share.

They are plain functions (tests import them with ``from conftest import ...``;
pytest puts this folder on ``sys.path``), not fixtures: each takes the sizes
and seeds of its caller, so that every test file still states its own data.
"""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent


def random_states(
    n: int, batch: int, seed: int, *, angles: bool = False, scales: tuple[float, float, float] = (1.0, 1.0, 1.0)
):
    """Random ``q, qd, tau`` of shape ``(batch, n)`` from one generator, drawn in that order.

    Parameters
    ----------
    n, batch, seed : int
        Degrees of freedom, number of states and the seed of
        ``numpy.random.default_rng``.
    angles : bool, keyword-only
        Draw ``q`` uniform in ``[-pi, pi)`` (the scale of ``q`` is then unused)
        instead of normal.
    scales : tuple of three floats, keyword-only
        Standard deviations of the normal ``q``, ``qd`` and ``tau``.

    Returns
    -------
    tuple of numpy.ndarray
        ``q, qd, tau``, float64.
    """
    rng = np.random.default_rng(seed)
    q_scale, qd_scale, tau_scale = scales
    q = rng.uniform(-np.pi, np.pi, (batch, n)) if angles else rng.normal(0.0, q_scale, (batch, n))
    return q, rng.normal(0.0, qd_scale, (batch, n)), rng.normal(0.0, tau_scale, (batch, n))


def check_png(path, size=None) -> None:
    """Assert that ``path`` is a PNG with visible content (and ``size`` pixels, if given).

    Parameters
    ----------
    path : pathlib.Path
        The image file.
    size : tuple of int, optional
        Expected ``(width, height)``.
    """
    from PIL import Image

    assert Path(path).read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    with Image.open(path) as image:
        if size is not None:
            assert image.size == size
        gray = np.asarray(image.convert("L"), dtype=float)
    assert gray.std() > 15.0, "the image is nearly uniform"
    assert (gray < 200).mean() > 0.01, "almost no ink on the image"


def load_script(path):
    """Import a script (an example or a tutorial) as a module without running its ``main``.

    Parameters
    ----------
    path : str or pathlib.Path
        The ``.py`` file.

    Returns
    -------
    module
        Registered in ``sys.modules`` (dataclasses look their module up there).
    """
    path = Path(path)
    spec = importlib.util.spec_from_file_location(f"script_{path.stem}", path)
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


def record_returns(monkeypatch, owner, name: str) -> list:
    """Spy on ``owner.name``: the function still runs, and each value it returns is appended to the list returned.

    Parameters
    ----------
    monkeypatch : pytest.MonkeyPatch
        Undoes the replacement at the end of the test.
    owner : module or class
        Where the function is looked up by its callers (e.g. ``lnn.identification``, whose ``identify`` the
        ``lnn identify`` verb calls).
    name : str
        The function's name there.

    Returns
    -------
    list
        The values returned so far, in call order.
    """
    original = getattr(owner, name)
    returned: list = []

    def spy(*args, **kwargs):
        returned.append(original(*args, **kwargs))
        return returned[-1]

    monkeypatch.setattr(owner, name, spy)
    return returned
