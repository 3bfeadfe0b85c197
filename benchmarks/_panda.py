"""A simulated Franka Panda's torque logs, written as a robot writes them: the 7-DOF case of issue 30.

The truth is ``simulations.panda`` with a friction **outside** the linear
family of ``lnn``'s friction terms and of ``lnn.baseline.least_squares``
(:data:`FRICTION`, a :class:`simulations.StribeckFriction`: Stribeck peak,
asymmetry, position modulation) and a 0.8 kg payload 10 cm along joint 7's
axis, about at the flange, that the URDF lacks (:data:`PAYLOAD`); the prior
is the plain URDF,
``simulations.panda()``.

Each recording is a joint-impedance controller, as a Panda runs one,
tracking a smooth random excitation (a sum of three sinusoids of 0.1-0.5 Hz
per joint around a random centre, peak rates :data:`PEAK_VELOCITY`, inside
the joint limits):

    tau = g_nominal(q) + K (q_ref - q) + D (qd_ref - qd),

with the Franka examples' gains :data:`STIFFNESS`, :data:`DAMPING` and the
URDF's gravity (the controller does not know the payload). An open-loop
excitation (``lnn.generate(..., tau="gravity-sinusoids")``, the previous
benchmark's) peaks at ``0.5 s^-2`` times the median ``M_jj``: a few
thousandths of a N m on joint 7, far below its friction, so the distal
joints stuck (joint 7's rate had a standard deviation of 0.005 rad/s). The closed loop drives every joint
through reversals and the Stribeck region, and the arm cannot run away.

The logs carry what a real one does: encoder noise :data:`ENCODER_NOISE`
(rad), torque noise :data:`TORQUE_NOISE` (N m), a constant torque-sensor bias
per recording and joint drawn from N(0, :data:`BIAS_STD`), at 1 kHz. They are
CSV files (``time, q1..q7, tau1..tau7``) in a temporary folder, read back
through ``lnn.Dataset.from_csv(..., angular=True)``.

Usage::

    python benchmarks/_panda.py            # the figures: motion, friction share, least squares' baseline
    python benchmarks/_panda.py --linear   # control: a linear-family friction, which least squares fits
"""

from __future__ import annotations

import argparse
import dataclasses
import shutil
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

import numpy as np

import lnn
import simulations

__all__ = [
    "FRICTION",
    "LINEAR_FRICTION",
    "PAYLOAD",
    "STIFFNESS",
    "DAMPING",
    "PEAK_VELOCITY",
    "STEP",
    "ENCODER_NOISE",
    "TORQUE_NOISE",
    "BIAS_STD",
    "PandaLogs",
    "simulated_panda_logs",
    "simulated_panda_log",
    "friction_share",
    "torque_mse",
    "least_squares_baseline",
]

ROOT = Path(__file__).resolve().parents[1]

