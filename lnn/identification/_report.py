"""What :func:`lnn.identify` did and found: :class:`Stage`, :class:`ResidualFindings`, :class:`IdentificationReport`."""

from __future__ import annotations

import dataclasses

import numpy as np

__all__ = ["HIGH_FREQUENCY", "IdentificationReport", "JointChoice", "ResidualFindings", "Stage"]

#: Above this frequency (Hz) the findings count the residual's power separately: on a slow arm much of
#: what least squares leaves can lie there, where the motion has almost none, which no function of the
#: state can learn (docs/benchmarks/real-robots.md).
HIGH_FREQUENCY = 5.0


@dataclasses.dataclass(frozen=True)
class Stage:
    """One stage of :func:`lnn.identify`.

    Attributes
    ----------
    name : str
        ``"nominal"``, ``"rigid body"`` (with a prior) or ``"trigonometric"`` (without),
        ``"residual"``, ``"residual Lagrangian"``.
    validation_mse : ndarray, shape ``(n,)``
        Held-out torque mean squared error per joint.
    seconds : float
        Wall time of the stage.
    detail : str
        What was chosen (ridge weight, smoothing velocity, epochs).
    validation_in_band : ndarray or None, shape ``(n,)``
        Held-out torque error against the measured torque smoothed by the
        derivatives' filter (:func:`lnn.metrics.torque_bands`: what a model of
        the smoothed state can reduce); None where the data record no window
        (simulated data).
    """

    name: str
    validation_mse: np.ndarray
    seconds: float
    detail: str = ""
    validation_in_band: np.ndarray | None = None

    @property
    def mean_mse(self) -> float:
        """The validation MSE averaged over the joints."""
        return float(np.mean(self.validation_mse))


@dataclasses.dataclass(frozen=True)
class JointChoice:
    """Per joint, whether the learned force of a residual stage is kept: the held-out figures behind it.

    The force is kept on joint ``j`` where the stage with it errs less than the
    linear stage on the held-out data by more than one standard error of the
    difference (the one-standard-error rule per joint: the simpler model
    unless the data show the other better), the standard error over
    contiguous blocks of the held-out recordings.

    Attributes
    ----------
    stage, linear : str
        The residual stage and the linear stage it is compared with.
    kept : tuple of bool, length ``n``
    linear_mse, learned_mse : ndarray, shape ``(n,)``
        Held-out torque MSE per joint of the linear stage and of the residual
        stage with the force on every joint.
    standard_error : ndarray, shape ``(n,)``
        Standard error of the per-joint difference ``learned - linear``.
    """

    stage: str
    linear: str
    kept: tuple
    linear_mse: np.ndarray
    learned_mse: np.ndarray
    standard_error: np.ndarray

    def format(self) -> str:
        """One line per joint."""
        lines = [f"learned force of the {self.stage} stage per joint (held out; kept where it beats the {self.linear}"]
        lines[0] += " by more than one standard error):"
        for j, kept in enumerate(self.kept):
            lines.append(
                f"  joint {j + 1}: {'kept' if kept else 'off '}  {self.linear} {self.linear_mse[j]:.4g}, "
                f"with the force {self.learned_mse[j]:.4g} (difference {self.learned_mse[j] - self.linear_mse[j]:+.3g}"
                f" +- {self.standard_error[j]:.2g})"
            )
        return "\n".join(lines)


@dataclasses.dataclass(frozen=True)
class ResidualFindings:
    """What the linear stage (the rigid body, or without a prior the trigonometric Lagrangian) leaves on the
    training data, per joint (:func:`lnn.residuals.analyze`).

    Shares are fractions of the residual's variance explained on held-out
    time blocks of the training recordings (about 0 when a term explains
    nothing; slightly negative is noise).

    Attributes
    ----------
    mse : ndarray, shape ``(n,)``
        The residual's mean square (N^2 m^2).
    qd_share, q_share, qdd_share : ndarray, shape ``(n,)``
        Explained by a function of ``qd_j`` (friction the linear model lacks:
        Stribeck, asymmetry), of ``q_j`` (position-dependent friction, gravity
        the bodies miss), of ``qdd_j``.
    bias_share : ndarray, shape ``(n,)``
        Explained by a constant per recording (a sensor bias that differs
        between logs; NaN for one recording).
    lag : ndarray, shape ``(n,)``
        The shift of the torque stream (s) that removes the most variance.
    lag_share : ndarray, shape ``(n,)``
        The share that shift removes.
    high_frequency_share : ndarray, shape ``(n,)``
        The share of the residual's power above :data:`HIGH_FREQUENCY` Hz.
    new_log_share : ndarray, shape ``(n,)``
        Explained by ``f(qd_j) + g(q_j)`` on whole recordings held out, each
        recording's mean removed (:func:`lnn.residuals.analyze` with
        ``by="recordings"``): what a learned friction of the joint's own state
        can gain on the robot's next log, where the held-out blocks above may
        credit what one log alone does (NaN for one recording).
    """

    mse: np.ndarray
    qd_share: np.ndarray
    q_share: np.ndarray
    qdd_share: np.ndarray
    bias_share: np.ndarray
    lag: np.ndarray
    lag_share: np.ndarray
    high_frequency_share: np.ndarray
    new_log_share: np.ndarray | None = None

    def __post_init__(self) -> None:
        if self.new_log_share is None:
            object.__setattr__(self, "new_log_share", np.full(np.shape(self.mse), np.nan))

    @classmethod
    def of(cls, analysis, by_recording=None) -> ResidualFindings:
        """The findings of a :class:`lnn.residuals.ResidualAnalysis` (held-out blocks), and of the same
        residual analysed with whole recordings held out (``by_recording``, optional)."""
        new_log = None if by_recording is None else np.asarray(by_recording.qd_q_share)
        return cls(
            mse=np.asarray(analysis.mse),
            qd_share=np.asarray(analysis.qd_share),
            q_share=np.asarray(analysis.q_share),
            qdd_share=np.asarray(analysis.qdd_share),
            bias_share=np.asarray(analysis.bias_share),
            lag=np.asarray(analysis.lag),
            lag_share=np.asarray(analysis.lag_share),
            high_frequency_share=np.asarray(analysis.power_share(HIGH_FREQUENCY)),
            new_log_share=new_log,
        )

    def state_share(self) -> float:
        """The largest share of the residual's variance that a function of one joint's ``q_j`` or ``qd_j``
        explains (0 when none explains anything)."""
        shares = np.concatenate([self.q_share, self.qd_share])
        shares = shares[np.isfinite(shares)]
        return float(max(0.0, shares.max())) if shares.size else 0.0

    def format(self) -> str:
        """One line per joint."""
        lines = ["what the linear stage leaves (training logs; shares of its variance, held-out blocks):"]
        for j in range(self.mse.shape[0]):
            lines.append(
                f"  joint {j + 1}: MSE {self.mse[j]:.3g}; f(qd) {self.qd_share[j]:.0%}, f(q) {self.q_share[j]:.0%}, "
                f"f(qdd) {self.qdd_share[j]:.0%}, bias per log {_percent(self.bias_share[j])}, "
                f"lag {1e3 * self.lag[j]:+.1f} ms ({self.lag_share[j]:.0%}); "
                f"{self.high_frequency_share[j]:.0%} of its power above {HIGH_FREQUENCY:g} Hz; "
                f"f(qd) + g(q) on a new log {_percent(self.new_log_share[j])}"
            )
        return "\n".join(lines)


