"""The step-size controller of the compiled adaptive integrators (TensorFlow, per trajectory).

After an attempt with error norm ``err`` (``<= 1``: accepted) the next step is
``h · factor``:

- accepted: ``factor = clip(growth_safety · err^(-beta1 k) · err_prev^(beta2 k),
  accepted_min, factor_max)``, at most 1 right after a rejection when
  ``hold_after_reject``;
- rejected: ``factor = max(factor_min, safety · err^(-k))``; a non-finite
  attempt: ``nonfinite_factor``;

with ``k = 1 / (error_order + 1)`` and ``err_prev`` the norm of the last
accepted step. ``beta1 = 1, beta2 = 0`` is the classical (integral)
controller; ``beta1 = 0.7, beta2 = 0.4`` Gustafsson's PI as OrdinaryDiffEq
and Hairer use it.

The default, :data:`DEFAULT_CONTROLLER`, is diffrax's controller (the integral
one; an accepted step never shrinks the next one; a rejected one shrinks it by
at most the safety) with a **safety of 0.75 instead of 0.9** and scipy's rule
that the step after a rejection does not grow. Chosen by measurement
(``benchmarks/bench_rollout.py --accuracy-only``: learned 64x64 models of a
double pendulum, a 7-DOF chain, a cart-pole and a planar arm, 128
trajectories each, tsit5 and dopri8 at rtol 1e-4, 1e-6 and 1e-8, errors
against a 1e-11 reference trajectory by trajectory; the table and the probes
are in docs/benchmarks/speed.md, "Accuracy per trajectory"):

- With diffrax's own rules (:meth:`StepController.diffrax`) the engine takes
  diffrax's steps (mean accepted and rejected steps within 0.5 %) and its
  errors are diffrax's: the geometric mean of the per-trajectory error ratio
  is 0.91-1.11, the chance spread of these systems' errors.
- A lower safety asks for smaller steps and so is rejected less often. At
  0.75 a solve takes 6-14 % more accepted steps and 47-72 % fewer
  rejections, the same attempts as diffrax's (fewer in 21 of the 24 cells, at
  most 1 % more), and its errors are 0.45-0.78 times diffrax's (geometric mean
  per trajectory; 95 % interval at most 0.90 in every cell). 0.85 and 0.8
  (probed without the hold rule below) gave ratios up to 1.03 and 0.97; at
  0.7 the attempts exceed diffrax's (double pendulum, tsit5 at 1e-8: +4.5 %).
- Not growing right after a rejection changes little on smooth problems and
  much where the right-hand side has kinks (forces sampled on ``t`` and
  interpolated linearly: every sample is a kink, which the error estimate
  under-reads, so after each one diffrax's rule grows the step straight into
  the next and is rejected): on the forced test problem of
  ``tests/test_solvers.py`` (rtol 1e-8) dopri8 takes 230 attempts instead of
  376 and tsit5 errs 2.1e-6 instead of 4.2e-6 (scipy's RK45 1.7e-6).
- Gustafsson's PI (:meth:`StepController.pi`, the default until then) takes
  2-5 % fewer attempts than diffrax and is the more accurate on the chain,
  but on the double pendulum its errors have a heavy tail (90th percentile up
  to 1.5x, worst trajectory up to 2.8x diffrax's at rtol 1e-6), which a
  tighter PI did not remove, and its geometric-mean ratio reached 1.03
  (double pendulum, tsit5) and 1.14 (planar arm, dopri8).
"""

from __future__ import annotations

from dataclasses import dataclass

import tensorflow as tf

__all__ = ["StepController", "DEFAULT_CONTROLLER"]