#: The truth's joint friction, in the ranges identified on real Pandas: Coulomb 0.3-0.6 N m, larger on the
#: proximal joints (Gaz et al., RA-L 2019, identify sigmoids of height 2c = 0.30-1.28 N m), static 1.5x Coulomb
#: over Stribeck velocities of 0.12-0.2 rad/s, viscous 0.05-0.2 N m s/rad, 15-20 % asymmetry and a 25-30 %
#: modulation with the joint's position (phases spread over the joints). The smoothed sign's velocity v0 =
#: 0.03 rad/s is sharper than Gaz's sigmoids (2 / phi_2 = 0.12-0.39 rad/s), so that the Stribeck peak shows.
FRICTION = simulations.StribeckFriction(
    viscous=(0.18, 0.2, 0.15, 0.15, 0.08, 0.07, 0.05),
    coulomb=(0.6, 0.6, 0.55, 0.55, 0.45, 0.4, 0.3),
    static=(0.9, 0.9, 0.825, 0.825, 0.675, 0.6, 0.45),
    stribeck_velocity=(0.15, 0.12, 0.15, 0.12, 0.18, 0.2, 0.2),
    asymmetry=(0.2, -0.15, 0.2, -0.2, 0.15, 0.2, -0.2),
    modulation=(0.3, 0.25, 0.3, 0.25, 0.3, 0.25, 0.3),
    phase=(0.0, 1.0, -0.5, 2.0, 0.7, -1.2, 0.3),
    velocity=0.03,
)
#: The control: viscous + Coulomb at the same levels, a friction least squares' columns represent exactly.
LINEAR_FRICTION = simulations.Friction(viscous=FRICTION.viscous, coulomb=FRICTION.coulomb, velocity=FRICTION.velocity)
#: A load the URDF does not know: 0.8 kg, 10 cm along the axis of panda_joint7 (its frame's z).
PAYLOAD = simulations.Payload(mass=0.8, com=(0.0, 0.0, 0.1))
#: Joint-impedance gains of the Franka examples (franka_ros joint_impedance_example), N m/rad and N m s/rad.
STIFFNESS = np.array([600.0, 600.0, 600.0, 600.0, 250.0, 150.0, 50.0])
DAMPING = np.array([50.0, 50.0, 50.0, 50.0, 30.0, 25.0, 15.0])
#: Peak reference rate per joint (rad/s), 30 % of the Panda's limits (2.175 and 2.61 rad/s).
PEAK_VELOCITY = np.array([0.65, 0.65, 0.65, 0.65, 0.8, 0.8, 0.8])
STEP = 0.001  # 1 kHz
ENCODER_NOISE = 1e-4  # rad
TORQUE_NOISE = 0.02  # N m
BIAS_STD = 0.05  # N m, one constant per recording and joint
_FREQUENCIES = (0.1, 0.5)  # Hz, band of the excitation's sinusoids
_COMPONENTS = 3
_MARGIN = 0.15  # rad kept clear of each joint limit
_SETTLE = 0.3  # s of tracking simulated before the log starts
_COLUMNS = [f"q{j + 1}" for j in range(7)] + [f"tau{j + 1}" for j in range(7)]


@dataclass(frozen=True)
class PandaLogs:
    """The simulated Panda's logs and what a benchmark compares against.

    Attributes
    ----------
    train, test : lnn.Dataset
        The recordings read back by ``Dataset.from_csv`` (one trajectory id per file).
    truth : simulations.URDFRobot
        The Panda with :data:`FRICTION` (or the friction asked) and :data:`PAYLOAD`.
    nominal : simulations.URDFRobot
        ``simulations.panda()``: the URDF as shipped, the prior.
    folder : pathlib.Path
        The temporary folder of the CSV files (the caller may delete it).
    train_files, test_files : tuple of pathlib.Path
        The CSV files.
    biases : ndarray, shape ``(n_train + n_test, 7)``
        The torque-sensor bias of each recording (N m), train first.
    recordings : lnn.Trajectory
        The noise-free truth on the 1 kHz grid (``tau`` the applied torque), train first.
    simulation_seconds, import_seconds : float
        Wall time of the simulation and the CSV writing, and of ``Dataset.from_csv``.
    """

    train: lnn.Dataset
    test: lnn.Dataset
    truth: simulations.URDFRobot
    nominal: simulations.URDFRobot
    folder: Path
    train_files: tuple[Path, ...]
    test_files: tuple[Path, ...]
    biases: np.ndarray
    recordings: lnn.Trajectory
    simulation_seconds: float
    import_seconds: float


def _excitation(rng: np.random.Generator, lower: np.ndarray, upper: np.ndarray, duration: float):
    """Random sums of sinusoids per joint: ``q_ref(t), qd_ref(t)`` of shape ``(7,)``, inside the limits."""
    n = len(lower)
    frequency = 2 * np.pi * rng.uniform(*_FREQUENCIES, (_COMPONENTS, n))
    phase = rng.uniform(0, 2 * np.pi, (_COMPONENTS, n))
    weight = rng.normal(0, 1, (_COMPONENTS, n))
    grid = np.linspace(0.0, duration, 2001)[:, None, None]
    rate = np.sum(weight * np.cos(frequency * grid + phase), axis=1)  # (2001, n)
    shape = np.sum(weight / frequency * np.sin(frequency * grid + phase), axis=1)
    scale = PEAK_VELOCITY * rng.uniform(0.6, 1.0, n) / np.abs(rate).max(axis=0)
    half = 0.5 * (upper - lower) - _MARGIN
    swing = np.abs(shape * scale).max(axis=0)
    scale = np.where(swing > 0.8 * half, scale * 0.8 * half / swing, scale)  # keep the swing within the limits
    room = half - np.abs(shape * scale).max(axis=0)
    centre = 0.5 * (upper + lower) + rng.uniform(-1, 1, n) * room
    w = weight * scale

    def reference(t: float) -> tuple[np.ndarray, np.ndarray]:
        angle = frequency * t + phase
        return centre + np.sum(w / frequency * np.sin(angle), axis=0), np.sum(w * np.cos(angle), axis=0)

    return reference


