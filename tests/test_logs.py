"""Tests of lnn.logs: measured CSV logs in (cleaning, gaps, resampling, derivative windows), in float64."""

from __future__ import annotations

import math

import numpy as np
import pytest

import lnn
from lnn.logs import choose_window, import_csv

#: A smooth two-joint motion: sums of sinusoids (amplitude rad, frequency Hz, phase rad).
MOTION = (((0.6, 0.35, 0.1), (0.4, 0.9, 1.0), (0.1, 2.1, 2.0)), ((0.5, 0.5, 0.3), (0.3, 1.3, 0.5), (0.08, 2.7, 1.5)))


def motion(t, derivative=0):
    """``q`` (or its derivative) of :data:`MOTION` at times ``t (T,)``, shape ``(T, 2)``."""
    t = np.asarray(t, dtype=np.float64)
    columns = []
    for joint in MOTION:
        value = np.zeros_like(t)
        for a, f, phi in joint:
            w = 2 * np.pi * f
            value += a * w**derivative * np.sin(w * t + phi + derivative * np.pi / 2)
        columns.append(value)
    return np.column_stack(columns)


def torque(t):
    """A smooth torque signal, shape ``(T, 2)``."""
    return np.column_stack([np.cos(2 * np.pi * 0.7 * t), 0.5 * np.sin(2 * np.pi * 1.1 * t)])


def write_log(path, t, q, tau, *, qd=None, extra=True):
    """Write a CSV log with a header (and an unused column, as real logs have)."""
    columns = {"time": t, "q1": q[:, 0], "q2": q[:, 1], "tau1": tau[:, 0], "tau2": tau[:, 1]}
    if qd is not None:
        columns.update({"qd1": qd[:, 0], "qd2": qd[:, 1]})
    if extra:
        columns["status"] = np.ones_like(t)
    np.savetxt(
        path, np.column_stack(list(columns.values())), delimiter=",", header=",".join(columns), comments="", fmt="%.17g"
    )


def messy_times(rng, duration, step, *, jitter, gap=None):
    """Jittered time stamps ``k step + U(-jitter, jitter)``, with an optional hole ``(start, length)``."""
    t = np.arange(int(round(duration / step)) + 1) * step
    t = t + rng.uniform(-jitter, jitter, t.shape)
    t[0] = 0.0
    if gap is not None:
        start, length = gap
        t = t[(t < start) | (t >= start + length)]
    return np.sort(t)


def with_duplicates(rng, t, q, tau, count):
    """Repeat ``count`` random rows (half of them with changed values): repeated time stamps."""
    rows = np.sort(rng.choice(np.arange(1, t.shape[0] - 1), size=count, replace=False))
    index = np.sort(np.concatenate([np.arange(t.shape[0]), rows]))
    t2, q2, tau2 = t[index], q[index].copy(), tau[index].copy()
    repeats = np.flatnonzero(np.diff(index) == 0) + 1
    changed = repeats[::2]
    q2[changed] += 1e-3  # a conflicting sample: the first of the two is kept
    return t2, q2, tau2


@pytest.fixture(scope="module")
def messy_logs(tmp_path_factory):
    """Two 1 kHz logs with jitter, noise and repeated samples; the first has a 0.3 s gap."""
    rng = np.random.default_rng(0)
    folder = tmp_path_factory.mktemp("logs")
    paths = []
    for i, gap in enumerate([(2.5, 0.3), None]):
        t = messy_times(rng, 6.0, 1e-3, jitter=2e-4, gap=gap)
        q = motion(t) + rng.normal(0.0, 2e-5, (t.shape[0], 2))
        t, q, tau = with_duplicates(rng, t, q, torque(t), 40)
        path = folder / f"log{i}.csv"
        write_log(path, t, q, tau)
        paths.append(path)
    return paths


def test_messy_logs_round_trip_to_the_analytic_motion(messy_logs):
    result = import_csv(messy_logs, time="time", q=["q1", "q2"], tau=["tau1", "tau2"])
    data, report = result.dataset, result.report
    # The gap splits the first log: 3 trajectories, numbered through the files in order.
    assert data.n_trajectories == 3
    assert [len(f.gaps) for f in report.files] == [1, 0]
    gap = report.files[0].gaps[0]
    assert 2.45 < gap.time < 2.5 and 0.29 < gap.duration < 0.31
    assert report.files[0].trajectories == (0, 1) and report.files[1].trajectories == (2,)
    assert [f.repeated for f in report.files] == [40, 40]
    assert [f.identical for f in report.files] == [20, 20]
    assert report.repeated == 80 and report.gaps == 1
    # One uniform step for the dataset, the median step of the logs.
    assert data.dt == pytest.approx(1e-3, rel=1e-3)
    for part in data.trajectories():
        np.testing.assert_allclose(np.diff(part.t), data.dt, rtol=0, atol=1e-12)
    assert all(f.resampled for f in report.files)
    # Windows from the rate and the noise: far above the old default of 11 samples at 1 kHz.
    windows = [w for f in report.files for w in f.window_qdd]
    assert min(windows) > 31
    t = data.t
    scale = {name: np.sqrt(np.mean(motion(t, k) ** 2, axis=0)) for k, name in enumerate(("q", "qd", "qdd"))}
    error = {
        name: np.sqrt(np.mean((getattr(data, name) - motion(t, k)) ** 2, axis=0))
        for k, name in enumerate(("q", "qd", "qdd"))
    }
    # Stated tolerances (relative RMS): q 1e-4, qd 2e-4, qdd 3e-3 (noise 2e-5 rad, jitter 0.2 ms).
    assert (error["q"] / scale["q"] < 1e-4).all(), error["q"] / scale["q"]
    assert (error["qd"] / scale["qd"] < 2e-4).all(), error["qd"] / scale["qd"]
    assert (error["qdd"] / scale["qdd"] < 3e-3).all(), error["qdd"] / scale["qdd"]
    # Torques resampled linearly: the interpolation error of a smooth torque at 1 kHz.
    np.testing.assert_allclose(data.tau, torque(t), rtol=0, atol=1e-5)
    # Trimmed: no sample within half a window of the ends of a piece.
    assert data.t.min() >= max(report.files[0].window_qdd) // 2 * data.dt * 0.99


