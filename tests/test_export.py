"""lnn.export: the URDF with the identified inertias (Pinocchio and MuJoCo read it back), the SavedModel that
TensorFlow alone calls, and the ``lnn export`` verb."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
import xml.etree.ElementTree as ElementTree
from pathlib import Path

import numpy as np
import pytest

import lnn
import simulations
from lnn.cli import main
from lnn.export import write_urdf
from lnn.inertia import log_cholesky_to_parameters, parameters_to_log_cholesky, physical_consistency

from conftest import record_returns

DFKI_URDF = Path(__file__).resolve().parents[2] / "shared" / "data" / "dfki_double_pendulum" / "double_pendulum.urdf"
needs_dfki = pytest.mark.skipif(not DFKI_URDF.is_file(), reason="the shared DFKI data are not beside the repository")
#: Standard deviations of the log-Cholesky coordinates' perturbation: scale 10 %, axes 5 %, shear and centre 1 cm.
_SPREAD = np.array([0.1, 0.05, 0.05, 0.05, 0.01, 0.01, 0.01, 0.01, 0.01, 0.01])


def _identified(prior, n: int, *, seed: int, friction="viscous+coulomb"):
    """A float64 rigid-body network whose bodies, armature and friction differ from the prior's (physical)."""
    # xla=False: these tests check values, not XLA (tests/test_compiled.py compiles the eager calls)
    network = lnn.LagrangianNetwork(
        n, kind="rigid-body", prior=prior, dtype="float64", friction=friction, seed=seed, xla=False
    )
    kind = network.kind_model
    rng = np.random.default_rng(seed)
    eta = parameters_to_log_cholesky(kind.chain0.inertias) + rng.normal(size=(n, 10)) * _SPREAD
    kind.assign(log_cholesky_to_parameters(eta), armature=rng.uniform(0.01, 0.1, n))
    for term in network.forces:
        term.assign(rng.uniform(0.01, 0.2, n))
    return network


def _lnn_terms(network, q, qd):
    """The rigid-body stage's ``M`` (without the armature), gravity and Coriolis torques, float64."""
    import tensorflow as tf

    kind = network.kind_model
    q, qd = tf.constant(q), tf.constant(qd)
    zero = tf.zeros_like(q)
    gravity = kind._newton_euler(q, zero, zero).numpy()
    mass = kind._rigid_mass(q).numpy() - np.diag(np.asarray(kind.armature()))
    return mass, gravity, kind._newton_euler(q, qd, zero).numpy() - gravity


def _pinocchio_terms(path, locked, q, qd):
    pin = pytest.importorskip("pinocchio")
    text = _with_world(Path(path).read_text())
    full = pin.buildModelFromXML(text)
    model = pin.buildReducedModel(full, [full.getJointId(j) for j in locked], pin.neutral(full)) if locked else full
    data = model.createData()
    n = model.nv
    out = np.empty((len(q), n, n)), np.empty((len(q), n)), np.empty((len(q), n))
    for b in range(len(q)):
        upper = np.triu(pin.crba(model, data, q[b]))
        out[0][b] = upper + np.triu(upper, 1).T
        out[1][b] = pin.rnea(model, data, q[b], np.zeros(n), np.zeros(n))
        out[2][b] = pin.rnea(model, data, q[b], qd[b], np.zeros(n)) - out[1][b]
    return out, model


def _mujoco_terms(path, q, qd):
    """MuJoCo's ``M``, gravity and Coriolis of the URDF's first ``n`` joints (the others at rest at zero)."""
    mujoco = pytest.importorskip("mujoco")
    root = ElementTree.fromstring(_with_world(Path(path).read_text()))
    for link in root.iter("link"):  # the dynamics only: no meshes to find
        for tag in ("visual", "collision"):
            for element in link.findall(tag):
                link.remove(element)
    model = mujoco.MjModel.from_xml_string(ElementTree.tostring(root, encoding="unicode"))
    data = mujoco.MjData(model)
    n = q.shape[1]
    out = np.empty((len(q), n, n)), np.empty((len(q), n)), np.empty((len(q), n))
    full = np.zeros((model.nv, model.nv))
    for b in range(len(q)):
        data.qpos[:], data.qvel[:] = 0.0, 0.0
        data.qpos[:n] = q[b]
        mujoco.mj_forward(model, data)
        mujoco.mj_fullM(model, data, full)
        out[0][b], out[1][b] = full[:n, :n], data.qfrc_bias[:n]
        data.qvel[:n] = qd[b]
        mujoco.mj_forward(model, data)
        out[2][b] = data.qfrc_bias[:n] - out[1][b]
    return out, model


