"""lnn.plot: every figure renders headless to valid, non-blank PNG/PDF files with labelled
axes, leaves rcParams alone, and the quantities it draws are the right mechanics."""

from __future__ import annotations

import re
from dataclasses import replace

import matplotlib
import numpy as np
import pytest
from PIL import Image, ImageSequence

import lnn
import simulations
from lnn import metrics, plot
from lnn.trajectory import Trajectory

from conftest import check_png

matplotlib.use("Agg")

PNG_MAGIC = b"\x89PNG\r\n\x1a\n"
# Animations built only to check their frames are never rendered; matplotlib warns when they go.
pytestmark = pytest.mark.filterwarnings("ignore:Animation was deleted:UserWarning")


# --------------------------------------------------------------------------- data
def oscillator(omega: float, *, batch: int = 3, duration: float = 4.0, samples: int = 81, seed: int = 0) -> Trajectory:
    """Closed-form rollouts of two uncoupled unit-mass oscillators ``qdd = -omega² q``."""
    rng = np.random.default_rng(seed)
    t = np.linspace(0.0, duration, samples)
    amplitude = rng.uniform(0.5, 1.5, size=(batch, 1, 2))
    phase = rng.uniform(0, 2 * np.pi, size=(batch, 1, 2))
    w = np.array([omega, 1.5 * omega])
    angle = w * t[None, :, None] + phase
    q = amplitude * np.sin(angle)
    qd = amplitude * w * np.cos(angle)
    qdd = -(w**2) * q
    energy = 0.5 * (qd**2 + (w * q) ** 2).sum(-1)
    return Trajectory(
        t=t, q=q, qd=qd, qdd=qdd, tau=np.zeros_like(q), energy=energy, metadata={"angular": [True, False]}
    )


@pytest.fixture(scope="module")
def pair():
    true = oscillator(2.0)
    learned = oscillator(2.1)  # same initial states (phases and amplitudes), drifting frequency
    return true, learned


@pytest.fixture(scope="module")
def pendulum_pair():
    """A double pendulum and a 'learned' one with a heavier second bob, same initial states."""
    true_system = simulations.DoublePendulum()
    learned_system = replace(true_system, m2=1.15)
    state = true_system.sample_state(3, rng=4)
    t = np.linspace(0.0, 1.5, 61)
    true = lnn.rollout(true_system, state.q, state.qd, t)
    learned = lnn.rollout(learned_system, state.q, state.qd, t)
    return true_system, learned_system, true, learned


def history_columns():
    epoch = np.arange(30)
    return {
        "epoch": epoch,
        "train_total": np.exp(-epoch / 8) + 0.01,
        "val_total": np.exp(-epoch / 8) + 0.02 + 0.001 * (epoch - 20) ** 2 / 20,
        "train_acceleration": np.exp(-epoch / 9),
        "train_energy": np.exp(-epoch / 7),
    }


def kinds(pair, pendulum_pair):
    """One call per figure kind, each returning a result with ``.figure``."""
    true, learned = pair
    system, learned_system, p_true, p_learned = pendulum_pair
    arm = simulations.PlanarArm(damping=0.2)
    state = arm.sample_state(1, rng=2)
    arm_true = lnn.rollout(arm, state.q, state.qd, np.linspace(0, 1, 41))
    return {
        "trajectory": lambda: plot.trajectories(true, learned),
        "trajectory-band": lambda: plot.trajectories(
            oscillator(2.0, batch=12), oscillator(2.1, batch=12), summary="band"
        ),
        "phase": lambda: plot.phase_portraits(true, learned),
        "energy": lambda: plot.energy_error({"LNN": learned, "true": true}),
        "error": lambda: plot.rollout_error(true, {"LNN": learned}),
        "mass-matrix": lambda: plot.mass_matrix(system, learned_system),
        "potential-1d": lambda: plot.potential(simulations.Pendulum(), replace(simulations.Pendulum(), m=1.1)),
        "potential-2d": lambda: plot.potential(system, learned_system, coordinates=(0, 1)),
        "torques": lambda: plot.torques(arm, arm_true, replace(arm, damping=0.25)),
        "history": lambda: plot.history(history_columns()),
        "paper": lambda: plot.paper_figure(p_true, p_learned, system=system),
    }