def _record(truth, nominal, references, duration: float) -> lnn.Trajectory:
    """Roll the truth out under the impedance controller, all recordings at once (rows in order).

    The controller starts on its reference, where it lacks the torque of the
    friction and the payload: the first :data:`_SETTLE` seconds of tracking
    are simulated and not logged (the log starts on a moving robot).
    """
    t = np.arange(round((duration + _SETTLE) / STEP) + 1) * STEP
    start = [ref(0.0) for ref in references]
    q0, qd0 = np.array([s[0] for s in start]), np.array([s[1] for s in start])

    def controller(time_: float, q: np.ndarray, qd: np.ndarray) -> np.ndarray:
        if q.shape[0] != len(references):
            raise RuntimeError(f"the controller expects the whole batch of {len(references)} recordings")
        wanted = [ref(time_) for ref in references]
        q_ref, qd_ref = np.array([w[0] for w in wanted]), np.array([w[1] for w in wanted])
        gravity = nominal.inverse_dynamics(q, np.zeros_like(q), np.zeros_like(q))
        return gravity + STIFFNESS * (q_ref - q) + DAMPING * (qd_ref - qd)

    full = lnn.rollout(truth, q0, qd0, t, tau=controller, method="DOP853", rtol=1e-6, atol=1e-8)
    keep = slice(round(_SETTLE / STEP), None)
    return dataclasses.replace(
        full,
        t=full.t[keep] - full.t[keep][0],
        q=full.q[:, keep],
        qd=full.qd[:, keep],
        qdd=full.qdd[:, keep],
        tau=full.tau[:, keep],
        energy=full.energy[:, keep],
    )


def _log_folder(folder: str | Path | None, prefix: str) -> Path:
    """The folder given (outside the project, created if missing), or a new temporary one named ``prefix...``."""
    folder = _outside_project(Path(tempfile.mkdtemp(prefix=prefix)) if folder is None else Path(folder))
    folder.mkdir(parents=True, exist_ok=True)
    return folder


def _outside_project(folder: Path) -> Path:
    folder = folder.resolve()
    if folder == ROOT or ROOT in folder.parents:
        raise ValueError(f"folder must lie outside the project tree {ROOT}; got {folder}")
    return folder