def _with_world(text: str) -> str:
    """The DFKI file names an undefined 'world' link (a Drake habit) that urdfdom refuses: define it."""
    root = ElementTree.fromstring(text)
    if root.find("link[@name='world']") is None and 'link="world"' in text:
        root.insert(0, ElementTree.Element("link", {"name": "world"}))
    return ElementTree.tostring(root, encoding="unicode")


def _states(n: int, count: int = 1000, *, seed: int = 0):
    rng = np.random.default_rng(seed)
    return rng.uniform(-np.pi, np.pi, (count, n)), rng.normal(size=(count, n))


def _check_round_trip(network, written, locked):
    q, qd = _states(network.n_dof)
    expected = _lnn_terms(network, q, qd)
    (pin_terms, pin_model) = _pinocchio_terms(written, locked, q, qd)
    for name, got, want in zip(("M", "gravity", "Coriolis"), pin_terms, expected):
        np.testing.assert_allclose(got, want, rtol=0, atol=1e-8, err_msg=f"Pinocchio {name}")
    mj_terms, mj_model = _mujoco_terms(written, q, qd)
    for name, got, want in zip(("M", "gravity", "Coriolis"), mj_terms, expected):
        np.testing.assert_allclose(got, want, rtol=0, atol=1e-8, err_msg=f"MuJoCo {name}")
    return pin_model, mj_model


@pytest.mark.robots
def test_the_written_panda_urdf_gives_the_identified_rigid_body_in_pinocchio_and_mujoco(tmp_path):
    pytest.importorskip("pinocchio")
    robot = simulations.panda()
    network = _identified(robot, 7, seed=0)
    report = write_urdf(network, tmp_path / "panda.urdf", template=robot.path)
    assert report.locked_joints == ("panda_finger_joint1", "panda_finger_joint2")
    assert report.links["panda_joint7"] == "panda_link7"
    assert {"panda_link0", "panda_leftfinger", "panda_rightfinger"} <= set(report.kept)
    # This body of joint 7, less the template's hand and fingers, is not physical: the hand (fixed) joins link 7.
    assert report.merged == {"panda_link7": ("panda_link8", "panda_hand", "panda_hand_tcp")}
    pin_model, mj_model = _check_round_trip(network, tmp_path / "panda.urdf", report.locked_joints)
    friction = network.friction_parameters()
    np.testing.assert_allclose(np.array(pin_model.damping), friction["viscous"], rtol=1e-15)
    np.testing.assert_allclose(np.array(pin_model.friction), friction["coulomb"], rtol=1e-15)
    np.testing.assert_allclose(mj_model.dof_damping[:7], friction["viscous"], rtol=1e-15)
    np.testing.assert_allclose(mj_model.dof_frictionloss[:7], friction["coulomb"], rtol=1e-15)
    # No URDF field carries the armature: both parsers leave it at zero, the file says it in a comment.
    assert np.all(np.array(pin_model.armature) == 0) and np.all(mj_model.dof_armature == 0)
    text = (tmp_path / "panda.urdf").read_text()
    armature = np.asarray(network.kind_model.armature())
    assert f"lnn: armature {armature[3]!r} (kg m^2; no URDF field carries it" in text
    assert "locked joints (not moved by the dataset) panda_finger_joint1, panda_finger_joint2" in text
    assert "A URDF cannot carry:" in text
    assert "Links panda_link8, panda_hand, panda_hand_tcp (fixed to panda_link7) are merged into panda_link7" in text
    # Every link written is physical, and the template's other links are untouched.
    assert physical_consistency(report.parameters).all
    template = ElementTree.parse(robot.path).getroot()
    written = ElementTree.parse(tmp_path / "panda.urdf").getroot()
    for name in ("panda_leftfinger", "panda_link0"):
        old, new = (ElementTree.tostring(r.find(f"link[@name='{name}']/inertial")) for r in (template, written))
        assert old == new


