"""Measured logs in: read, clean, resample and differentiate robot logs (numpy and scipy only).

The pipeline behind :meth:`lnn.Dataset.from_csv`, :meth:`lnn.Dataset.from_rosbag`
and ``lnn import``. It knows nothing of :class:`lnn.Dataset`: it returns the
arrays (:class:`ImportedLogs`) that :meth:`lnn.Dataset.from_imported` turns into a
dataset, and :mod:`lnn.logs` returns both with the report. Every source ends
in one pipeline (:func:`lnn.ingest.pipeline.process`), file by file:

1. **Read**: CSV columns by name or 0-based index (:func:`read_csv`; a
   non-numeric or infinite cell is an error naming the file, line, column
   and cell; a row with an empty or NaN cell in a column read is a sample
   the logger missed: dropped and counted (``FileReport.missing``), its
   hole bridged or split like any other, unless most rows miss a value (a
   table that merges streams row by row: an error); the delimiter is sniffed from the first line unless given; a
   first line that does not parse as numbers is the header, a leading ``#``
   ignored), or the ``sensor_msgs/msg/JointState`` messages of a topic of a
   ROS bag (:func:`read_rosbag`: header stamp as the time, the bag's receive
   time where the stamp is zero). A time stamp smaller than the previous one
   is an error naming the row (message): nothing is re-ordered silently.
2. **Repeated samples**: a row whose time stamp equals the previous one's is
   dropped (the first is kept); the report counts them, and how many were
   identical to the kept row in every column read.
3. **Held samples**: a row that repeats the previous row in every column
   read (``q``, ``tau`` and measured ``qd`` if read) under a later stamp is
   a logger running faster than its sensors update (a 1 kHz loop logging
   300-500 Hz sensors): it is not a measurement of its own time, so it is
   not used as a sample (the spline runs through the rows where the values
   changed), and it is no hole either (gaps are measured on all time stamps,
   held rows included: the sensor was alive). Used as samples, held values
   make a staircase whose steps lag the motion by up to a sensor period: on
   synthetic 1 kHz logs of sensors updating at 333, 400 or 300-500 Hz,
   leaving them out halves the error of ``qdd`` (1.3-2.3 % -> 0.6-1.3 %
   relative RMS), the windows staying within 7 % (0.17-0.25 s); what remains
   is that each new value is stamped at the first logger tick after it was
   measured (the same logs stamped at the sensors' own instants: 0.4 %,
   with windows of 0.16-0.20 s). The rule is safe on a robot at rest with quantised sensors
   (positions and torques in steps of a sensor quantum), whose readings
   may repeat exactly although each is new: a repeated
   reading carries nothing its neighbours do not (at rest they are equal or
   a quantum apart, so the interpolation between them stays within the
   sensors' resolution), and a run of repeats lasting more than 4 typical
   intervals between new samples is taken as a rest and kept, so a long
   rest stays flat instead of being bridged by one spline arc from the
   motion before to the motion after.
4. **Gaps**: the sampling step ``h`` is the mean of the time steps within
   0.5-1.5 times their median (jitter averages out; holes are left out), the
   median of the files' steps when they agree within 1 % (so that the
   dataset has one ``dt``); ``step=`` overrides it. A hole longer than
   ``max_gap`` splits the log into separate trajectories; shorter holes are
   interpolated over. The default ``max_gap`` is ``max(3 h, W h / 4)`` with
   ``W`` the smallest acceleration window of the file (step 6, chosen on
   pieces split at holes of more than 20 steps): a hole shorter than a
   quarter of the time over which the filter fits one polynomial costs the
   fit little, and a longer one would have the filter smooth across missing
   motion. The choice thus follows the signal's time scale, not a fixed
   number of samples.
5. **Resampling** onto the uniform grid ``t0 + k h`` of each piece: positions
   (and measured velocities) by a cubic spline through the samples (fourth
   order accurate, so the resampling error stays far below the noise and the
   estimated accelerations are not biased by the jitter, as linear
   interpolation's ``h^2 qdd / 8`` error pattern would be), torques linearly
   (a torque can jump; linear interpolation never overshoots). Time stamps
   within ``1e-6 h`` of the grid are snapped to it without interpolating.
   Coordinates marked ``angular`` are unwrapped first (jumps of more than
   ``pi`` between samples are taken as wraps of ``2 pi``).
6. **Derivatives** ``qd`` and ``qdd`` by Savitzky–Golay filters of degree
   ``order`` (4), with one window for every coordinate of every file (one
   span in seconds where the files' steps differ): the window with which
   the motion explains the measured torques best
   (:func:`choose_window_by_torque`: a generic linear model of an arm's
   torques fitted for each candidate window, all files pooled). Where the
   torques cannot tell (too few samples for the model, a torque that is no
   function of the motion, no minimum inside the windows searched) and with
   ``window="spectrum"``, each coordinate and derivative gets the window of
   :func:`choose_window`, which minimises the estimated error (noise plus
   bias) of the derivative of the motion within its band (where 99.99 % of
   the positions' variance lies), from the sampling rate and the measured
   spectrum of the signal and its noise. That band misses what is small in
   position and large in acceleration (a closed loop's friction transients:
   on a simulated 7-DOF arm at 1 kHz its windows of 1.1-2.0 s left the true
   model a held-out torque error of 0.0175 N^2m^2, the torques' 0.28 s
   window 0.0038), and can choose windows several times apart from one log
   of a robot to the next.
   ``window=`` an int gives the window; ``window=`` a :class:`WindowRule`
   (a dataset's ``window_rule``: how its own import chose) reads more logs of
   the robot by that rule, so that a held-out log's derivatives are not
   chosen by its own torques, the targets it is scored on. The filters are :func:`savgol`,
   :func:`scipy.signal.savgol_filter`'s ``"interp"`` mode computed on
   abscissae scaled to ``[-1, 1]``: scipy's own coefficients lose their
   digits on long windows (the second derivative's by 60 % at order 4 and
   3 201 samples, a 3.2 s window at 1 kHz). The dataset's
   ``derivative_span`` is the widest window's span (s), which
   :meth:`lnn.Dataset.split` keeps between time blocks of different parts.
   Half a window is cut from each end of each piece (``trim=True``), where
   the filter would fit one-sided polynomials with several times its error
   in the interior. Pieces shorter than the window (plus the trim) are
   dropped and counted.
7. **Torque lag**: the lag of each torque column behind the positions is
   estimated (:func:`estimate_torque_lag`, to a fraction of a sample, with
   its standard error) and reported; ``lag="auto"`` (or a number of
   seconds) shifts the torque stream by it before resampling. The default
   shifts nothing.

The :class:`ImportReport` says what was done, per file: rows read, repeated
and held samples, gaps (where and how long), holes bridged, the step, the
jitter, whether the data were resampled, the estimated noise, the windows,
the torque lag and, when measured velocities are given, how they compare
with the derivative of the positions (lag and relative mismatch).

Measured velocities (``qd=`` columns, a bag's velocities) are, by default
(``velocity="q"``), read and compared but not used: the dataset's ``qd`` and
``qdd`` are the derivatives of the positions, which share the positions'
time base. Motor drivers often report a backward difference or a filtered
velocity, which lags the positions (half a step for a backward difference:
an error of half a step times the acceleration, larger than the filtered
position derivative's noise). ``velocity="measured"`` uses the measured velocities instead,
filtered by the same rule (derivative 0); ``qdd`` always comes from the
positions. Torques are resampled but not filtered: their noise is the
regression target's and averages out in a least-squares fit, whereas
filtering them would not match the positions' filter.
"""

from lnn.ingest.clean import RawLog
from lnn.ingest.consistency import TorqueWindow, choose_window_by_torque, window_at
from lnn.ingest.lag import TorqueLag, estimate_torque_lag
from lnn.ingest.options import Cleaning, WindowRule
from lnn.ingest.pipeline import ImportedLogs, process
from lnn.ingest.report import FileReport, Gap, ImportReport
from lnn.ingest.rosbag import is_rosbag, read_rosbag
from lnn.ingest.tables import read_csv
from lnn.ingest.windows import DEFAULT_ORDER, WindowChoice, choose_window, savgol

__all__ = [
    "DEFAULT_ORDER",
    "Cleaning",
    "FileReport",
    "Gap",
    "ImportReport",
    "ImportedLogs",
    "RawLog",
    "TorqueLag",
    "TorqueWindow",
    "WindowChoice",
    "WindowRule",
    "choose_window",
    "choose_window_by_torque",
    "estimate_torque_lag",
    "is_rosbag",
    "process",
    "read_csv",
    "read_rosbag",
    "savgol",
    "window_at",
]