def simulated_panda_logs(
    *,
    seed: int = 0,
    n_train: int = 8,
    n_test: int = 2,
    duration: float = 2.5,
    friction=FRICTION,
    folder: str | Path | None = None,
    window: int | None = None,
) -> PandaLogs:
    """Simulate the Panda, write its logs as CSV files and read them back.

    Parameters
    ----------
    seed : int
        Seeds the excitations, the noise and the biases: equal seeds give equal logs.
    n_train, n_test : int
        Recordings of the training and test sets (the test ones are the last).
    duration : float
        Length of each recording (s). ``Dataset.from_csv`` trims half a
        derivative window at each end: 2.5 s give about 1 900 samples per
        recording, 15 000 for 8.
    friction : simulations.StribeckFriction or simulations.Friction
        The truth's friction (:data:`FRICTION`; :data:`LINEAR_FRICTION` for the control).
    folder : str or Path, optional
        Where the CSV files go (outside the project); default: a new temporary folder.
    window : int, optional
        The Savitzky-Golay window of the import (``lnn.logs.import_csv``); default: the one the training
        logs' torques choose, the test logs read with it (:func:`_read`).

    Returns
    -------
    PandaLogs
    """
    t0 = time.perf_counter()
    truth = simulations.panda(friction=friction, payload=PAYLOAD)
    nominal = simulations.panda()
    rng = np.random.default_rng(seed)
    lower, upper = truth.position_limits
    n = n_train + n_test
    references = [_excitation(rng, lower, upper, duration + _SETTLE) for _ in range(n)]
    recordings = _record(truth, nominal, references, duration)
    folder = _log_folder(folder, "lnn-panda-logs-")
    biases = rng.normal(0.0, BIAS_STD, (n, 7))
    paths = []
    for k in range(n):  # logs as a robot writes them: noisy encoders, a noisy and biased torque sensor
        q, tau = _measured(recordings, k, biases[k], rng)
        paths.append(_write(folder / f"panda_{k:02d}.csv", recordings.t, q, tau))
    simulated = time.perf_counter()
    train, test = _read(paths[:n_train], paths[n_train:], window)
    return PandaLogs(
        train=train,
        test=test,
        truth=truth,
        nominal=nominal,
        folder=folder,
        train_files=tuple(paths[:n_train]),
        test_files=tuple(paths[n_train:]),
        biases=biases,
        recordings=recordings,
        simulation_seconds=simulated - t0,
        import_seconds=time.perf_counter() - simulated,
    )


def simulated_panda_log(
    *,
    seed: int = 0,
    duration: float = 21.0,
    train_fraction: float = 0.7,
    friction=FRICTION,
    folder: str | Path | None = None,
    window: int | None = None,
) -> PandaLogs:
    """One long log of the simulated Panda, its first ``train_fraction`` to train on and the rest held out.

    The case of issue 30's real 7-DOF arm: one recording at 1 kHz, the last
    30 % held out (14.6 s to train on there; here 21 s give 14.7 s), so the
    held-out part is later in time and reaches states the training part did
    not (the excitation's sinusoids of 0.1-0.5 Hz have not repeated). The
    recording is simulated and noised as :func:`simulated_panda_logs` does
    and written as two CSV files (its rows before and after the cut), each
    read back by ``Dataset.from_csv``, which trims half a derivative window
    at the cut too.

    Parameters
    ----------
    seed : int
    duration : float
        Length of the recording (s).
    train_fraction : float
        The share of its rows (in time order) to train on.
    friction, folder, window
        As for :func:`simulated_panda_logs`.

    Returns
    -------
    PandaLogs
        ``biases`` of shape ``(2, 7)``: the recording's one bias, for each file.
    """
    if not 0.0 < train_fraction < 1.0:
        raise ValueError(f"train_fraction must lie in (0, 1), got {train_fraction}")
    t0 = time.perf_counter()
    truth = simulations.panda(friction=friction, payload=PAYLOAD)
    nominal = simulations.panda()
    rng = np.random.default_rng(seed)
    lower, upper = truth.position_limits
    recordings = _record(truth, nominal, [_excitation(rng, lower, upper, duration + _SETTLE)], duration)
    folder = _log_folder(folder, "lnn-panda-log-")
    bias = rng.normal(0.0, BIAS_STD, 7)
    q, tau = _measured(recordings, 0, bias, rng)
    cut = round(train_fraction * len(recordings.t))
    parts = (slice(0, cut), slice(cut, None))
    paths = [_write(folder / f"panda_{name}.csv", recordings.t[part], q[part], tau[part])
             for name, part in zip(("train", "test"), parts)]  # fmt: skip
    simulated = time.perf_counter()
    train, test = _read(paths[:1], paths[1:], window)
    return PandaLogs(
        train=train,
        test=test,
        truth=truth,
        nominal=nominal,
        folder=folder,
        train_files=(paths[0],),
        test_files=(paths[1],),
        biases=np.stack([bias, bias]),
        recordings=recordings,
        simulation_seconds=simulated - t0,
        import_seconds=time.perf_counter() - simulated,
    )