@pytest.mark.robots
@needs_dfki
def test_the_written_dfki_urdf_gives_the_identified_rigid_body_in_pinocchio_and_mujoco(tmp_path):
    prior = simulations.URDFRobot.from_urdf(DFKI_URDF, missing_links="add")
    network = _identified(prior, 2, seed=1)
    report = write_urdf(network, tmp_path / "dfki.urdf", template=DFKI_URDF)
    assert report.links == {"Joint1": "Link1", "Joint2": "Link2"} and report.locked_joints == ()
    assert "base_link" in report.kept
    _check_round_trip(network, tmp_path / "dfki.urdf", ())


def _planted_dfki(tmp_path) -> Path:
    """The DFKI URDF with other masses, centres of mass and a tilted inertia (``rpy``) planted in its links."""
    root = ElementTree.parse(DFKI_URDF).getroot()
    for name, mass, com, rpy in (("Link1", 0.75, "0.002 0.01 -0.25", "0.3 0 0"), ("Link2", 0.5, "0 0.02 0.2", "0 0 0")):
        inertial = root.find(f"link[@name='{name}']/inertial")
        inertial.find("mass").set("value", str(mass))
        inertial.find("origin").set("xyz", com)
        inertial.find("origin").set("rpy", rpy)
        inertial.find("inertia").attrib.update(ixx="0.004", iyy="0.003", izz="0.002", ixy="0.0", ixz="0.0", iyz="0.0")
    path = tmp_path / "planted.urdf"
    path.write_text(ElementTree.tostring(root, encoding="unicode"))
    return path


@pytest.mark.slow
@pytest.mark.robots
@needs_dfki
def test_identify_recovers_planted_inertias_and_friction_from_the_written_urdf(tmp_path):
    """Plant bodies and friction in the DFKI URDF, simulate, identify from the original URDF, write, read back.

    Slow: an identification (12-23 s on the shared 2-core machine, 2026-12-07)."""
    viscous, coulomb = np.array([0.08, 0.02]), np.array([0.09, 0.19])
    truth = simulations.URDFRobot.from_urdf(
        _planted_dfki(tmp_path),
        missing_links="add",
        friction=simulations.Friction(viscous=tuple(viscous), coulomb=tuple(coulomb)),
    )
    prior = simulations.URDFRobot.from_urdf(DFKI_URDF, missing_links="add")
    data = lnn.excitation_trajectories(truth, n_trajectories=6, duration=4.0, dt=0.005, seed=0)
    data = lnn.Dataset(t=data.t, q=data.q, qd=data.qd, qdd=data.qdd, tau=data.tau, trajectory=data.trajectory)
    model = lnn.identify(data, prior=prior, friction="viscous+coulomb", offsets=None, residual=False, seed=0)
    report = model.to_urdf(tmp_path / "identified.urdf", template=DFKI_URDF)
    assert report.stage == "stage 'rigid body' of lnn.identify"
    assert "identified by stage 'rigid body' of lnn.identify" in (tmp_path / "identified.urdf").read_text()
    _check_round_trip(model.network, tmp_path / "identified.urdf", ())  # Pinocchio and MuJoCo: lnn's, to 1e-8
    # The written file's dynamics are the planted ones: what a pendulum swinging about x identifies.
    written = simulations.URDFRobot.from_urdf(tmp_path / "identified.urdf", missing_links="add")
    q, qd = _states(2, 500, seed=3)
    qdd = np.random.default_rng(4).normal(size=q.shape)
    armature = np.diag(list(report.armature.values()))
    got = written.inverse_dynamics(q, qd, qdd) + qdd @ armature
    want = simulations.URDFRobot.from_urdf(_planted_dfki(tmp_path), missing_links="add").inverse_dynamics(q, qd, qdd)
    np.testing.assert_allclose(got, want, rtol=0, atol=1e-6 * np.abs(want).max())  # measured 3e-8 (noise-free data)
    # Identifiable parameters: the outer body's first moments in the plane of motion (y, z; x is the axis), and the
    # friction. (The inner body's mass and first moment along the link trade against the outer body's mass.)
    bodies = report.parameters  # link frames = joint frames
    planted = np.array(truth.pinocchio_model.inertias[2].toDynamicParameters())
    np.testing.assert_allclose(bodies[1][2:4], planted[2:4], atol=1e-6 * planted[0])
    np.testing.assert_allclose(list(report.damping.values()), viscous, rtol=1e-5)
    np.testing.assert_allclose(list(report.friction.values()), coulomb, rtol=1e-5)


