"""The end-to-end experiment behind ``lnn demo``: simulate, train, roll out, evaluate, plot.

:func:`run_demo` is the library side (it prints nothing and reports through
``progress``); ``lnn demo`` looks the system up by name, draws the progress
and prints the metrics. Each built-in demo has a budget that finishes in a
few minutes on a 2-core CPU.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

__all__ = ["DemoConfig", "DemoResult", "DEMOS", "run_demo"]


@dataclass(frozen=True)
class DemoConfig:
    """The settings of one demo experiment.

    Attributes
    ----------
    system : str
        Name of the built-in system (``simulations.SYSTEMS``).
    kind : str
        ``LagrangianNetwork`` kind.
    hidden : tuple of int
        Hidden widths of the networks.
    loss : str or dict of str to float
        Training loss (``lnn.fit``): a term or ``{term: weight}``.
    n_trajectories, duration, dt : int, float, float
        Training data: trajectories of ``duration`` seconds sampled every ``dt``.
    excitation : str or None
        Torques applied while generating data (``"gravity-sinusoids"`` for arms).
    epochs, batch_size, learning_rate, time_limit : int, int, float, float
        Training budget; ``time_limit`` (s) caps the wall time.
    n_rollouts, rollout_duration, rollout_dt : int, float, float
        Held-out initial states rolled out for the metrics and figures.
    animation_duration : float
        Seconds of the first rollout shown in the animation.
    dtype : str
        Model dtype.
    """

    system: str
    kind: str = "kinetic-potential"
    hidden: tuple[int, ...] = (128, 128)
    loss: str | dict = "acceleration"
    n_trajectories: int = 200
    duration: float = 5.0
    dt: float = 0.05
    excitation: str | None = None
    epochs: int = 200
    batch_size: int = 256
    learning_rate: float = 1e-3
    time_limit: float = 90.0
    n_rollouts: int = 16
    rollout_duration: float = 5.0
    rollout_dt: float = 0.02
    animation_duration: float = 4.0
    dtype: str = "float32"


#: The built-in demos, by system name.
DEMOS: dict[str, DemoConfig] = {
    "double-pendulum": DemoConfig(system="double-pendulum", kind="structured"),
    # The torque loss alone lets a structured M shrink towards 0 (the inverse
    # dynamics stay accurate while the forward dynamics do not): add qdd.
    "planar-arm": DemoConfig(
        system="planar-arm",
        kind="structured",
        loss={"torque": 1.0, "acceleration": 1.0},
        excitation="gravity-sinusoids",
    ),
}


@dataclass(frozen=True)
class DemoResult:
    """What :func:`run_demo` produced.

    Attributes
    ----------
    output_dir : pathlib.Path
        The folder holding every file below.
    dataset, model, rollouts, metrics_csv, history_csv, figure_png, figure_pdf, animation : pathlib.Path
        The files written.
    metrics : lnn.metrics.MetricsTable
        The evaluation on held-out initial states.
    history : lnn.History
        The training history.
    config : DemoConfig
        The settings used.
    """

    output_dir: Path
    dataset: Path
    model: Path
    rollouts: Path
    metrics_csv: Path
    history_csv: Path
    figure_png: Path
    figure_pdf: Path
    animation: Path
    metrics: object = field(repr=False)
    history: object = field(repr=False)
    config: DemoConfig = field(repr=False)


_FILES = {
    "dataset": "dataset.npz",
    "model": "model.keras",
    "rollouts": "rollouts.npz",
    "metrics_csv": "metrics.csv",
    "history_csv": "history.csv",
    "figure_png": "figure.png",
    "figure_pdf": "figure.pdf",
    "animation": "animation.gif",
}


def run_demo(
    system,
    *,
    config: DemoConfig,
    output_dir="lnn-demo",
    seed: int = 0,
    overwrite: bool = False,
    progress: Callable[..., None] | None = None,
) -> DemoResult:
    """Simulate ``system``, learn it, roll the model out against the truth, evaluate and plot.

    Parameters
    ----------
    system : MechanicalSystem
        The true system, with ``sample_state``, ``positions``, ``name`` and
        ``parameters()`` (any built-in system).
    config : DemoConfig, keyword-only
        Settings (see :data:`DEMOS` for the built-in ones).
    output_dir : str or os.PathLike, keyword-only
        Folder for the outputs; created if missing.
    seed : int, keyword-only
        Seed of the data, the initialisation and the held-out states.
    overwrite : bool, keyword-only
        Replace the demo's files if they already exist in ``output_dir``;
        by default refuse before doing any work.
    progress : callable, optional, keyword-only
        ``progress(done, total, message)``, called per stage and per epoch.

    Returns
    -------
    DemoResult
        Paths of every file written, the metrics table and the history.

    Raises
    ------
    FileExistsError
        If one of the demo's files exists in ``output_dir`` and ``overwrite``
        is false.
    """
    import lnn
    from lnn import plot
    from lnn.metrics import evaluate
    from lnn.plot import RolloutPair

    if not isinstance(config, DemoConfig):
        raise TypeError(f"config must be a DemoConfig, got {type(config).__name__}")
    out = Path(output_dir)
    paths = {key: out / name for key, name in _FILES.items()}
    existing = [p for p in paths.values() if p.exists()]
    if existing and not overwrite:
        raise FileExistsError(
            f"refusing to overwrite existing demo files {[str(p) for p in existing]}; choose "
            "another output folder or pass overwrite=True (--force)"
        )
    for path in existing:  # the user asked to replace the demo's own files
        path.unlink()
    out.mkdir(parents=True, exist_ok=True)
    report = progress or (lambda *args, **kwargs: None)
    stages = 5.0
    name = getattr(system, "name", type(system).__name__)

    report(0, stages, "simulating the true system")
    dataset = lnn.generate(
        system,
        n_trajectories=config.n_trajectories,
        duration=config.duration,
        dt=config.dt,
        seed=seed,
        tau=config.excitation,
    )
    dataset.save(paths["dataset"])
    held_out = lnn.generate(
        system,
        n_trajectories=config.n_rollouts,
        duration=config.rollout_duration,
        dt=config.rollout_dt,
        seed=seed + 10_000,
        tau=config.excitation,
    )

    report(1, stages, "training")
    model = lnn.LagrangianNetwork(
        system.n_dof, kind=config.kind, hidden=config.hidden, angular=system.angular, dtype=config.dtype, seed=seed
    )

    def epoch_progress(done, total, message=""):
        report(1 + min(done / max(total, 1), 1.0), stages, f"training {message}")

    history = lnn.fit(
        model,
        dataset,
        loss=config.loss,
        epochs=config.epochs,
        batch_size=config.batch_size,
        learning_rate=config.learning_rate,
        seed=seed,
        time_limit=config.time_limit,
        progress=epoch_progress,
        csv_log=paths["history_csv"],
    )
    model.save(paths["model"])

    report(2, stages, "rolling out the learned and the true system, evaluating")
    metrics = evaluate(model, held_out, true_system=system, n_rollouts=config.n_rollouts)
    metrics.to_csv(paths["metrics_csv"])
    true, learned = metrics.details["reference"], metrics.details["predicted"]
    pair = RolloutPair(
        true=true,
        learned=learned,
        metadata={
            "system": name,
            "parameters": system.parameters() if hasattr(system, "parameters") else {},
            "angular": [bool(a) for a in system.angular],
            "model": str(paths["model"]),
        },
    )
    pair.save(paths["rollouts"])

    report(4, stages, "plotting")
    drawn = plot.paper_figure(true, learned, system=system)
    plot.save(drawn.figure, paths["figure_png"])
    plot.save(drawn.figure, paths["figure_pdf"])
    animation = plot.animate(
        system, true[0].until(config.animation_duration), learned[0].until(config.animation_duration)
    )
    plot.save_animation(animation, paths["animation"])
    report(stages, stages, "done")

    return DemoResult(output_dir=out, metrics=metrics, history=history, config=config, **paths)