KINDS = (
    "trajectory",
    "trajectory-band",
    "phase",
    "energy",
    "error",
    "mass-matrix",
    "potential-1d",
    "potential-2d",
    "torques",
    "history",
    "paper",
)


# --------------------------------------------------------------------------- file checks
def check_pdf(path):
    data = path.read_bytes()
    assert data.startswith(b"%PDF-")
    assert data.rstrip().endswith(b"%%EOF")
    assert len(data) > 2000


def labels_carry_units(figure):
    """Every axis label names a unit in brackets (the epoch counter excepted)."""
    labels = []
    for ax in figure.axes:
        labels += [ax.get_xlabel(), ax.get_ylabel()]
        if hasattr(ax, "get_zlabel"):
            labels.append(ax.get_zlabel())
    labels = [text for text in labels if text]
    assert labels, "no axis is labelled"
    for text in labels:
        assert text == "epoch" or re.search(r"\[[^\]]+\]", text), f"label {text!r} has no unit"


# --------------------------------------------------------------------------- rendering
@pytest.mark.parametrize("kind", KINDS)
def test_every_kind_renders_to_png_and_pdf(kind, pair, pendulum_pair, tmp_path):
    before = dict(matplotlib.rcParams)
    result = kinds(pair, pendulum_pair)[kind]()
    assert dict(matplotlib.rcParams) == before, "plotting changed the global rcParams"
    width, height = result.figure.get_size_inches()
    png = plot.save(result.figure, tmp_path / f"{kind}.png")
    check_png(png, (round(width * 300), round(height * 300)))
    check_pdf(plot.save(result.figure, tmp_path / f"{kind}.pdf"))
    labels_carry_units(result.figure)
    assert dict(matplotlib.rcParams) == before, "saving changed the global rcParams"


def test_single_column_size_and_svg(pair, tmp_path):
    result = plot.trajectories(*pair)
    png = plot.save(result.figure, tmp_path / "t.png")
    check_png(png, (1020, 720))  # 3.4 x 2.4 in at 300 dpi
    svg = plot.save(result.figure, tmp_path / "t.svg").read_text()
    assert "<svg" in svg[:500]


def test_no_pyplot_figures_are_created(pair):
    import matplotlib.pyplot as plt

    open_before = plt.get_fignums()
    plot.trajectories(*pair)
    plot.energy_error(pair[0])
    assert plt.get_fignums() == open_before


def test_drawing_into_given_axes_and_figure(pair):
    from matplotlib.figure import Figure

    fig = Figure()
    ax = fig.add_subplot()
    result = plot.rollout_error(pair[0], pair[1], ax=ax)
    assert result.ax is ax and result.figure is fig
    sub = Figure().subfigures(1, 2)[0]
    assert plot.trajectories(*pair, fig=sub).figure is sub


# --------------------------------------------------------------------------- style and save
def test_style_is_scoped_and_nests():
    before = dict(matplotlib.rcParams)
    with plot.style(font_size=11):
        assert matplotlib.rcParams["font.size"] == 11
        assert matplotlib.rcParams["text.usetex"] is False
        assert matplotlib.rcParams["savefig.dpi"] == 300
        with plot.style():  # an inner default keeps the outer settings
            assert matplotlib.rcParams["font.size"] == 11
    assert dict(matplotlib.rcParams) == before
    with pytest.raises(ValueError, match="font_size"):
        with plot.style(font_size=0):
            pass


def test_save_refuses_overwrite_and_bad_suffix(pair, tmp_path):
    figure = plot.phase_portraits(*pair).figure
    path = plot.save(figure, tmp_path / "p.png")
    with pytest.raises(FileExistsError, match="overwrite"):
        plot.save(figure, path)
    plot.save(figure, path, overwrite=True)
    with pytest.raises(ValueError, match=r"\.png, \.pdf, \.svg"):
        plot.save(figure, tmp_path / "p.jpg")
    with pytest.raises(FileNotFoundError, match="does not exist"):
        plot.save(figure, tmp_path / "missing" / "p.png")
    with pytest.raises(TypeError, match="fig must be a matplotlib Figure"):
        plot.save("not a figure", tmp_path / "q.png")


def test_palette_is_okabe_ito():
    assert list(plot.PALETTE.values())[:3] == ["#0072B2", "#D55E00", "#009E73"]
    assert plot.TRUE_COLOR == "#000000"