def test_write_urdf_refuses_bad_input_and_says_what_it_received(tmp_path):
    arm = simulations.PlanarArm(masses=(1.0, 0.8), lengths=(0.6, 0.5))
    plain = lnn.LagrangianNetwork(2, kind="structured", hidden=(8,), dtype="float64", seed=0)
    with pytest.raises(ValueError, match=r"no rigid-body stage \(kind 'structured'\): there is no URDF"):
        write_urdf(plain, tmp_path / "x.urdf", template=tmp_path / "robot.urdf")
    network = lnn.LagrangianNetwork(2, kind="rigid-body", prior=arm, dtype="float64")
    with pytest.raises(FileNotFoundError, match="template URDF not found: .*robot.urdf"):
        write_urdf(network, tmp_path / "x.urdf", template=tmp_path / "robot.urdf")
    (tmp_path / "x.urdf").write_text("mine")
    (tmp_path / "robot.urdf").write_text("<robot name='r'/>")
    with pytest.raises(FileExistsError, match=r"x.urdf exists; pass force=True \(--force\)"):
        write_urdf(network, tmp_path / "x.urdf", template=tmp_path / "robot.urdf")
    assert (tmp_path / "x.urdf").read_text() == "mine"


@pytest.mark.robots
@needs_dfki
def test_write_urdf_refuses_a_template_whose_joints_differ_naming_them(tmp_path):
    pytest.importorskip("pinocchio")
    panda = _identified(simulations.panda(), 7, seed=0)
    with pytest.raises(ValueError, match=r"does not match the model: it has no joint\(s\) \['panda_joint1'"):
        write_urdf(panda, tmp_path / "x.urdf", template=DFKI_URDF)
    # Same names, another elbow: the kinematics differ at Joint2, and the message says where.
    prior = simulations.URDFRobot.from_urdf(DFKI_URDF, missing_links="add")
    network = _identified(prior, 2, seed=0)
    moved = tmp_path / "moved.urdf"
    moved.write_text(DFKI_URDF.read_text().replace('xyz="0.0522 0 -0.3"', 'xyz="0.0522 0 -0.35"'))
    with pytest.raises(ValueError, match=r"kinematics at joint\(s\): Joint2 \(model: origin \[0.0522, 0.0, -0.3\]"):
        write_urdf(network, tmp_path / "x.urdf", template=moved)
    assert not (tmp_path / "x.urdf").exists()


# -- the SavedModel ---------------------------------------------------------------------------

_FRESH = textwrap.dedent(
    """
    import json, sys
    sys.modules["lnn"] = None  # import lnn raises ImportError: TensorFlow alone must do
    sys.modules["simulations"] = None
    import numpy as np
    import tensorflow as tf
    out = {}
    for name in sys.argv[1:]:
        x = np.load(name + ".npz")
        model = tf.saved_model.load(name)
        tau = model.signatures["inverse_dynamics"](
            q=tf.constant(x["q"]), qd=tf.constant(x["qd"]), qdd=tf.constant(x["qdd"])
        )["tau"]
        qdd = model.signatures["acceleration"](q=tf.constant(x["q"]), qd=tf.constant(x["qd"]), tau=tau)["qdd"]
        mass = model.signatures["mass_matrix"](q=tf.constant(x["q"]))["M"]
        np.savez(name + ".out.npz", tau=tau.numpy(), qdd=qdd.numpy(), M=mass.numpy())
        out[name] = [tau.dtype.name, sorted(model.signatures)]
    print(json.dumps(out))
    """
)


def _perturbed(network, seed: int):
    """The network with every trainable weight moved (the residual and friction networks no longer near zero)."""
    rng = np.random.default_rng(seed)
    for weight in network.trainable_weights:
        value = np.asarray(weight)
        weight.assign((value + 0.3 * rng.standard_normal(value.shape)).astype(value.dtype))
    return network