def test_a_logger_that_stalls_now_and_then_is_resampled_not_split(tmp_path):
    # Steps of 0.7-15.5 ms around a 1 ms period (the 7-DOF log): stalls are bridged.
    rng = np.random.default_rng(3)
    steps = rng.uniform(0.7e-3, 1.3e-3, 8000)
    stalls = rng.choice(steps.shape[0], 40, replace=False)
    steps[stalls] = rng.uniform(5e-3, 15.5e-3, stalls.shape[0])
    t = np.concatenate([[0.0], np.cumsum(steps)])
    q = motion(t) + rng.normal(0.0, 5e-5, (t.shape[0], 2))
    write_log(tmp_path / "stalls.csv", t, q, torque(t))
    result = import_csv(tmp_path / "stalls.csv", time="time", q=["q1", "q2"], tau=["tau1", "tau2"])
    report = result.report.files[0]
    assert result.dataset.n_trajectories == 1 and report.gaps == ()
    assert report.bridged >= 40 and report.longest_bridged > 0.01
    data = result.dataset
    error = np.sqrt(np.mean((data.qdd - motion(data.t, 2)) ** 2, axis=0))
    assert (error / np.sqrt(np.mean(motion(data.t, 2) ** 2, axis=0)) < 0.01).all()


def test_from_csv_returns_the_dataset_of_import_csv(messy_logs):
    options = dict(time="time", q=[1, 2], tau=["tau1", "tau2"], window=101)
    data = lnn.Dataset.from_csv(messy_logs[1], **options)
    result = import_csv([messy_logs[1]], **options)
    np.testing.assert_array_equal(data.qdd, result.dataset.qdd)
    assert result.report.files[0].window_qdd == (101, 101)
    assert data.angular == (False, False)