def _percent(value: float) -> str:
    return "n/a" if not np.isfinite(value) else f"{value:.0%}"


@dataclasses.dataclass(frozen=True)
class IdentificationReport:
    """What :func:`lnn.identify` did.

    Attributes
    ----------
    stages : tuple of Stage
    chosen : str
        The stage whose model is returned: the first judged (the simplest) whose mean validation MSE is
        within one standard error of the lowest (the one-standard-error rule).
    split : str
        How the validation data were held out.
    prior_masses, masses : ndarray or None, shape ``(n,)``
        Body masses of the prior and of the returned rigid body (None without a prior).
    findings : ResidualFindings or None
        What the linear stage (rigid body or trigonometric Lagrangian) left.
    recording_offsets : dict of int to ndarray
        The torque-sensor bias of every training recording beyond the constant
        offset (recording id -> ``(n,)``), fitted as a nuisance and not part of
        the model.
    novel_share : float or None
        The share of the validation states beyond the training states (the
        linear stage's :meth:`~lnn.LagrangianNetwork.novelty` above 1). Where
        it is large, the validation errors measure extrapolation, and so does
        the choice among the stages.
    validation_floor : ndarray or None, shape ``(n,)``
        The held-out torque's out-of-band floor (the torque less its smoothed
        self, :func:`lnn.metrics.torque_bands`): the part of every stage's
        validation error that no model of the smoothed state reduces; None
        where the data record no window.
    joint_choice : JointChoice or None
        Which joints keep the learned force of the chosen stage, and the
        held-out figures behind each choice (None when no learned force was
        chosen per joint).
    """

    stages: tuple
    chosen: str
    split: str
    prior_masses: np.ndarray | None = None
    masses: np.ndarray | None = None
    findings: ResidualFindings | None = None
    recording_offsets: dict = dataclasses.field(default_factory=dict)
    novel_share: float | None = None
    validation_floor: np.ndarray | None = None
    joint_choice: object = None

    def format(self) -> str:
        """A few lines for a terminal."""
        lines = [f"validation: {self.split}"]
        if self.novel_share is not None:
            lines[0] += f"; {self.novel_share:.0%} of its states lie beyond the training states (novelty > 1)"
        for s in self.stages:
            mark = "*" if s.name == self.chosen else " "
            per_joint = " ".join(f"{v:.3g}" for v in s.validation_mse)
            band = ""
            if s.validation_in_band is not None:
                band = " in band " + " ".join(f"{v:.3g}" for v in s.validation_in_band)
            lines.append(
                f"{mark} {s.name:<19} torque MSE {s.mean_mse:.4g} (joints {per_joint}{band}) {s.seconds:.1f} s  "
                f"{s.detail}"
            )
        if self.validation_floor is not None:
            lines.append(
                "out-of-band floor of the validation torques (tau less its smoothed self, no model's reach): joints "
                + " ".join(f"{v:.3g}" for v in self.validation_floor)
            )
        if self.joint_choice is not None:
            lines.append(self.joint_choice.format())
        if self.masses is not None:
            lines.append(
                "body masses (kg), prior -> identified: "
                + ", ".join(f"{a:.3g} -> {b:.3g}" for a, b in zip(self.prior_masses, self.masses))
            )
        if self.recording_offsets:
            spread = np.std(np.stack(list(self.recording_offsets.values())), axis=0)
            lines.append(
                f"torque bias between the {len(self.recording_offsets)} training logs (std per joint, N m): "
                + " ".join(f"{v:.3g}" for v in spread)
            )
        if self.findings is not None:
            lines.append(self.findings.format())
        return "\n".join(lines)