@pytest.mark.slow
def test_the_savedmodel_gives_lnns_dynamics_in_a_process_without_lnn(tmp_path):
    """Rigid body (float64), rigid body + residual Lagrangian + learned friction (float32), ensemble mean;
    ``saved_model_cli show --all`` lists the signatures.

    Slow: a fresh Python that imports TensorFlow, and three models traced and saved.
    """
    arm = simulations.PlanarArm(masses=(1.0, 0.8), lengths=(0.6, 0.5))
    models = {
        "rigid": _identified(arm, 2, seed=0),
        "residual": _perturbed(
            lnn.LagrangianNetwork(
                2,
                kind="rigid-body",
                prior=arm,
                residual=True,
                friction="viscous+coulomb+joint_network",
                seed=1,
                xla=False,
            ),
            seed=1,
        ),
        "ensemble": lnn.Ensemble.from_members(
            [
                _perturbed(
                    lnn.LagrangianNetwork(
                        2,
                        kind="rigid-body",
                        prior=arm,
                        dtype="float64",
                        friction="viscous+joint_network",
                        seed=s,
                        xla=False,
                    ),
                    seed=s,
                )
                for s in (2, 3)
            ]
        ),
    }
    rng = np.random.default_rng(0)
    q, qd, qdd = rng.uniform(-2, 2, (3, 64, 2))
    expected = {}
    for name, model in models.items():
        dtype = model.numpy_dtype
        arrays = {"q": q.astype(dtype), "qd": qd.astype(dtype), "qdd": qdd.astype(dtype)}
        exported = model.export(tmp_path / name)
        assert exported.dtype == dtype.name and exported.n_dof == 2
        np.savez(tmp_path / f"{name}.npz", **arrays)
        tau = np.asarray(model.inverse_dynamics(*arrays.values()))
        mass = np.asarray(model.mass_matrix(arrays["q"]))
        expected[name] = (tau, mass, np.asarray(model.acceleration(arrays["q"], arrays["qd"], tau)))
    cli = Path(sys.executable).with_name("saved_model_cli")
    assert cli.exists(), f"TensorFlow's saved_model_cli is not beside {sys.executable}"
    # started now, it imports TensorFlow while the fresh Python below does (two processes, one wait)
    command = [str(cli), "show", "--dir", str(tmp_path / "rigid"), "--all"]
    showing = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    run = subprocess.run(
        [sys.executable, "-c", _FRESH, *models], cwd=tmp_path, env=env, capture_output=True, text=True, timeout=300
    )
    stdout, stderr = showing.communicate(timeout=300)
    assert run.returncode == 0, run.stderr[-2000:]
    seen = json.loads(run.stdout.strip().splitlines()[-1])
    for name, (tau, mass, qdd) in expected.items():
        out = np.load(tmp_path / f"{name}.out.npz")
        dtype, signatures = seen[name]
        assert dtype == models[name].numpy_dtype.name
        assert signatures == ["acceleration", "inverse_dynamics", "mass_matrix"]
        tol = 1e-10 if dtype == "float64" else 1e-6
        scale = np.abs(tau).max()
        assert np.abs(out["tau"] - tau).max() <= tol * scale, name
        assert np.abs(out["M"] - mass).max() <= tol * np.abs(mass).max(), name
        # the forward dynamics at the exported torques (an ensemble: the members' mean, not the mean's inverse)
        assert np.abs(out["qdd"] - qdd).max() <= (1e-9 if dtype == "float64" else 1e-4) * np.abs(qdd).max(), name
    assert showing.returncode == 0, stderr[-2000:]
    for name in ("inverse_dynamics", "acceleration", "mass_matrix"):
        assert f"signature_def['{name}']" in stdout