# --------------------------------------------------------------------------- animation
class Skeleton3D:
    """A two-link chain in 3-D: base at the origin, link 1 turning about z, link 2 about x."""

    n_dof = 2
    angular = (True, True)

    def positions(self, q):
        q = np.asarray(q, dtype=float)
        elbow = np.stack([np.cos(q[..., 0]), np.sin(q[..., 0]), np.ones_like(q[..., 0])], -1)
        hand = elbow + np.stack([np.zeros_like(q[..., 1]), np.sin(q[..., 1]), -np.cos(q[..., 1])], -1)
        base = np.zeros_like(elbow)
        return np.stack([base, elbow, hand], axis=-2)


def count_frames(path):
    with Image.open(path) as image:
        return sum(1 for _ in ImageSequence.Iterator(image))


def test_gif_of_a_double_pendulum_has_the_expected_frames(pendulum_pair, tmp_path):
    system, _, true, learned = pendulum_pair
    before = dict(matplotlib.rcParams)
    result = plot.animate(system, true, learned, stride=6, fps=10)
    assert result.n_frames == len(range(0, true.t.size, 6)) == 11
    assert result.positions["true"].shape == (11, 3, 2)  # pivot + two bobs, planar
    np.testing.assert_allclose(result.positions["learned"][0], result.positions["true"][0])
    path = plot.save_animation(result, tmp_path / "pendulum.gif", dpi=40)
    assert path.read_bytes()[:6] in (b"GIF89a", b"GIF87a")
    assert count_frames(path) == 11
    assert dict(matplotlib.rcParams) == before


def test_cart_pole_side_by_side_and_3d_skeleton(tmp_path):
    cart = simulations.CartPole()
    state = cart.sample_state(1, rng=1)
    t = np.linspace(0, 1, 21)
    true = lnn.rollout(cart, state.q, state.qd, t)
    side = plot.animate(cart, true, true, layout="side-by-side", stride=4)
    assert len(side.axes) == 2 and side.n_frames == 6
    assert count_frames(plot.save_animation(side, tmp_path / "cart.gif", dpi=40)) == 6

    q = np.stack([np.linspace(0, 3, 16), np.linspace(0, -2, 16)], -1)[None]
    skeleton = Trajectory(
        t=np.linspace(0, 1.5, 16),
        q=q,
        qd=np.zeros_like(q),
        qdd=np.zeros_like(q),
        tau=np.zeros_like(q),
        energy=np.zeros((1, 16)),
    )
    result = plot.animate(Skeleton3D(), skeleton, stride=3)
    assert result.axes[0].name == "3d" and result.n_frames == 6
    labels_carry_units(result.figure)
    assert count_frames(plot.save_animation(result, tmp_path / "robot.gif", dpi=40)) == 6


def test_mp4_needs_ffmpeg(pendulum_pair, tmp_path):
    from matplotlib import animation

    system, _, true, _ = pendulum_pair
    result = plot.animate(system, true, stride=20)
    if animation.writers.is_available("ffmpeg"):
        assert plot.save_animation(result, tmp_path / "a.mp4", dpi=40).stat().st_size > 0
    else:
        with pytest.raises(RuntimeError, match="ffmpeg"):
            plot.save_animation(result, tmp_path / "a.mp4")
    with pytest.raises(ValueError, match=r"\.gif, \.mp4"):
        plot.save_animation(result, tmp_path / "a.avi")


# --------------------------------------------------------------------------- mechanics drawn
@pytest.mark.parametrize("damping", [0.0, 0.3])
def test_torque_decomposition_matches_the_mechanics(damping):
    arm = simulations.PlanarArm(damping=damping)
    rng = np.random.default_rng(0)
    q, qd, qdd = rng.normal(size=(3, 5, 2))
    parts = plot.torque_decomposition(arm, q, qd, qdd)
    np.testing.assert_allclose(
        parts.inertial + parts.coriolis + parts.gravity + parts.friction, parts.total, atol=1e-12
    )
    np.testing.assert_allclose(parts.total, arm.inverse_dynamics(q, qd, qdd), atol=1e-12)
    # inertial = M(q) qdd
    np.testing.assert_allclose(parts.inertial, np.einsum("bij,bj->bi", arm.mass_matrix(q), qdd), atol=1e-12)
    # gravity = dV/dq, by central differences of the potential
    h = 1e-6
    grad = np.stack(
        [(arm.potential_energy(q + h * e) - arm.potential_energy(q - h * e)) / (2 * h) for e in np.eye(2)], -1
    )
    np.testing.assert_allclose(parts.gravity, grad, atol=1e-6)
    # viscous friction D qd, and Coriolis/centrifugal forces quadratic in qd
    np.testing.assert_allclose(parts.friction, damping * qd, atol=1e-12)
    doubled = plot.torque_decomposition(arm, q, 2 * qd, qdd)
    np.testing.assert_allclose(doubled.coriolis, 4 * parts.coriolis, atol=1e-10)