@dataclass(frozen=True)
class StepController:
    """Coefficients of a PI step-size controller (see the module docstring).

    Attributes
    ----------
    beta1, beta2 : float
        Exponents (times ``k``) of the current and the previous accepted error.
    growth_safety : float
        Safety factor of an accepted step's proposal. With ``err_prev = err`` a
        steady run settles where ``growth_safety · err^(-(beta1 - beta2) k) = 1``.
    safety : float
        Safety factor of a rejected step's proposal.
    factor_min, factor_max : float
        Bounds of the factor.
    accepted_min : float
        Lower bound of the factor after an accepted step (1: an accepted step
        never shrinks the next one, diffrax's rule).
    hold_after_reject : bool
        The step after a rejection does not grow (scipy's and Hairer's rule).
    nonfinite_factor : float
        Factor after a non-finite attempt.

    Raises
    ------
    ValueError
        For a safety outside ``(0, 1]``, ``factor_min`` outside ``(0, 1)``,
        ``factor_max < 1``, ``accepted_min`` outside ``[factor_min, 1]`` or a
        ``nonfinite_factor`` outside ``(0, 1)``.
    """

    beta1: float = 1.0
    beta2: float = 0.0
    growth_safety: float = 0.75
    safety: float = 0.75
    factor_min: float = 0.2
    factor_max: float = 10.0
    accepted_min: float = 1.0
    hold_after_reject: bool = True
    nonfinite_factor: float = 0.25

    def __post_init__(self) -> None:
        for name in ("growth_safety", "safety"):
            value = getattr(self, name)
            if not 0.0 < value <= 1.0:
                raise ValueError(f"{name} must be in (0, 1]; got {value!r}")
        if not 0.0 < self.factor_min < 1.0:
            raise ValueError(f"factor_min must be in (0, 1); got {self.factor_min!r}")
        if not self.factor_max >= 1.0:
            raise ValueError(f"factor_max must be >= 1; got {self.factor_max!r}")
        if not self.factor_min <= self.accepted_min <= 1.0:
            raise ValueError(f"accepted_min must be in [factor_min, 1]; got {self.accepted_min!r}")
        if not 0.0 < self.nonfinite_factor < 1.0:
            raise ValueError(f"nonfinite_factor must be in (0, 1); got {self.nonfinite_factor!r}")

    @classmethod
    def diffrax(cls) -> StepController:
        """diffrax's default ``PIDController`` (integral, safety 0.9, factors in [0.2, 10])."""
        return cls(growth_safety=0.9, safety=0.9, hold_after_reject=False)

    @classmethod
    def scipy(cls) -> StepController:
        """scipy's explicit Runge–Kutta rules (integral, safety 0.9, no growth after a rejection)."""
        return cls(growth_safety=0.9, safety=0.9, accepted_min=0.2)

    @classmethod
    def pi(cls) -> StepController:
        """Gustafsson's PI (0.7, 0.4), settling at the classical error ``0.9^(1/k)``; no growth after a rejection."""
        return cls(beta1=0.7, beta2=0.4, growth_safety=0.9**0.3, safety=0.9, accepted_min=0.2)

    def factor(self, norm, err_prev, *, accept, rejected, finite, k_exp: float, dtype):
        """The next step's factor, shape ``(B,)``.

        Parameters
        ----------
        norm : tf.Tensor, shape ``(B,)``
            This attempt's error norm (``inf`` where not finite).
        err_prev : tf.Tensor, shape ``(B,)``
            The last accepted step's norm (floored).
        accept, rejected, finite : tf.Tensor of bool, shape ``(B,)``
            This attempt accepted; the previous attempt rejected; this attempt finite.
        k_exp : float
            ``1 / (error_order + 1)``.
        dtype : tf.DType
        """
        safe = tf.maximum(norm, tf.constant(1e-10, dtype))
        grow = tf.constant(self.growth_safety, dtype) * safe ** (-self.beta1 * k_exp)
        if self.beta2:
            grow = grow * err_prev ** (self.beta2 * k_exp)
        grow = tf.clip_by_value(grow, tf.constant(self.accepted_min, dtype), tf.constant(self.factor_max, dtype))
        if self.hold_after_reject:
            grow = tf.where(rejected, tf.minimum(grow, tf.constant(1.0, dtype)), grow)
        shrink = tf.maximum(tf.constant(self.factor_min, dtype), tf.constant(self.safety, dtype) * safe ** (-k_exp))
        shrink = tf.where(finite, shrink, tf.fill(tf.shape(norm), tf.constant(self.nonfinite_factor, dtype)))
        return tf.where(accept, grow, shrink)


#: The controller of every compiled solve unless told otherwise (see the module docstring).
DEFAULT_CONTROLLER = StepController()