def test_the_savedmodel_signatures_have_a_free_batch_and_give_lnns_torques(tmp_path, monkeypatch):
    import tensorflow as tf

    from lnn.export import savedmodel

    network = lnn.LagrangianNetwork(3, hidden=(8,), seed=0)
    served = record_returns(monkeypatch, savedmodel, "_Served")  # the module export builds and saves
    exported = network.export(tmp_path / "m")
    assert exported.signatures == ("inverse_dynamics", "acceleration", "mass_matrix") and exported.members == 1
    # each signature traced once for the whole export (saving does not trace it again)
    assert {name: getattr(served[0], name).experimental_get_tracing_count() for name in exported.signatures} == {
        name: 1 for name in exported.signatures
    }
    with pytest.raises(FileExistsError, match=r"m exists; pass force=True \(--force\)"):
        network.export(tmp_path / "m")
    network.export(tmp_path / "m", force=True)
    loaded = tf.saved_model.load(str(tmp_path / "m"))
    spec = loaded.signatures["inverse_dynamics"].structured_input_signature[1]
    assert {k: (v.shape.as_list(), v.dtype.name) for k, v in spec.items()} == {
        k: ([None, 3], "float32") for k in ("q", "qd", "qdd")
    }
    rng = np.random.default_rng(0)
    for batch in (1, 5):
        q, qd, qdd = rng.uniform(-1, 1, (3, batch, 3)).astype(np.float32)
        assert loaded.signatures["mass_matrix"](q=tf.constant(q))["M"].shape == (batch, 3, 3)
        tau = loaded.signatures["inverse_dynamics"](q=tf.constant(q), qd=tf.constant(qd), qdd=tf.constant(qdd))["tau"]
        want = np.asarray(network.inverse_dynamics(q, qd, qdd))
        assert np.abs(tau.numpy() - want).max() <= 1e-6 * np.abs(want).max()
    # xla=True: the same functions marked jit_compile (XLA's float32 may reassociate: 1e-5 relative)
    network.export(tmp_path / "xla", xla=True)
    compiled = tf.saved_model.load(str(tmp_path / "xla")).signatures["inverse_dynamics"]
    tau = compiled(q=tf.constant(q), qd=tf.constant(qd), qdd=tf.constant(qdd))["tau"].numpy()
    assert np.abs(tau - want).max() <= 1e-5 * np.abs(want).max()


# -- the CLI ----------------------------------------------------------------------------------


def test_lnn_export_writes_a_savedmodel_and_a_urdf_and_says_what_is_wrong(tmp_path, capsys):
    pytest.importorskip("pinocchio")
    if not DFKI_URDF.is_file():
        pytest.skip("the shared DFKI data are not beside the repository")
    prior = simulations.URDFRobot.from_urdf(DFKI_URDF, missing_links="add")
    network = _identified(prior, 2, seed=0)
    network.save(tmp_path / "model.keras")
    lnn.LagrangianNetwork(2, kind="structured", hidden=(8,), seed=0).save(tmp_path / "plain.keras")
    model = str(tmp_path / "model.keras")

    def run(*argv):
        code = main(["export", *map(str, argv)])
        out, err = capsys.readouterr()
        return code, out, err

    code, out, err = run(
        model, "--savedmodel", tmp_path / "sm", "--urdf", tmp_path / "id.urdf", "--urdf-template", DFKI_URDF
    )
    assert code == 0, err
    assert "the inertias of Link1, Link2 from the model" in out and "armature (no URDF field" in out
    assert "signatures inverse_dynamics, acceleration, mass_matrix, q of shape (B, 2) float64" in out
    assert (tmp_path / "sm" / "saved_model.pb").is_file() and (tmp_path / "id.urdf").is_file()
    code, out, err = run(model, "--urdf", tmp_path / "id.urdf", "--urdf-template", DFKI_URDF)
    assert code == 2 and "refusing to overwrite existing file" in err and "pass --force" in err
    code, out, err = run(model, "--urdf", tmp_path / "id.urdf", "--urdf-template", DFKI_URDF, "--force")
    assert code == 0, err
    code, out, err = run(model)
    assert code == 2 and "nothing to write: pass --savedmodel DIR and/or --urdf FILE" in err
    code, out, err = run(model, "--urdf", tmp_path / "b.urdf")
    assert code == 2 and "needs --urdf-template" in err
    code, out, err = run(tmp_path / "plain.keras", "--urdf", tmp_path / "c.urdf", "--urdf-template", DFKI_URDF)
    assert code == 2 and "no rigid-body stage (kind 'structured'): there is no URDF to write" in err
    assert not (tmp_path / "c.urdf").exists()