def test_torques_figure_leaves_out_zero_friction(pendulum_pair):
    system, learned_system, true, _ = pendulum_pair
    result = plot.torques(system, true, learned_system, index=1)
    assert "friction" not in result.lines and set(result.lines) >= {"inertial", "gravity"}
    assert result.true.total.shape == (true.t.size, 2)
    np.testing.assert_allclose(
        result.learned.total, learned_system.inverse_dynamics(true.q[1], true.qd[1], true.qdd[1])
    )


def test_mass_matrix_slice_and_error(pendulum_pair):
    system, learned_system, _, _ = pendulum_pair
    values = np.linspace(-1, 1, 9)
    result = plot.mass_matrix(system, learned_system, coordinate=1, values=values, q_ref=[0.3, 0.0])
    np.testing.assert_allclose(result.q[:, 1], values)
    np.testing.assert_allclose(result.q[:, 0], 0.3)
    np.testing.assert_allclose(result.true, system.mass_matrix(result.q))
    data = result.images["error"].get_array()
    rows, cols = np.triu_indices(2)
    np.testing.assert_allclose(data, (result.learned - result.true)[:, rows, cols].T)
    # M11 = (m1 + m2) l1², so a heavier second bob adds 0.15 kg m² everywhere
    np.testing.assert_allclose(data[0], 0.15, atol=1e-12)


def test_potential_of_a_pendulum_is_the_closed_form():
    pendulum = simulations.Pendulum(m=2.0, l=0.5)
    result = plot.potential(pendulum, resolution=41)
    q = result.grid[0]
    np.testing.assert_allclose(result.true, 2.0 * 9.81 * 0.5 * (1 - np.cos(q)), atol=1e-12)
    assert result.learned is None


def test_a_learned_model_is_drawn_alone_when_there_is_no_truth(pendulum_pair):
    """A robot learned from logs has no true system: its M and V are drawn alone, labelled learned."""
    system, learned_system, _, _ = pendulum_pair
    values = np.linspace(-1, 1, 9)
    alone = plot.mass_matrix(None, learned_system, coordinate=1, values=values)
    assert set(alone.images) == {"learned"} and alone.true is None
    np.testing.assert_allclose(alone.learned, learned_system.mass_matrix(alone.q))
    assert "learned" in alone.axes["learned"].get_title(loc="left")
    for coordinates in ((0,), (0, 1)):
        drawn = plot.potential(None, learned_system, coordinates=coordinates, resolution=11)
        assert drawn.true is None and set(drawn.artists) == {"learned"}
        both = plot.potential(system, learned_system, coordinates=coordinates, resolution=11)
        np.testing.assert_allclose(drawn.learned, both.learned)
    with pytest.raises(ValueError, match="give the true system, the learned model or both; got neither"):
        plot.mass_matrix(None)
    with pytest.raises(ValueError, match="got neither"):
        plot.potential(None, None)


# --------------------------------------------------------------------------- errors drawn
def test_rollout_error_uses_the_metrics_definition(pair):
    true, learned = pair
    result = plot.rollout_error(true, {"LNN": learned}, threshold=0.05)
    expected = metrics.rollout_error(learned, true, threshold=0.05, angular=(True, False))
    np.testing.assert_allclose(result.errors["LNN"], expected.relative)
    assert result.valid_time["LNN"] == pytest.approx(np.median(expected.valid_time))
    assert 0 < result.valid_time["LNN"] < true.t[-1]
    same = plot.rollout_error(true, true)
    assert np.all(same.errors["learned"] < 1e-15)
    assert same.valid_time["learned"] == pytest.approx(true.t[-1])