def _read(train_paths, test_paths, window) -> tuple[lnn.Dataset, lnn.Dataset]:
    """The training and test logs read back as a user reads them, the test logs with the training's window.

    ``lnn.logs.import_csv`` chooses the derivative window where the motion
    explains the measured torques best; read alone, the test logs would have
    their window chosen by their own torques, the very targets of the score.
    So they are read with the window the training logs got (the spectral
    rule's, per coordinate, where the torques did not decide), as a model is
    fed new logs of its robot.
    """
    from functools import partial

    from lnn.logs import import_csv

    read = partial(import_csv, time="time", q=_COLUMNS[:7], tau=_COLUMNS[7:], angular=True)
    train = read(list(train_paths), window=window)
    test = read(list(test_paths), window=train.dataset.window_rule)
    return train.dataset, test.dataset


def _measured(recordings: lnn.Trajectory, k: int, bias: np.ndarray, rng: np.random.Generator):
    """Recording ``k`` as a robot logs it: noisy encoders, a noisy and biased torque sensor (``q, tau``)."""
    q = recordings.q[k] + ENCODER_NOISE * rng.standard_normal(recordings.q[k].shape)
    tau = recordings.tau[k] + bias + TORQUE_NOISE * rng.standard_normal(recordings.tau[k].shape)
    return q, tau


def _write(path: Path, t: np.ndarray, q: np.ndarray, tau: np.ndarray) -> Path:
    """A CSV file ``time, q1..q7, tau1..tau7``."""
    np.savetxt(path, np.column_stack([t, q, tau]), delimiter=",", fmt="%.9g",
               header=",".join(["time", *_COLUMNS]), comments="")  # fmt: skip
    return path


def torque_mse(model, data: lnn.Dataset) -> np.ndarray:
    """Held-out torque MSE per joint (N^2 m^2) of ``model.inverse_dynamics`` on ``data``, shape ``(7,)``."""
    predicted = np.asarray(model.inverse_dynamics(data.q, data.qd, data.qdd), dtype=np.float64)
    return np.mean((predicted - data.tau) ** 2, axis=0)


def friction_share(logs: PandaLogs) -> dict[str, np.ndarray]:
    """How much the friction matters, per joint.

    Returns
    -------
    dict of ndarray, each of shape ``(7,)``
        ``friction_std``: standard deviation of the true friction torque over
        every recording's noise-free states (N m); ``measured_std``: of the
        measured torque read back (train and test); ``share``: the friction's
        variance over the measured torque's; ``linear_misfit``: the mean
        square (N^2 m^2) that the best ``b qd + c tanh(qd / v0) + o`` per
        joint (least squares on the friction itself, ``v0`` the truth's)
        leaves of the friction: what least squares' friction columns cannot
        represent even with every other term exact; ``noise``: the torque
        noise's variance plus the recordings' mean square bias (N^2 m^2).
    """
    rec = logs.recordings
    q, qd = rec.q.reshape(-1, 7), rec.qd.reshape(-1, 7)
    friction = logs.truth.friction.torque(qd, q=q)
    misfit = np.empty(7)
    for j in range(7):
        columns = np.column_stack([qd[:, j], np.tanh(qd[:, j] / logs.truth.friction.velocity), np.ones(len(qd))])
        coefficients, *_ = np.linalg.lstsq(columns, friction[:, j], rcond=None)
        misfit[j] = np.mean((columns @ coefficients - friction[:, j]) ** 2)
    measured = np.concatenate([logs.train.tau, logs.test.tau])
    return {
        "friction_std": friction.std(axis=0),
        "measured_std": measured.std(axis=0),
        "share": friction.var(axis=0) / measured.var(axis=0),
        "linear_misfit": misfit,
        "noise": TORQUE_NOISE**2 + np.mean(logs.biases**2, axis=0),
    }


