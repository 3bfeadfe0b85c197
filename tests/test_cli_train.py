"""`lnn train` and `lnn evaluate`: data -> model -> metrics, in process, tiny settings."""

from __future__ import annotations

import csv
from types import SimpleNamespace

import numpy as np
import pytest

pytest.importorskip("tensorflow")

from lnn.cli import (
    build_parser,  # noqa: E402
    main,  # noqa: E402
)
from lnn.cli._common import parse_hidden, parse_loss  # noqa: E402
from lnn.cli.train import library_defaults  # noqa: E402
from lnn.data import Dataset  # noqa: E402


@pytest.fixture(scope="module")
def pendulum_file(tmp_path_factory):
    """A tiny unforced pendulum dataset written as an lnn .npz file."""
    rng = np.random.default_rng(0)
    n_traj, n_t, dt = 6, 21, 0.05
    t = np.arange(n_t) * dt
    amplitude = rng.uniform(0.2, 1.0, n_traj)
    omega = np.sqrt(9.81)
    q = (amplitude[:, None] * np.cos(omega * t))[..., None]
    qd = (-amplitude[:, None] * omega * np.sin(omega * t))[..., None]
    qdd = -9.81 * np.sin(q)
    data = Dataset(
        t=np.tile(t, n_traj),
        q=q.reshape(-1, 1),
        qd=qd.reshape(-1, 1),
        qdd=qdd.reshape(-1, 1),
        tau=np.zeros((n_traj * n_t, 1)),
        trajectory=np.repeat(np.arange(n_traj), n_t),
        system="pendulum",
        parameters={},
        angular=(True,),
    )
    path = tmp_path_factory.mktemp("cli") / "pendulum.npz"
    data.save(path)
    return path


def test_train_then_evaluate_round_trip(pendulum_file, tmp_path, capsys):
    model = tmp_path / "model.keras"
    log = tmp_path / "log.csv"
    code = main(
        [
            "train",
            str(pendulum_file),
            "-o",
            str(model),
            "--hidden",
            "8,8",
            "--epochs",
            "2",
            "--batch-size",
            "32",
            "--validation",
            "0.2",
            "--csv-log",
            str(log),
        ]
    )
    assert code == 0
    out = capsys.readouterr().out
    assert "best epoch" in out and model.exists()
    with log.open() as handle:
        rows = list(csv.DictReader(handle))
    assert [int(r["epoch"]) for r in rows] == [0, 1]
    assert float(rows[-1]["train_total"]) > 0

    metrics_csv = tmp_path / "metrics.csv"
    code = main(["evaluate", str(model), str(pendulum_file), "--rollouts", "2", "--csv", str(metrics_csv)])
    assert code == 0
    out = capsys.readouterr().out
    assert "acceleration_error_median" in out and "energy_error_mean" in out
    with metrics_csv.open() as handle:
        names = [r["metric"] for r in csv.DictReader(handle)]
    assert {
        "acceleration_error_median",
        "torque_mse",
        "rollout_error_geometric_mean",
        "valid_prediction_time_mean",
        "energy_error_mean",
        "mass_matrix_error_median",
    } <= set(names)

    # Existing outputs are refused without --force, replaced with it.
    assert main(["evaluate", str(model), str(pendulum_file), "--rollouts", "0", "--csv", str(metrics_csv)]) == 2
    assert "--force" in capsys.readouterr().err
    assert main(["train", str(pendulum_file), "-o", str(model), "--hidden", "4", "--epochs", "1"]) == 2
    assert "refusing to overwrite" in capsys.readouterr().err
    assert (
        main(["evaluate", str(model), str(pendulum_file), "--rollouts", "0", "--csv", str(metrics_csv), "--force"]) == 0
    )


def test_auto_loss_is_the_library_default_loss():
    from lnn.models import LagrangianNetwork
    from lnn.train import default_loss

    unforced = SimpleNamespace(tau=np.zeros((4, 2)))
    driven = SimpleNamespace(tau=np.array([[0.0, 0.0], [0.1, -0.2]]))
    structured = LagrangianNetwork(2, kind="structured", hidden=(4,))
    assert default_loss(unforced, structured) == "acceleration"
    assert default_loss(driven) == "torque"
    assert default_loss(driven, structured) == {"torque": 1.0, "acceleration": 1.0}
    assert build_parser().parse_args(["train", "d.npz", "-o", "m.keras"]).loss == "auto"


def _train_parser():
    parser = build_parser()
    action = next(a for a in parser._subparsers._group_actions if a.dest == "command")
    return action.choices["train"]


def test_cli_defaults_are_the_library_defaults():
    """Every default of `lnn train` is that of LagrangianNetwork or lnn.fit (and --help shows it)."""
    import inspect

    from lnn.models import LagrangianNetwork
    from lnn.train import fit

    model = {
        k: p.default
        for k, p in inspect.signature(LagrangianNetwork).parameters.items()
        if p.default is not inspect.Parameter.empty
    }
    fitting = {
        k: p.default for k, p in inspect.signature(fit).parameters.items() if p.default is not inspect.Parameter.empty
    }
    # The static reading that the CLI uses (no TensorFlow at start-up) is the signatures'.
    assert library_defaults("model") == {k: v for k, v in model.items() if k in library_defaults("model")}
    assert set(library_defaults("model")) >= {"kind", "hidden", "activation", "damping", "convex", "dtype"}
    assert library_defaults("fit") == {k: v for k, v in fitting.items() if k in library_defaults("fit")}
    args = build_parser().parse_args(["train", "d.npz", "-o", "m.keras"])
    cli_model = {
        "kind": args.kind,
        "hidden": parse_hidden(args.hidden),
        "activation": args.activation,
        "damping": args.damping,
        "convex": args.convex,
        "dtype": args.dtype,
    }
    if "friction" in model:
        cli_model["friction"] = args.friction
    for name, value in cli_model.items():
        assert value == model[name], name
    cli_fit = {
        "loss": args.loss,
        "epochs": args.epochs,
        "batch_size": args.batch_size,
        "learning_rate": args.lr,
        "schedule": args.schedule,
        "patience": args.patience,
        "initialization": args.init,
        "time_limit": args.time_limit,
        "seed": args.seed,
        "validation": args.validation,
        "checkpoint_dir": args.checkpoint_dir,
        "csv_log": args.csv_log,
        "tensorboard_dir": args.tensorboard_dir,
    }
    for name, value in cli_fit.items():
        assert value == fitting[name], name
    assert model["kind"] == "structured" and args.kind == model["kind"]
    text = " ".join(_train_parser().format_help().split())
    for shown in (
        "(default: structured)",
        "(default: 128,128)",
        "(default: auto)",
        "(default: 512)",
        "(default: 0.01)",
        "(default: cosine)",
        "(default: 0.1)",
        "(default: None)",
    ):
        assert shown in text, shown


def test_option_parsing():
    assert parse_loss("acceleration") == "acceleration"
    assert parse_loss("torque=1,energy=0.1") == {"torque": 1.0, "energy": 0.1}
    assert parse_hidden("64,32") == (64, 32)
    with pytest.raises(ValueError, match="--hidden"):
        parse_hidden("64,x")
    with pytest.raises(ValueError, match="--loss"):
        parse_loss("torque=abc")