def test_lnn_identify_write_urdf_needs_the_urdf_and_refuses_to_overwrite_before_any_work(tmp_path, capsys):
    arm = simulations.PlanarArm(masses=(1.0, 0.8), lengths=(0.6, 0.5))
    lnn.generate(arm, n_trajectories=2, duration=0.5, dt=0.05, seed=0).save(tmp_path / "d.npz")
    code = main(["identify", str(tmp_path / "d.npz"), "-o", str(tmp_path / "m.keras"), "--write-urdf", "x.urdf"])
    assert code == 2 and "--write-urdf x.urdf needs --urdf" in capsys.readouterr().err
    (tmp_path / "x.urdf").write_text("mine")
    code = main(
        ["identify", str(tmp_path / "d.npz"), "-o", str(tmp_path / "m.keras"), "--urdf", str(tmp_path / "r.urdf")]
        + ["--write-urdf", str(tmp_path / "x.urdf")]
    )
    assert code == 2 and "refusing to overwrite existing file" in capsys.readouterr().err
    assert (tmp_path / "x.urdf").read_text() == "mine" and not (tmp_path / "m.keras").exists()


@pytest.mark.slow
@pytest.mark.robots
@needs_dfki
def test_lnn_identify_write_urdf_and_the_identified_ensemble_export(tmp_path, capsys, monkeypatch):
    """End to end: ``lnn identify --urdf --write-urdf --ensemble 2`` on planted DFKI data, and the identified
    ensemble exported: the SavedModel's torques are the ensemble mean's, its URDF the mean of the members' bodies.
    (One identification: the verb's, whose model is taken from its call of ``lnn.identify``.)"""
    from lnn import identification

    runs = record_returns(monkeypatch, identification, "identify")  # the models the verb's lnn.identify returns
    truth = simulations.URDFRobot.from_urdf(_planted_dfki(tmp_path), missing_links="add")
    data = lnn.excitation_trajectories(truth, n_trajectories=6, duration=4.0, dt=0.005, seed=0)
    data = lnn.Dataset(t=data.t, q=data.q, qd=data.qd, qdd=data.qdd, tau=data.tau, trajectory=data.trajectory)
    data.save(tmp_path / "d.npz")
    argv = ["identify", str(tmp_path / "d.npz"), "-o", str(tmp_path / "m.keras"), "--urdf", str(DFKI_URDF)]
    argv += ["--add-missing-links", "--joints", "Joint1,Joint2", "--offsets", "none"]
    # a learned stage (the ensemble's candidates), of K members; a fixed amount of work (epochs, not a wall-time
    # budget): the stages trained do not depend on the load
    argv += ["--friction", "viscous+coulomb+joint_network", "--residual-lagrangian", "no", "--ensemble", "2"]
    code = main(argv + ["--epochs", "2", "--write-urdf", str(tmp_path / "id.urdf")])
    out, err = capsys.readouterr()
    assert code == 0, err
    assert f"wrote {tmp_path / 'id.urdf'}: the inertias of Link1, Link2 from stage" in out
    written = simulations.URDFRobot.from_urdf(tmp_path / "id.urdf", missing_links="add")
    q, qd = _states(2, 200, seed=5)
    want = truth.inverse_dynamics(q, qd, np.zeros_like(q))  # the rigid bodies' bias forces
    np.testing.assert_allclose(written.inverse_dynamics(q, qd, np.zeros_like(q)), want, atol=2e-2 * np.abs(want).max())

    (model,) = runs
    assert len(getattr(model.network, "members", ())) == 2, model.report.format()
    exported = model.export(tmp_path / "ensemble")
    assert exported.members == 2 and exported.dtype == "float64"
    import tensorflow as tf

    signature = tf.saved_model.load(str(tmp_path / "ensemble")).signatures["inverse_dynamics"]
    qdd = np.random.default_rng(6).normal(size=q.shape)
    tau = signature(q=tf.constant(q), qd=tf.constant(qd), qdd=tf.constant(qdd))["tau"].numpy()
    expected = np.asarray(model.network.inverse_dynamics(q, qd, qdd))
    assert np.abs(tau - expected).max() <= 1e-10 * np.abs(expected).max()
    report = model.to_urdf(tmp_path / "ensemble.urdf", template=DFKI_URDF)
    assert any("ensemble's spread" in part for part in report.not_carried)