def least_squares_baseline(logs: PandaLogs) -> dict[str, np.ndarray]:
    """Held-out torque MSE per joint on the test recordings: least squares and the truth's floor.

    Least squares is ``lnn.baseline.least_squares(train, nominal, friction="viscous+coulomb")``
    (the base parameters of the URDF's chain, viscous + Coulomb + offset per
    joint), plain and physically consistent, with the truth's smoothing
    velocity (the same friction columns) and with ``lnn``'s default 0.01 rad/s;
    least squares with the refinements of Coulomb (``stribeck``, ``position_coulomb``: columns that
    ``lnn.identify``'s validation may add); then least squares on the torques less the true friction (train and test),
    what a perfect friction model would leave to the rigid body. The truth's
    own MSE on the test logs is the floor no model passes: the noise, the
    test recordings' biases (unknowable from the training logs) and the error
    of the estimated derivatives.

    Returns
    -------
    dict of str to ndarray of shape ``(7,)``
    """
    from lnn.baseline import least_squares

    v0 = logs.truth.friction.velocity
    out = {}
    for label, physical, velocity in (
        (f"least squares, v0 = {v0:g}", False, v0),
        (f"least squares, physical, v0 = {v0:g}", True, v0),
        ("least squares, v0 = 0.01 (lnn's default)", False, 0.01),
    ):
        fit = least_squares(
            logs.train, logs.nominal, friction="viscous+coulomb", friction_velocity=velocity, physical=physical
        )
        out[label] = torque_mse(fit, logs.test)
    # the same least squares with the refinements of Coulomb that identify's validation may keep
    refined = "viscous+coulomb+stribeck+position_coulomb"
    fit = least_squares(logs.train, logs.nominal, friction=refined, friction_velocity=v0)
    out[f"least squares + Stribeck + position-dependent Coulomb, v0 = {v0:g}"] = torque_mse(fit, logs.test)

    # the bound of a perfect friction model: least squares on the torques less the true friction
    def frictionless(data):
        true = logs.truth.friction.torque(np.asarray(data.qd), q=np.asarray(data.q))
        return dataclasses.replace(data, tau=np.asarray(data.tau) - true)

    fit = least_squares(frictionless(logs.train), logs.nominal, friction="viscous+coulomb", friction_velocity=v0)
    out["least squares on the torques less the true friction"] = torque_mse(fit, frictionless(logs.test))
    out["the truth (floor)"] = torque_mse(logs.truth, logs.test)
    out["its noise + test biases^2"] = TORQUE_NOISE**2 + np.mean(logs.biases[len(logs.train_files) :] ** 2, axis=0)
    return out


def _row(label: str, values: np.ndarray, *, mean: bool = True, digits: int = 4) -> str:
    cells = " | ".join(f"{v:.{digits}f}" for v in values)
    return f"| {label} | {cells} |" + (f" {np.mean(values):.{digits}f} |" if mean else "")


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--linear", action="store_true", help="the control: a linear-family friction")
    parser.add_argument("--window", type=int, default=None, help="Savitzky-Golay window of the import")
    parser.add_argument("--keep", action="store_true", help="keep the CSV folder")
    args = parser.parse_args(argv)
    friction = LINEAR_FRICTION if args.linear else FRICTION
    logs = simulated_panda_logs(seed=args.seed, friction=friction, window=args.window)
    print(
        f"simulated Panda ({type(friction).__name__}, 0.8 kg payload), seed {args.seed}: "
        f"{logs.train.n_trajectories} train recordings ({len(logs.train)} samples), "
        f"{logs.test.n_trajectories} test ({len(logs.test)}); simulated and written in "
        f"{logs.simulation_seconds:.1f} s, imported in {logs.import_seconds:.1f} s; CSV in {logs.folder}"
    )
    joints = " | ".join(f"J{j + 1}" for j in range(7))
    print(f"\n| truth, every recording | {joints} |\n" + "|---" * 8 + "|")
    rec = logs.recordings
    centred = rec.q - rec.q.mean(axis=1, keepdims=True)
    for name, values in (("qd", rec.qd), ("qdd", rec.qdd), ("q - its recording's mean", centred)):
        print(_row(f"max abs {name}", np.abs(values).max(axis=(0, 1)), mean=False, digits=2))
        print(_row(f"std {name}", values.std(axis=(0, 1)), mean=False, digits=2))
    for key, values in friction_share(logs).items():
        print(_row(key, values, mean=False))
    print(f"\n| held-out torque MSE, N^2 m^2 | {joints} | mean |\n" + "|---" * 9 + "|")
    for label, mse in least_squares_baseline(logs).items():
        print(_row(label, mse), flush=True)
    if not args.keep:
        shutil.rmtree(logs.folder)


if __name__ == "__main__":
    main()