def test_energy_error_drift_and_reference(pair, pendulum_pair):
    true, _ = pair
    drifting = replace(true, energy=true.energy * (1 + 0.01 * true.t))
    result = plot.energy_error({"model": drifting}, scale=2.0)
    np.testing.assert_allclose(result.errors["model"], np.abs(true.energy * 0.01 * true.t) / 2.0, atol=1e-14)
    system, _, p_true, p_learned = pendulum_pair
    reference = plot.energy_error(p_learned, reference=p_true, system=system, scale=29.4)
    expected = metrics.energy_error(system, p_learned, p_true, scale=29.4).error
    np.testing.assert_allclose(reference.errors["rollout"], expected)
    with pytest.raises(ValueError, match="system="):
        plot.energy_error(p_learned, reference=p_true)


def test_history_from_columns_csv_and_history(tmp_path):
    columns = history_columns()
    result = plot.history(columns)
    assert result.best_epoch == int(np.argmin(columns["val_total"]))
    assert set(result.lines) == {"train_total", "val_total", "train_acceleration", "train_energy"}
    single = plot.history(
        {"epoch": columns["epoch"], "train_total": columns["train_total"], "train_acceleration": columns["train_total"]}
    )
    assert set(single.lines) == {"train_total"}  # one term: its total is the same curve
    path = tmp_path / "log.csv"
    header = ["epoch", "time", "lr"] + [k for k in columns if k != "epoch"]
    lines = [",".join(header)] + [
        ",".join(str(float(columns[h][i])) if h in columns else "0.1" for h in header) for i in range(30)
    ]
    path.write_text("\n".join(lines) + "\n")
    from_csv = plot.history(path, terms=["total"])
    assert set(from_csv.lines) == {"train_total", "val_total"}
    np.testing.assert_allclose(from_csv.lines["val_total"].get_ydata(), columns["val_total"])
    with pytest.raises(ValueError, match="terms must be among"):
        plot.history(path, terms=["nonsense"])
    with pytest.raises(FileNotFoundError):
        plot.history(tmp_path / "missing.csv")


# --------------------------------------------------------------------------- results file
def test_rollout_pair_round_trip(pair, tmp_path):
    true, learned = pair
    saved = plot.RolloutPair(true, learned, {"system": "oscillator", "angular": [True, False]})
    path = tmp_path / "pair.npz"
    saved.save(path)
    loaded = plot.RolloutPair.load(path)
    for name in ("q", "qd", "qdd", "tau", "energy"):
        np.testing.assert_array_equal(getattr(loaded.true, name), getattr(true, name))
        np.testing.assert_array_equal(getattr(loaded.learned, name), getattr(learned, name))
    assert loaded.metadata["system"] == "oscillator"
    assert loaded.true.metadata["angular"] == [True, False]
    with pytest.raises(FileExistsError):
        saved.save(path)
    with pytest.raises(ValueError, match="rollout-pair"):
        Trajectory.load(path)
    with pytest.raises(ValueError, match="learned.q must have the shape"):
        plot.RolloutPair(true, true[:2])


# --------------------------------------------------------------------------- bad input
def test_bad_input_names_the_argument(pair, pendulum_pair):
    true, learned = pair
    with pytest.raises(TypeError, match="true must be an lnn.Trajectory"):
        plot.trajectories(true.q)
    with pytest.raises(ValueError, match="coordinates must be indices"):
        plot.trajectories(true, coordinates=[5])
    with pytest.raises(ValueError, match="summary must be one of"):
        plot.trajectories(true, summary="violin")
    with pytest.raises(ValueError, match=r"learned.t must be the time grid"):
        plot.phase_portraits(true, oscillator(2.0, duration=3.0))
    with pytest.raises(ValueError, match="threshold must lie in"):
        plot.rollout_error(true, learned, threshold=2.0)
    with pytest.raises(TypeError, match="rollouts must be an lnn.Trajectory or a mapping"):
        plot.energy_error([true])
    system = pendulum_pair[0]
    with pytest.raises(ValueError, match="coordinates must name one or two"):
        plot.potential(simulations.NPendulum(), coordinates=(0, 1, 2))
    with pytest.raises(ValueError, match="q_ref must have shape"):
        plot.mass_matrix(system, q_ref=[0.0])
    with pytest.raises(TypeError, match="positions"):
        plot.animate(object(), true)
    with pytest.raises(ValueError, match="layout must be one of"):
        plot.animate(system, true, layout="grid")