def test_the_window_follows_the_noise_and_the_rate_and_nearly_minimises_the_true_error():
    rng = np.random.default_rng(1)
    chosen = {}
    for step in (1e-3, 4e-3):
        for noise in (1e-5, 1e-4):
            t = np.arange(0.0, 8.0, step)
            clean = motion(t)[:, 0]
            q = clean + rng.normal(0.0, noise, t.shape)
            choice = choose_window([q], step, derivative=2)
            assert choice.noise == pytest.approx(noise, rel=0.2)
            assert 2.0 < choice.bandwidth < 4.0  # the motion's top sinusoid: 2.1 Hz
            # The true error of every candidate window, in the interior.
            from scipy.signal import savgol_filter

            true = motion(t, 2)[:, 0]
            T = t.shape[0]
            inner = slice(T // 4, 3 * T // 4)
            windows = [int(w) for w in choice.candidates if w < T // 2]
            errors = [
                np.sqrt(np.mean((savgol_filter(q, w, 4, deriv=2, delta=step)[inner] - true[inner]) ** 2))
                for w in windows
            ]
            picked = errors[windows.index(choice.window)]
            assert picked <= 1.1 * min(errors), (step, noise, choice.window, picked, min(errors))
            assert choice.error == pytest.approx(picked, rel=0.4)  # the estimate of that error
            chosen[step, noise] = choice.window
    assert chosen[1e-3, 1e-4] > chosen[1e-3, 1e-5]  # more noise, wider window
    assert chosen[1e-3, 1e-4] > chosen[4e-3, 1e-4]  # faster sampling, more samples


@pytest.mark.parametrize("window, order, derivative", [(7, 4, 2), (31, 4, 1), (101, 4, 2), (9, 2, 0), (401, 5, 2)])
def test_the_window_search_uses_scipys_savitzky_golay_coefficients(window, order, derivative):
    from scipy.signal import savgol_coeffs

    from lnn.ingest.windows import _coefficients

    ours = _coefficients(window, order, derivative)
    # scipy's least squares loses digits on long windows (1e-8 of the largest coefficient at 401).
    np.testing.assert_allclose(
        ours, savgol_coeffs(window, order, deriv=derivative, use="dot"), rtol=0, atol=1e-7 * np.abs(ours).max()
    )
    x = np.arange(window) - window // 2  # exact on polynomials of degree <= order
    for k in range(order + 1):
        exact = math.factorial(k) if k == derivative else 0.0
        assert ours @ x.astype(float) ** k == pytest.approx(exact, abs=1e-9 * window**k)


@pytest.mark.parametrize("window, order, derivative", [(5, 4, 2), (31, 4, 1), (51, 3, 0), (101, 5, 2), (11, 2, 2)])
def test_savgol_is_scipys_filter_where_scipy_is_accurate(window, order, derivative):
    from scipy.signal import savgol_filter

    from lnn.ingest import savgol

    x = np.random.default_rng(0).standard_normal((400, 3)).cumsum(axis=0)
    ours = savgol(x, window, order, derivative, 0.01)
    theirs = savgol_filter(x, window, order, deriv=derivative, delta=0.01, axis=0, mode="interp")
    np.testing.assert_allclose(ours, theirs, rtol=0, atol=1e-9 * np.abs(theirs).max())
    np.testing.assert_allclose(savgol(x[:, 1], window, order, derivative, 0.01), ours[:, 1])  # one signal


@pytest.mark.parametrize("window, order", [(3201, 4), (801, 5), (401, 7)])
def test_savgol_is_exact_on_polynomials_where_scipys_coefficients_fail(window, order):
    """scipy's least squares on unscaled abscissae errs by 60-120 % of the largest coefficient here."""
    from lnn.ingest import savgol

    step = 1e-3
    t = np.arange(2 * window) * step
    coefficients = np.random.default_rng(order).standard_normal(order + 1)
    x = np.polynomial.Polynomial(coefficients, domain=[t[0], t[-1]])  # degree order, well scaled on t
    for derivative in (0, 1, 2):
        exact = x.deriv(derivative)(t)
        # interior and both ends (the ends' own polynomial fits)
        np.testing.assert_allclose(
            savgol(x(t), window, order, derivative, step), exact, atol=1e-6 * np.abs(exact).max()
        )
    # the same filter behind Dataset.from_positions' Savitzky-Golay estimate
    estimate = lnn.data.estimate_derivatives(t, x(t)[:, None], window=window, order=order)
    np.testing.assert_allclose(estimate.qdd[:, 0], x.deriv(2)(t), atol=1e-6 * np.abs(x.deriv(2)(t)).max())


def test_savgol_refuses_windows_it_cannot_fit():
    from lnn.ingest import savgol

    for window, order in ((10, 4), (5, 5), (501, 4)):
        with pytest.raises(ValueError, match=f"got window={window}, order={order}"):
            savgol(np.zeros(400), window, order, 2)


@pytest.mark.parametrize("order", [3, 4, 5, 6])
def test_every_order_imports_with_its_own_and_a_given_window(tmp_path, order):
    """Odd orders' smallest window is ``order + 2``: an even bound had made ``--order 3 --window 101`` crash."""
    from lnn.ingest.windows import choose_window

    t = np.arange(0, 4000) * 1e-3
    q = np.column_stack([np.sin(2.0 * t), 0.5 * np.cos(3.0 * t)])
    write_log(tmp_path / "log.csv", t, q, torque(t))
    columns = dict(time="time", q=["q1", "q2"], tau=["tau1", "tau2"], order=order)
    for window in (None, 101):
        data = import_csv(tmp_path / "log.csv", window=window, **columns).dataset
        np.testing.assert_allclose(data.qdd[:, 0], -4.0 * data.q[:, 0], atol=0.1)  # q1 = sin 2t, within 2.5 %
        np.testing.assert_allclose(data.qdd[:, 1], -9.0 * data.q[:, 1], atol=0.1)  # q2 = cos(3t) / 2
    smallest = order + 2 if order % 2 else order + 3
    choice = choose_window([q[:, 0]], 1e-3, derivative=2, order=order, max_window=smallest)
    assert choice.window == smallest and np.all(choice.candidates % 2 == 1)


def test_angular_columns_are_unwrapped_and_times_can_be_scaled(tmp_path):
    t = np.arange(0, 3000) * 1.0  # milliseconds
    angle = 2.0 * np.pi * 0.5 * t * 1e-3  # a joint turning at 0.5 rev/s, logged wrapped
    q = np.column_stack([np.angle(np.exp(1j * angle)), 0.1 * np.sin(t * 1e-3)])
    write_log(tmp_path / "wrap.csv", t, q, np.zeros_like(q))
    result = import_csv(
        tmp_path / "wrap.csv", time="time", q=["q1", "q2"], tau=["tau1", "tau2"], angular=[True, False], time_scale=1e-3
    )
    data = result.dataset
    assert data.dt == pytest.approx(1e-3) and data.angular == (True, False)
    assert not result.report.files[0].resampled  # exact stamps: snapped, not interpolated
    np.testing.assert_allclose(data.qd[:, 0], np.pi, rtol=1e-6)
    np.testing.assert_allclose(data.qdd[:, 0], 0.0, atol=1e-6)


def test_measured_velocities_are_compared_and_can_be_used(tmp_path):
    rng = np.random.default_rng(2)
    step = 2e-3
    t = np.arange(0.0, 6.0, step)
    q = motion(t) + rng.normal(0.0, 1e-4, (t.shape[0], 2))
    # A driver's backward difference: lags the positions by half a step.
    qd = np.vstack([motion(t[:1], 1), np.diff(q, axis=0) / step])
    write_log(tmp_path / "v.csv", t, q, torque(t), qd=qd)
    options = dict(time="time", q=["q1", "q2"], qd=["qd1", "qd2"], tau=["tau1", "tau2"])
    result = import_csv(tmp_path / "v.csv", **options)
    report = result.report.files[0]
    np.testing.assert_allclose(report.velocity_lag, step / 2, rtol=0.1)
    measured = import_csv(tmp_path / "v.csv", velocity="measured", **options).dataset

    def rms_error(data):
        return np.sqrt(np.mean((data.qd - motion(data.t, 1)) ** 2))

    assert rms_error(result.dataset) < rms_error(measured) < 0.05  # the lag costs
    # Read again by its own import's rule (a given window), with the measured velocities, a log gets the same
    # qd and qdd (the torques' rule: test_held_out_logs_are_read_by_the_training_imports_rule).
    first = import_csv(tmp_path / "v.csv", velocity="measured", window=41, **options)
    again = import_csv(tmp_path / "v.csv", velocity="measured", window=first.dataset.window_rule, **options)
    assert again.report.files[0].window_qd == first.report.files[0].window_qd == (41, 41)
    np.testing.assert_array_equal(again.dataset.qd, first.dataset.qd)
    np.testing.assert_array_equal(again.dataset.qdd, first.dataset.qdd)


# ------------------------------------------------------------------ bad input


@pytest.fixture()
def good_log(tmp_path):
    t = np.arange(0.0, 1.0, 1e-3)
    write_log(tmp_path / "good.csv", t, motion(t), torque(t))
    return tmp_path / "good.csv"


def _rewrite(path, edit):
    lines = path.read_text().splitlines()
    edit(lines)
    path.write_text("\n".join(lines) + "\n")


def test_a_missing_column_names_the_file_the_column_and_the_columns(good_log):
    with pytest.raises(
        ValueError,
        match=r"good\.csv: no column named 'pos1'; the columns are: "
        r"time, q1, q2, tau1, tau2, status",
    ):
        import_csv(good_log, time="time", q=["pos1", "q2"], tau=["tau1", "tau2"])
    with pytest.raises(ValueError, match=r"column index 9 is out of range: the file has 6"):
        import_csv(good_log, time=0, q=[1, 9], tau=[3, 4])


def test_a_non_numeric_cell_names_the_line_the_column_and_the_cell(good_log):
    _rewrite(good_log, lambda lines: lines.__setitem__(7, lines[7].replace(lines[7].split(",")[2], "n/a", 1)))
    with pytest.raises(ValueError, match=r"good\.csv: line 8, column 'q2': cannot read 'n/a'"):
        import_csv(good_log, time="time", q=["q1", "q2"], tau=["tau1", "tau2"])


def test_an_infinite_cell_is_refused(good_log):
    _rewrite(good_log, lambda lines: lines.__setitem__(5, "inf" + lines[5][lines[5].index(",") :]))
    with pytest.raises(ValueError, match=r"line 6, column 'time': the value inf is not finite"):
        import_csv(good_log, time="time", q=["q1", "q2"], tau=["tau1", "tau2"])


def test_rows_missing_a_value_are_dropped_and_counted_not_the_log(good_log, tmp_path):
    """A logger that misses a sample writes an empty cell or NaN: that row goes, the rest of the log stays."""
    columns = dict(time="time", q=["q1", "q2"], tau=["tau1", "tau2"], window=31)
    before = import_csv(good_log, **columns)

    def miss(lines):
        for k, cell in ((100, 1), (101, 1), (102, 1), (400, 4), (700, 0)):  # q1 thrice, tau2, the time
            cells = lines[k].split(",")
            cells[cell] = "nan" if k == 101 else ""
            lines[k] = ",".join(cells)
        cells = lines[900].split(",")
        cells[5] = ""  # an unread column: not missing
        lines[900] = ",".join(cells)

    _rewrite(good_log, miss)
    after = import_csv(good_log, **columns)
    report = after.report.files[0]
    assert report.missing == 5 and after.report.missing == 5
    assert report.rows == before.report.files[0].rows - 5 and report.bridged == 3  # holes of 4, 2 and 2 steps
    assert "(5 more missed a value: dropped)" in after.report.format()
    np.testing.assert_allclose(after.dataset.qdd, before.dataset.qdd, atol=1e-6 * np.abs(before.dataset.qdd).max())
    # a table that merges streams row by row: most rows miss a value
    lines = good_log.read_text().splitlines()
    merged = (
        [lines[0]]
        + [  # every other row carries the time stamp alone
            ",".join(c if i % 2 or j in (0, 5) else "" for j, c in enumerate(line.split(",")))
            for i, line in enumerate(lines[1:])
        ]
    )
    (tmp_path / "merged.csv").write_text("\n".join(merged) + "\n")
    with pytest.raises(ValueError, match=r"merged\.csv: \d+ of \d+ data rows miss a value .*merges streams row by"):
        import_csv(tmp_path / "merged.csv", **columns)


def test_time_going_backwards_is_an_error_naming_the_row(good_log):
    def swap(lines):
        lines[10], lines[11] = lines[11], lines[10]

    _rewrite(good_log, swap)
    with pytest.raises(
        ValueError,
        match=r"good\.csv: the time column 'time' goes backwards at "
        r"data row 11",
    ):
        import_csv(good_log, time="time", q=["q1", "q2"], tau=["tau1", "tau2"])


def test_a_log_too_short_for_the_window_is_an_error_naming_the_file(tmp_path):
    t = np.arange(6) * 1e-3
    write_log(tmp_path / "short.csv", t, motion(t), torque(t))
    with pytest.raises(
        ValueError,
        match=r"short\.csv: the log is too short for a derivative "
        r"window: its longest piece between gaps has 6 samples",
    ):
        import_csv(tmp_path / "short.csv", time="time", q=["q1", "q2"], tau=["tau1", "tau2"])
    t = np.arange(60) * 1e-3
    write_log(tmp_path / "short.csv", t, motion(t), torque(t))
    with pytest.raises(
        ValueError,
        match=r"short\.csv: the log is too short for the derivative "
        r"window.*window=101",
    ):
        import_csv(tmp_path / "short.csv", time="time", q=["q1", "q2"], tau=["tau1", "tau2"], window=101)


@pytest.mark.parametrize(
    "options, error, message",
    [
        (dict(tau=["tau1"]), ValueError, r"tau must name 2 columns like q"),
        (dict(angular=[True]), ValueError, r"angular must be a bool or 2 bools"),
        (dict(velocity="measured"), ValueError, r"velocity='measured' needs the measured velocity"),
        (dict(velocity="filtered"), ValueError, r"velocity must be 'q' or 'measured'; got 'filtered'"),
        (dict(window=100), ValueError, r"window must be None, 'spectrum', an odd integer > order \(4\) or a .*100"),
        (dict(window="torque"), ValueError, r"window must be None, 'spectrum', an odd integer .*; got 'torque'"),
        (dict(step=-1.0), ValueError, r"step must be a finite number > 0; got -1.0"),
        (dict(q=[1.5, 2]), TypeError, r"q must name columns by header name"),
    ],
)
def test_bad_arguments_name_the_argument_and_the_value(good_log, options, error, message):
    arguments = dict(time="time", q=["q1", "q2"], tau=["tau1", "tau2"]) | options
    with pytest.raises(error, match=message):
        import_csv(good_log, **arguments)


def test_a_missing_file_is_named(tmp_path):
    with pytest.raises(FileNotFoundError, match=r"no such log file: .*nothere\.csv"):
        import_csv(tmp_path / "nothere.csv", time="time", q=["q1"], tau=["tau1"])


# ------------------------------------------------------------- held samples


def sensor_log(rng, duration, *, rate, logger=1e-3, quantum=3.8e-4, torque_quantum=5.9e-3):
    """A logger at ``logger`` s that repeats the latest reading of sensors updating at ``rate`` Hz.

    Returns the logged ``t, q, tau`` and the sensor's own update instants.
    """
    t = np.arange(int(round(duration / logger)) + 1) * logger
    t = t + np.concatenate([[0.0], rng.uniform(-0.1, 0.1, t.shape[0] - 1) * logger])
    updates = rng.uniform(0.0, 1.0 / rate) + np.arange(int(duration * rate) + 2) / rate
    updates = np.concatenate([[0.0], updates[updates < t[-1]]])
    q = np.round((motion(updates) + rng.normal(0.0, 1e-4, (updates.shape[0], 2))) / quantum) * quantum
    tau = np.round((torque(updates) + rng.normal(0.0, 2e-3, (updates.shape[0], 2))) / torque_quantum) * torque_quantum
    latest = np.searchsorted(updates, t, side="right") - 1
    return t, q[latest], tau[latest], updates


def test_held_samples_are_not_samples_and_not_holes(tmp_path):
    # A 1 kHz logger repeating sensors that update at 400 Hz: 60 % of the rows repeat the previous one.
    rng = np.random.default_rng(4)
    t, q, tau, updates = sensor_log(rng, 8.0, rate=400.0)
    write_log(tmp_path / "held.csv", t, q, tau)
    options = dict(time="time", q=["q1", "q2"], tau=["tau1", "tau2"])
    result = import_csv(tmp_path / "held.csv", **options)
    report = result.report.files[0]
    planted = int(np.sum(np.all(np.column_stack([q, tau])[1:] == np.column_stack([q, tau])[:-1], axis=1)))
    assert report.held == planted and planted > 0.55 * t.shape[0]
    assert report.repeated == 0 and report.gaps == () and report.bridged == 0  # no holes: the logger ran
    assert result.report.held == planted and "held samples (sensors not updated) not used" in report.format()
    data = result.dataset
    assert data.n_trajectories == 1 and data.dt == pytest.approx(1e-3, rel=1e-3)
    # The held values are not measurements of their own time: used as samples (as before they were
    # recognised), they doubled the error of the accelerations (measured 1.6 % and 1.9 % relative RMS; 0.8 %
    # and 1.0 % without them).
    true = motion(data.t, 2)
    error = np.sqrt(np.mean((data.qdd - true) ** 2, axis=0)) / np.sqrt(np.mean(true**2, axis=0))
    assert (error < 0.012).all(), error
    assert max(report.window_qdd) * report.step < 0.25  # windows of the motion's time scale


def test_a_robot_at_rest_with_quantised_sensors_stays_at_rest(tmp_path):
    # 2 s of motion, 1.5 s at rest, 2 s of motion, at 500 Hz, the DFKI pendulum's quanta (3.8e-4 rad,
    # 5.9e-3 N m) with noise of 0.4 quantum: at rest the readings flicker, and often repeat exactly.
    rng = np.random.default_rng(6)
    step = 2e-3
    t = np.arange(0.0, 5.5, step)
    moving = np.clip(t, None, 2.0) + np.clip(t - 3.5, 0.0, None)  # the motion's clock stops during the rest
    q = np.round((motion(moving) + rng.normal(0.0, 0.4 * 3.8e-4, (t.shape[0], 2))) / 3.8e-4) * 3.8e-4
    tau = np.round((torque(moving) + rng.normal(0.0, 0.4 * 5.9e-3, (t.shape[0], 2))) / 5.9e-3) * 5.9e-3
    write_log(tmp_path / "rest.csv", t, q, tau)
    result = import_csv(tmp_path / "rest.csv", time="time", q=["q1", "q2"], tau=["tau1", "tau2"], window=51)
    report, data = result.report.files[0], result.dataset
    repeats = np.all(np.column_stack([q, tau])[1:] == np.column_stack([q, tau])[:-1], axis=1)
    assert repeats.sum() > 50 and 0 < report.held <= repeats.sum() and report.gaps == ()
    # Dropping a repeated reading at rest loses nothing: its neighbours are equal or a quantum apart; long
    # runs of one reading are a rest, kept as samples, so the spline does not bridge them by one arc.
    rest = (data.t > 2.1) & (data.t < 3.4)
    spread = np.abs(q[(t > 2.1) & (t < 3.4)] - motion(np.array([2.0]))).max()  # the readings': 1.5 quanta
    assert np.abs(data.q[rest] - motion(np.array([2.0]))).max() <= spread + 0.25 * 3.8e-4
    assert np.abs(data.qd[(data.t > 2.3) & (data.t < 3.2)]).max() < 0.02


# ---------------------------------------------------------------- torque lag


@pytest.fixture(scope="module")
def arm_log(tmp_path_factory):
    """A two-link arm (relative angles, viscous and Coulomb friction) following a prescribed excitation.

    Sampled at 1 kHz; the torque stream lags the positions by 2.3 ms (the torque logged at ``t`` is the one
    applied at ``t - 2.3 ms``). Positions quantised at 3.8e-4 rad with 1e-4 rad noise, torques with 1 % noise.
    """
    import simulations

    arm = simulations.PlanarArm(
        masses=(0.6, 0.6),
        lengths=(0.3, 0.2),
        friction=simulations.Friction(viscous=(0.01, 0.01), coulomb=(0.08, 0.06)),
    )
    fine = lnn.excitation_trajectories(
        arm, n_trajectories=1, duration=12.0, dt=1e-4, seed=7, amplitude=1.0, frequencies=(0.2, 3.0), n_components=5
    )
    rng = np.random.default_rng(5)
    rows = np.arange(300, len(fine) - 300, 10)  # 1 kHz
    lag = 23  # fine steps: 2.3 ms
    q = np.round((fine.q[rows] + rng.normal(0.0, 1e-4, (rows.shape[0], 2))) / 3.8e-4) * 3.8e-4
    tau = fine.tau[rows - lag] + rng.normal(0.0, 0.01, (rows.shape[0], 2)) * fine.tau.std(axis=0)
    path = tmp_path_factory.mktemp("arm") / "arm.csv"
    write_log(path, fine.t[rows], q, tau)
    return path, fine.t[rows], fine.tau[rows], 2.3e-3


def test_the_torque_lag_is_estimated_to_a_fraction_of_a_sample(arm_log):
    path, t, true_tau, lag = arm_log
    options = dict(time="time", q=["q1", "q2"], tau=["tau1", "tau2"])
    result = import_csv(path, **options)
    report = result.report.files[0]
    step = report.step
    # Stated tolerance: a quarter of a sample (measured: 0.020 and 0.006), and a standard error below it.
    np.testing.assert_allclose(report.torque_lag, lag, atol=0.25 * step)
    assert all(0 < e < 0.25 * step for e in report.torque_lag_error)
    assert report.torque_shift == (0.0, 0.0)  # estimated, not applied by default
    assert "tau lag behind q: 2.3" in report.format() and "(not applied)" in report.format()
    # Applied, the torques line up with the motion: their error against the true torque at the sample times
    # falls from the lag's (2.3 ms of the torque's rate) to the noise's.
    shifted = import_csv(path, lag="auto", **options)
    assert shifted.report.files[0].torque_shift == pytest.approx(report.torque_lag)
    by_hand = import_csv(path, lag=2.3e-3, **options)
    assert by_hand.report.files[0].torque_shift == (2.3e-3, 2.3e-3)

    def error(data):
        truth = np.column_stack([np.interp(data.t, t - t[0], true_tau[:, j]) for j in range(2)])
        return np.sqrt(np.mean((data.tau - truth) ** 2, axis=0)) / true_tau.std(axis=0)

    before, after = error(result.dataset), error(shifted.dataset)
    assert (after < 0.5 * before).all(), (before, after)
    assert (np.abs(error(by_hand.dataset) - after) < 0.002).all()


def test_the_files_lags_are_pooled_and_their_disagreement_shows(arm_log):
    import dataclasses

    path, _, _, lag = arm_log
    report = import_csv([path, path], time="time", q=["q1", "q2"], tau=["tau1", "tau2"]).report
    np.testing.assert_allclose(report.torque_lag, report.files[0].torque_lag, rtol=1e-9)
    assert report.torque_lag_spread == (0.0, 0.0) and "tau lag behind q over the files: 2.3" in report.format()
    # Two logs that disagree far beyond their errors: the spread between them, not their errors, decides.
    first = dataclasses.replace(report.files[0], torque_lag=(1e-3, 1e-3), torque_lag_error=(1e-4, 1e-4))
    second = dataclasses.replace(report.files[0], torque_lag=(5e-3, 1.2e-3), torque_lag_error=(1e-4, 1e-4))
    pooled = dataclasses.replace(report, files=(first, second))
    np.testing.assert_allclose(pooled.torque_lag, (3e-3, 1.1e-3), rtol=1e-9)
    assert pooled.torque_lag_spread[0] == pytest.approx(math.sqrt(8e-6 - 1e-8), rel=1e-9)  # DerSimonian-Laird
    assert pooled.torque_lag_error[0] > 1.9e-3 and pooled.torque_lag_spread[1] == pytest.approx(math.sqrt(2e-8 - 1e-8))


def test_no_lag_is_found_where_there_is_none(arm_log, tmp_path):
    path, t, true_tau, _ = arm_log
    table = np.loadtxt(path, delimiter=",", skiprows=1)
    write_log(tmp_path / "aligned.csv", t, table[:, 1:3], true_tau)
    report = import_csv(tmp_path / "aligned.csv", time="time", q=["q1", "q2"], tau=["tau1", "tau2"]).report.files[0]
    np.testing.assert_allclose(report.torque_lag, 0.0, atol=0.25 * report.step)


@pytest.mark.parametrize(
    "lag, error, message",
    [
        ("late", ValueError, r"lag must be None, 'auto', a number of seconds or one per joint; got 'late'"),
        (math.inf, ValueError, r"lag must be a finite number; got inf"),
        ((1e-3, 2e-3, 3e-3), ValueError, r"lag must be None, 'auto', a number or 2 numbers \(one per joint\)"),
        (object(), TypeError, r"lag must be None, 'auto', a number of seconds or one per joint"),
    ],
)
def test_a_bad_lag_is_named(good_log, lag, error, message):
    with pytest.raises(error, match=message):
        import_csv(good_log, time="time", q=["q1", "q2"], tau=["tau1", "tau2"], lag=lag)


# --------------------------------------------------------------- joint names


def test_joint_names_come_from_named_position_columns(good_log, tmp_path):
    named = import_csv(good_log, time="time", q=["q1", "q2"], tau=["tau1", "tau2"]).dataset
    assert named.joint_names == ("q1", "q2")
    assert import_csv(good_log, time=0, q=[1, 2], tau=[3, 4]).dataset.joint_names is None
    given = lnn.Dataset.from_csv(good_log, time=0, q=[1, 2], tau=[3, 4], joints=["Joint1", "Joint2"])
    assert given.joint_names == ("Joint1", "Joint2")
    given.save(tmp_path / "d.npz")
    assert lnn.Dataset.load(tmp_path / "d.npz").joint_names == ("Joint1", "Joint2")
    with pytest.raises(ValueError, match=r"joints must be 2 names \(one per coordinate\); got \['Joint1'\]"):
        import_csv(good_log, time=0, q=[1, 2], tau=[3, 4], joints=["Joint1"])


# ---------------------------------------------------------------- the derivative window chosen by the torques


def rich_motion(t, derivative, seed):
    """``(T, 2)``: slow sinusoids of large amplitude plus faster ones small in position, large in acceleration.

    The 3 Hz and 7 Hz components hold 0.4 % and 0.01 % of the positions' variance (a closed loop's
    transients, a pendulum's harmonics) but most of the accelerations' above 1 Hz.
    """
    rng = np.random.default_rng(seed)
    q = np.zeros((t.shape[0], 2))
    for j in range(2):
        for amplitude, frequency in ((0.8, 0.25), (0.5, 0.6), (0.05, 3.0), (0.01, 7.0)):
            w, phase = 2 * np.pi * frequency * rng.uniform(0.8, 1.2), rng.uniform(0, 2 * np.pi)
            q[:, j] += amplitude * w**derivative * np.sin(w * t + phase + derivative * np.pi / 2)
    return q


@pytest.fixture(scope="module")
def pendulum_logs(tmp_path_factory):
    """Two 15 s logs of a double pendulum at 500 Hz: encoder noise 2e-4 rad, torque noise 0.01 N m."""
    import simulations

    system = simulations.DoublePendulum()
    rng = np.random.default_rng(1)
    folder = tmp_path_factory.mktemp("pendulum")
    paths = []
    for k, step in enumerate((2e-3, 2e-3)):
        t = np.arange(0.0, 15.0, step)
        q, qd, qdd = (rich_motion(t, d, seed=k) for d in range(3))
        tau = system.inverse_dynamics(q, qd, qdd) + 0.01 * rng.standard_normal(q.shape)
        write_log(folder / f"log{k}.csv", t, q + 2e-4 * rng.standard_normal(q.shape), tau)
        paths.append(folder / f"log{k}.csv")
    return system, paths


def test_the_window_the_torques_choose_nearly_minimises_the_true_torque_error(pendulum_logs):
    system, paths = pendulum_logs
    options = dict(time="time", q=["q1", "q2"], tau=["tau1", "tau2"], angular=True)

    def true_error(result):
        data = result.dataset
        return float(np.mean((system.inverse_dynamics(data.q, data.qd, data.qdd) - data.tau) ** 2))

    chosen = import_csv(paths, **options)
    report = chosen.report
    assert [f.window_rule for f in report.files] == ["torque", "torque"]
    assert len(report.torque_windows) == 1 and report.torque_windows[0].informative
    choice = report.torque_windows[0]
    assert report.files[0].window_qdd == report.files[1].window_qd == (choice.window, choice.window)
    assert np.isnan(report.files[0].error_qdd).all()  # the spectral rule's estimates do not apply
    assert choice.explained.min() > 0.85 and choice.rows >= 10 * choice.features == 440  # measured 0.98, 0.91
    assert f"window by the torques: {choice.window} samples" in report.format()
    assert "where the motion explains the torques best" in report.files[0].format()
    # The sweep of fixed windows: the chosen one is within 20 % of the best (measured: 43 samples, 4 % above
    # the best of these, 41), where the spectral rule, which differentiates the positions' band (0.3-0.7 Hz
    # here), erred 900 times more (163 samples): the small 3 and 7 Hz components are most of qdd.
    sweep = {w: true_error(import_csv(paths, window=w, **options)) for w in (21, 31, 41, 51, 61, 81)}
    assert true_error(chosen) <= 1.2 * min(sweep.values()), (choice.window, true_error(chosen), sweep)
    spectral = import_csv(paths, window="spectrum", **options)
    assert [f.window_rule for f in spectral.report.files] == ["spectrum", "spectrum"]
    assert spectral.report.torque_windows == ()
    assert true_error(spectral) > 10 * true_error(chosen)
    assert [f.window_rule for f in import_csv(paths, window=41, **options).report.files] == ["given", "given"]


def test_logs_at_different_rates_share_the_windows_span(pendulum_logs, tmp_path):
    from lnn.ingest import window_at

    system, paths = pendulum_logs
    rng = np.random.default_rng(2)
    t = np.arange(0.0, 15.0, 1e-3)  # a third log of the same robot at 1 kHz
    q, qd, qdd = (rich_motion(t, d, seed=2) for d in range(3))
    tau = system.inverse_dynamics(q, qd, qdd) + 0.01 * rng.standard_normal(q.shape)
    write_log(tmp_path / "fast.csv", t, q + 2e-4 * rng.standard_normal(q.shape), tau)
    report = import_csv([paths[0], tmp_path / "fast.csv"], time="time", q=["q1", "q2"], tau=["tau1", "tau2"]).report
    slow, fast = report.files
    assert (slow.step, fast.step) == pytest.approx((2e-3, 1e-3), rel=1e-6)
    assert slow.window_rule == fast.window_rule == "torque" and len(report.torque_windows) == 1
    # One span for the robot: the 1 kHz log's window is twice the 500 Hz one's, to a sample.
    assert abs(fast.window_qdd[0] * fast.step - slow.window_qdd[0] * slow.step) <= 1.5 * fast.step
    assert window_at(41, 2e-3, 1e-3) == 83 and window_at(41, 2e-3, 4e-3) == 21 and window_at(3, 1.0, 1.0) == 7


def test_a_torque_that_is_no_function_of_the_motion_leaves_the_spectral_rule(messy_logs):
    # messy_logs' torques are sinusoids of their own: the more the motion is smoothed the better they
    # fit, so the residual is lowest at the longest window searched, which is no trade-off and no choice.
    report = import_csv(messy_logs, time="time", q=["q1", "q2"], tau=["tau1", "tau2"]).report
    assert {f.window_rule for f in report.files} == {"spectrum"}
    assert len(report.torque_windows) == 1 and not report.torque_windows[0].informative
    assert "not informative: the spectral rule's windows kept" in report.format()


# --------------------------------------------------- held-out logs read like the training logs


def test_held_out_logs_are_read_by_the_training_imports_rule(pendulum_logs, tmp_path):
    from lnn.ingest import WindowRule, window_at

    system, paths = pendulum_logs
    options = dict(time="time", q=["q1", "q2"], tau=["tau1", "tau2"], angular=True)
    train = import_csv(paths[:1], **options)
    rule = train.dataset.window_rule
    choice = train.report.torque_windows[0]
    assert rule == WindowRule("torque", choice.window, choice.step, order=4)
    assert "chosen by the torques" in rule.describe()
    # The held-out log at another rate (1 kHz): the same span, at its own step, whatever its own torques say.
    rng = np.random.default_rng(3)
    t = np.arange(0.0, 15.0, 1e-3)
    q, qd, qdd = (rich_motion(t, d, seed=3) for d in range(3))
    tau = system.inverse_dynamics(q, qd, qdd) + 0.01 * rng.standard_normal(q.shape)
    write_log(tmp_path / "held.csv", t, q + 2e-4 * rng.standard_normal(q.shape), tau)
    held = import_csv(tmp_path / "held.csv", window=rule, **options)
    expected = window_at(choice.window, choice.step, 1e-3)
    assert held.report.files[0].window_qdd == held.report.files[0].window_qd == (expected, expected)
    assert held.report.files[0].window_rule == "carried" and held.report.torque_windows == ()
    assert "another import's rule" in held.report.files[0].format()
    assert held.dataset.window_rule == rule  # read on, it passes the same rule along
    same = import_csv(tmp_path / "held.csv", window=expected, **options).dataset
    np.testing.assert_array_equal(held.dataset.qdd, same.qdd)
    # The training log read by its own rule gets its own windows back, with measured velocities too (whose
    # qd windows the torques' rule leaves to the spectrum).
    again = import_csv(paths[:1], window=rule, **options)
    np.testing.assert_array_equal(again.dataset.qdd, train.dataset.qdd)
    data = train.dataset
    write_log(tmp_path / "with_qd.csv", data.t, data.q, data.tau, qd=data.qd)
    measured = dict(options, qd=["qd1", "qd2"], velocity="measured")
    first = import_csv(tmp_path / "with_qd.csv", **measured)
    assert first.dataset.window_rule.rule == "torque"
    second = import_csv(tmp_path / "with_qd.csv", window=first.dataset.window_rule, **measured)
    assert second.report.files[0].window_qd == first.report.files[0].window_qd != first.report.files[0].window_qdd
    np.testing.assert_array_equal(second.dataset.qd, first.dataset.qd)


def test_given_and_spectral_rules_carry_as_themselves(pendulum_logs):
    from lnn.ingest import WindowRule

    _, paths = pendulum_logs
    options = dict(time="time", q=["q1", "q2"], tau=["tau1", "tau2"], angular=True)
    given = import_csv(paths[0], window=41, **options).dataset.window_rule
    assert given == WindowRule("given", 41) and given.window_at(1e-3) == given.window_at(4e-3) == 41
    spectral = import_csv(paths[0], window="spectrum", **options).dataset.window_rule
    assert spectral == WindowRule("spectrum") and spectral.window_at(1e-3) is None
    by_rule = import_csv(paths[1], window=spectral, **options)
    by_name = import_csv(paths[1], window="spectrum", **options)
    assert [f.window_rule for f in by_rule.report.files] == ["spectrum"]
    np.testing.assert_array_equal(by_rule.dataset.qdd, by_name.dataset.qdd)
    assert import_csv(paths[1], window=given, **options).report.files[0].window_qdd == (41, 41)


def test_the_window_rule_is_saved_with_the_dataset(pendulum_logs, tmp_path):
    _, paths = pendulum_logs
    data = import_csv(paths[0], time="time", q=["q1", "q2"], tau=["tau1", "tau2"]).dataset
    data.save(tmp_path / "d.npz")
    loaded = lnn.Dataset.load(tmp_path / "d.npz")
    assert loaded.window_rule == data.window_rule is not None
    assert loaded.subset(loaded.trajectory_ids).window_rule == data.window_rule
    parts = loaded.split(fractions=(0.5, 0.5, 0.0), by="time")
    assert parts.train.window_rule == parts.validation.window_rule == data.window_rule


@pytest.mark.parametrize(
    "fields, message",
    [
        (dict(rule="best"), r"WindowRule.rule must be one of \('torque', 'spectrum', 'given'\); got 'best'"),
        (dict(rule="given", window=40), r"WindowRule.window must be an odd integer > order \(4\); got 40"),
        (dict(rule="torque", window=41), r"WindowRule.step must be a finite number > 0; got None"),
        (dict(rule="given", window=41, step=0.002), r"WindowRule\('given'\) takes no step"),
        (dict(rule="spectrum", window=41), r"WindowRule\('spectrum'\) takes no window or step; got window=41"),
        (dict(rule="given", window=41, order=1), r"WindowRule.order must be an integer >= 2; got 1"),
    ],
)
def test_a_bad_window_rule_names_the_field_and_the_value(fields, message):
    from lnn.ingest import WindowRule

    with pytest.raises(ValueError, match=message):
        WindowRule(**fields)


def test_a_rule_of_another_order_or_not_a_rule_is_refused(good_log):
    from lnn.ingest import WindowRule

    options = dict(time="time", q=["q1", "q2"], tau=["tau1", "tau2"])
    with pytest.raises(ValueError, match=r"window is the rule of an import at Savitzky-Golay order 3, but order=4"):
        import_csv(good_log, window=WindowRule("given", 41, order=3), **options)
    data = import_csv(good_log, window=WindowRule("given", 41, order=3), order=3, **options).dataset
    assert data.window_rule == WindowRule("given", 41, order=3)
    with pytest.raises(TypeError, match=r"Dataset.window_rule must be an lnn.ingest.WindowRule or None; got dict"):
        lnn.Dataset(data.t, data.q, data.qd, data.qdd, data.tau, data.trajectory, window_rule={"rule": "given"})
    with pytest.raises(ValueError, match=r"not a window rule written by WindowRule.to_json"):
        WindowRule.from_json({"window": 41})
