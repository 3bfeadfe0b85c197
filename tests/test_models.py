"""lnn.LagrangianNetwork: closed forms against autodiff and finite differences (float64)."""

from __future__ import annotations

import subprocess
import sys
import textwrap
import zipfile

import numpy as np
import pytest
import tensorflow as tf

import lnn
from lnn import _runtime, mechanics
from lnn.models import LagrangianNetwork, load_model
from lnn.models.activations import ACTIVATIONS

ANGULAR = (True, False, True)


def _model(kind="kinetic-potential", *, n=3, angular=ANGULAR, hidden=(12, 10), seed=3, **kw):
    kw.setdefault("xla", False)  # XLA compiles once per batch size: tested apart, below
    model = LagrangianNetwork(n, kind=kind, hidden=hidden, angular=angular, dtype="float64", seed=seed, **kw)
    rng = np.random.default_rng(seed)
    # Non-trivial input scaling, so that the tests cover it.
    model.adapt(rng.normal(0.4, 2.0, (50, n)), rng.normal(0.0, 3.0, (50, n)))
    return model


def _states(n=3, batch=6, seed=0):
    rng = np.random.default_rng(seed)
    return rng.normal(0, 1.5, (batch, n)), rng.normal(0, 1.0, (batch, n)), rng.normal(0, 1.0, (batch, n))


def _positive_definite(kind, **kw):
    """A model whose M is positive definite at the test states (regularise otherwise)."""
    return kind in ("structured",) or kw.get("convex", False)


CASES = [
    dict(kind="kinetic-potential", activation="swish", angular=(False, False, False)),
    dict(kind="kinetic-potential", convex=True, damping=True),
    dict(kind="black-box", activation="tanh", angular=(True, True, True)),
    dict(kind="structured", damping=True),
]


@pytest.mark.parametrize("name", sorted(ACTIVATIONS))
def test_activation_derivatives_match_autodiff(name):
    """The table's TensorFlow slope and curvature are the autodiff derivatives of its value."""
    z = tf.constant(np.linspace(-6.0, 6.0, 41))
    act = ACTIVATIONS[name]
    with tf.GradientTape() as outer:
        outer.watch(z)
        with tf.GradientTape() as inner:
            inner.watch(z)
            y = act.value(z)
        d1 = inner.gradient(y, z)
    d2 = outer.gradient(d1, z)
    value, slope, curvature = act.tf(z)
    np.testing.assert_allclose(value.numpy(), y.numpy(), rtol=1e-15, atol=1e-15)
    np.testing.assert_allclose(slope.numpy(), d1.numpy(), rtol=1e-12, atol=1e-14)
    np.testing.assert_allclose(curvature.numpy(), d2.numpy(), rtol=1e-10, atol=1e-14)


@pytest.mark.parametrize("name", sorted(ACTIVATIONS))
def test_numpy_and_tensorflow_activations_agree_and_skip_what_is_not_asked(name):
    """One table, two backends: the numpy forms equal the TensorFlow ones, with or without s and s''."""
    z = np.concatenate([np.linspace(-40.0, 40.0, 81), [-1e-300, 0.0, 1e-300]])
    reference = [t.numpy() for t in ACTIVATIONS[name].tf(tf.constant(z))]
    for value in (True, False):
        for curvature in (True, False):
            out = ACTIVATIONS[name].np(z.copy(), value, curvature)
            expected = [reference[0] if value else None, reference[1], reference[2] if curvature else None]
            for got, want in zip(out, expected):
                if want is None:
                    continue  # skipped parts may be computed anyway (tanh, sigmoid, swish)
                np.testing.assert_allclose(got, want, rtol=1e-13, atol=1e-14)
            if name == "softplus":
                assert (out[0] is None) == (not value) and (out[2] is None) == (not curvature)


@pytest.mark.parametrize("xla", [False, True])
def test_public_calls_under_a_tape_give_weight_gradients(xla):
    # The compiled calls skip TensorFlow's call path only when no tape records.
    # Batch 5: under XLA the call is padded to 6 rows (lnn.models.compiled), and the
    # gradients must still reach the 5 inputs and the weights.
    from lnn.models import compiled as compiled_ops

    model = _model("kinetic-potential", hidden=(6, 5), convex=True, xla=xla)
    q, qd, _ = (tf.constant(a) for a in _states(batch=5, seed=3))
    for _ in range(compiled_ops.XLA_AFTER_CALLS):  # the size recurs: its XLA form is compiled
        model.mass_matrix(q.numpy(), qd.numpy()), model.acceleration(q.numpy(), qd.numpy())
    compiled_ops.wait()
    assert bool(model.compiled_ops()[("mass_matrix", None)].ready) == xla
    with tf.GradientTape(persistent=True) as tape:
        tape.watch(q)
        compiled = {
            "M": tf.reduce_sum(model.mass_matrix(q, qd) ** 2),
            "qdd": tf.reduce_sum(model.acceleration(q, qd) ** 2),
        }
        graph = {
            "M": tf.reduce_sum(_eager(model._mass_matrix_graph, q, qd) ** 2),
            "qdd": tf.reduce_sum(_eager(model._acceleration_graph, q, qd) ** 2),
        }
    for key in compiled:
        np.testing.assert_allclose(compiled[key].numpy(), graph[key].numpy(), rtol=1e-10)
        np.testing.assert_allclose(
            tape.gradient(compiled[key], q).numpy(), tape.gradient(graph[key], q).numpy(), rtol=1e-9, atol=1e-12
        )
        got = tape.gradient(compiled[key], model.trainable_variables)
        want = tape.gradient(graph[key], model.trainable_variables)
        assert sum(g is not None for g in got) == sum(w is not None for w in want) > 0
        for g, w in zip(got, want):
            if w is not None:
                np.testing.assert_allclose(np.asarray(g), np.asarray(w), rtol=1e-9, atol=1e-12)


def test_numpy_inputs_under_a_tape_give_weight_gradients_with_xla_padding():
    # Numpy inputs take the packed hot path; batch 5 runs padded to 6 rows under XLA,
    # and the cut outputs must stay on the tape that watches the weights.
    from lnn.models import compiled as compiled_ops

    model = _model("kinetic-potential", hidden=(6, 5), convex=True, xla=True)
    q, qd, tau = _states(batch=5, seed=5)
    for _ in range(compiled_ops.XLA_AFTER_CALLS):  # the size recurs: its XLA forms are compiled
        model.acceleration(q, qd, tau), model.inverse_dynamics(q, qd, tau)
    compiled_ops.wait()
    ready = {op[0]: bool(fn.ready) for op, fn in model.compiled_ops().items()}
    assert ready.get("acceleration") and ready.get("inverse_dynamics"), ready  # XLA is reached, not graph mode
    for call, graph in (
        (lambda: model.acceleration(q, qd, tau), lambda: _eager(model._acceleration_graph, q, qd, tau)),
        (lambda: model.inverse_dynamics(q, qd, tau), lambda: _eager(model._inverse_dynamics_graph, q, qd, tau)),
    ):
        with tf.GradientTape(persistent=True) as tape:
            compiled, plain = tf.reduce_sum(call() ** 2), tf.reduce_sum(graph() ** 2)
        np.testing.assert_allclose(compiled.numpy(), plain.numpy(), rtol=1e-10)
        got = tape.gradient(compiled, model.trainable_variables)
        want = tape.gradient(plain, model.trainable_variables)
        assert sum(g is not None for g in got) == sum(w is not None for w in want) > 0
        for g, w in zip(got, want):
            if w is not None:
                np.testing.assert_allclose(np.asarray(g), np.asarray(w), rtol=1e-9, atol=1e-12)
    assert call().shape == (5, 3)  # and without a tape, cut in numpy


def _eager(body, *args):
    """A mechanics graph body run eagerly on float64 tensors (no tracing: fast tests)."""
    return body(*[tf.constant(a) if isinstance(a, np.ndarray) else a for a in args])


@pytest.mark.parametrize("case", CASES, ids=lambda c: "-".join(f"{v}" for v in c.values()))
def test_closed_form_matches_nested_tapes(case):
    case = dict(case)
    model = _model(case.pop("kind"), **case)
    q, qd, tau = _states()
    reg = None if _positive_definite(model.kind, convex=model.convex) else 50.0
    lag = model._lagrangian
    m = model.mass_matrix(q, qd).numpy()
    m_ref = _eager(lambda a, b: mechanics._mass_matrix_body(model._kinetic, a, b, "reverse"), q, qd)
    np.testing.assert_allclose(m, m_ref.numpy(), rtol=1e-10, atol=1e-12)
    np.testing.assert_allclose(m, np.swapaxes(m, 1, 2), atol=1e-14)
    # Same mass matrix from the Lagrangian (V does not depend on qd).
    m_lag = _eager(lambda a, b: mechanics._mass_matrix_body(lag, a, b, "reverse"), q, qd)
    np.testing.assert_allclose(m_lag.numpy(), m, rtol=1e-10, atol=1e-12)
    force = tau - qd @ model.damping_matrix().numpy().T
    qdd = model.acceleration(q, qd, tau, regularize=reg).numpy()
    qdd_ref = _eager(lambda a, b, c: mechanics._acceleration_body(lag, a, b, c, "reverse", reg), q, qd, force)
    np.testing.assert_allclose(qdd, qdd_ref.numpy(), rtol=1e-9, atol=1e-11)
    tau_back = model.inverse_dynamics(q, qd, qdd).numpy()
    tau_ref = _eager(lambda a, b, c: mechanics._inverse_dynamics_body(lag, a, b, c), q, qd, qdd)
    np.testing.assert_allclose(tau_back, tau_ref.numpy() + (tau - force), rtol=1e-9, atol=1e-11)
    if reg is None:
        np.testing.assert_allclose(tau_back, tau, atol=1e-9)
    e_ref = _eager(lambda a, b: mechanics._energy_body(lag, a, b), q, qd)
    np.testing.assert_allclose(model.energy(q, qd).numpy(), e_ref.numpy(), rtol=1e-10, atol=1e-12)
    np.testing.assert_allclose(
        model.lagrangian(q, qd).numpy(),
        (model.kinetic_energy(q, qd) - model.potential_energy(q)).numpy(),
        rtol=1e-12,
        atol=1e-12,
    )


def test_mass_matrix_matches_central_differences_of_kinetic_energy():
    model = _model("kinetic-potential", hidden=(16, 16))
    q, qd, _ = _states(batch=4, seed=5)
    h = 1e-4
    n = 3
    eye = np.eye(n)

    def t(v):
        return model.kinetic_energy(q, v).numpy()

    fd = np.empty((4, n, n))
    for i in range(n):
        for j in range(n):
            fd[:, i, j] = (
                t(qd + h * eye[i] + h * eye[j])
                - t(qd + h * eye[i] - h * eye[j])
                - t(qd - h * eye[i] + h * eye[j])
                + t(qd - h * eye[i] - h * eye[j])
            ) / (4 * h * h)
    np.testing.assert_allclose(model.mass_matrix(q, qd).numpy(), fd, rtol=1e-5, atol=1e-7)


@pytest.mark.parametrize("kind", ["kinetic-potential", "black-box"])
def test_acceleration_satisfies_euler_lagrange_by_finite_differences(kind):
    """d/dt (dL/dqd) - dL/dq = tau along (qd, qdd), all derivatives by central differences."""
    model = _model(kind, hidden=(16, 16))
    q, qd, tau = _states(batch=4, seed=6)
    qdd = model.acceleration(q, qd, tau, regularize=50.0).numpy()
    # The regularised solve satisfies (M + 50 I) qdd = rhs: move 50 qdd to the force side.
    forcing = tau - 50.0 * qdd
    n, h1, h2 = 3, 1e-5, 1e-4
    eye = np.eye(n)

    def lag(a, b):
        return model.lagrangian(a, b).numpy()

    def momentum(a, b):
        return np.stack([(lag(a, b + h1 * e) - lag(a, b - h1 * e)) / (2 * h1) for e in eye], -1)

    grad_q = np.stack([(lag(q + h1 * e, qd) - lag(q - h1 * e, qd)) / (2 * h1) for e in eye], -1)
    dp_dt = (momentum(q + h2 * qd, qd + h2 * qdd) - momentum(q - h2 * qd, qd - h2 * qdd)) / (2 * h2)
    np.testing.assert_allclose(dp_dt - grad_q, forcing, rtol=1e-5, atol=1e-5)


def test_structured_hessian_path_returns_constructed_mass_matrix():
    model = _model("structured", hidden=(16,))
    q, qd, _ = _states(batch=8, seed=2)
    m = model.mass_matrix(q).numpy()  # q only
    np.testing.assert_allclose(model.mass_matrix(q, qd).numpy(), m, rtol=0, atol=0)
    for method in ("reverse", "forward-over-reverse"):
        hess = mechanics.mass_matrix(model.kinetic_energy, q, qd, method=method).numpy()
        np.testing.assert_allclose(hess, m, rtol=1e-12, atol=1e-12)
    health = model.mass_matrix_health(q)
    assert health.positive_definite and health.min_eigenvalue >= model.epsilon * (1 - 1e-9)


@pytest.mark.parametrize("kind", ["kinetic-potential", "black-box"])
def test_convex_initialisation_gives_positive_definite_mass_matrices(kind):
    model = _model(kind, hidden=(32, 32), convex_init=True)
    rng = np.random.default_rng(4)
    health = model.mass_matrix_health(rng.normal(0, 3, (512, 3)), rng.normal(0, 5, (512, 3)))
    assert health.fraction_not_positive_definite == 0.0
    assert not model.convex  # only initialised convex: the weights train unconstrained
    net = model.kinetic_net if kind == "kinetic-potential" else model.lagrangian_net
    assert all(np.min(np.asarray(k)) >= 0 for k in net._raw_kernels)
    assert _model(kind, hidden=(32, 32)).get_config()["convex_init"] is True  # the default
    plain = _model(kind, hidden=(32, 32), convex_init=False)
    assert plain.get_config()["convex_init"] is False
    assert _model(kind, hidden=(32, 32), activation="tanh").get_config()["convex_init"] is False


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_convex_kinetic_network_has_positive_definite_hessian(seed):
    model = _model("kinetic-potential", convex=True, hidden=(32, 32), seed=seed, epsilon=1e-3)
    rng = np.random.default_rng(seed)
    q, qd = rng.normal(0, 3, (256, 3)), rng.normal(0, 5, (256, 3))
    # Random, large weights: convexity must not depend on the initialisation.
    for w in model.kinetic_net.trainable_weights:
        w.assign(rng.normal(0, 2.0, w.shape))
    health = model.mass_matrix_health(q, qd)
    assert health.fraction_not_positive_definite == 0.0
    assert health.min_eigenvalue >= 1e-3 * (1 - 1e-6)
    plain = _model("kinetic-potential", hidden=(32, 32), seed=seed)
    for w in plain.kinetic_net.trainable_weights:
        w.assign(rng.normal(0, 2.0, w.shape))
    # Without the constraint the same kind of network is indefinite somewhere.
    assert plain.mass_matrix_health(q, qd).fraction_not_positive_definite > 0


def test_gradient_of_acceleration_loss_wrt_weights_matches_finite_differences():
    model = _model("kinetic-potential", convex=True, hidden=(6, 5), damping=True)
    q, qd, tau = (tf.constant(a) for a in _states(batch=5, seed=9))
    target = tf.constant(np.random.default_rng(1).normal(size=(5, 3)))
    net = model.kinetic_net

    def loss_with(attr, index=None):
        original = getattr(net, attr)

        def loss(x):
            if index is None:
                object.__setattr__(net, attr, x)
            else:
                patched = list(original)
                patched[index] = x
                object.__setattr__(net, attr, patched)
            try:
                qdd = model((q, qd, tau))
                return tf.reduce_mean((qdd - target) ** 2)
            finally:
                object.__setattr__(net, attr, original)

        return loss, tf.convert_to_tensor(original if index is None else original[index])

    for attr, index in (("w_v", None), ("w_x", None), ("_raw_kernels", 0), ("_raw_kernels", 1), ("_biases", 0)):
        loss, x0 = loss_with(attr, index)
        theoretical, numerical = tf.test.compute_gradient(loss, [x0], delta=1e-6)
        np.testing.assert_allclose(theoretical[0], numerical[0], rtol=1e-5, atol=1e-7 * np.abs(numerical[0]).max())
    # And the whole weight list through a tape, as a training step sees it.
    with tf.GradientTape() as tape:
        loss = tf.reduce_mean((model((q, qd, tau)) - target) ** 2)
    grads = tape.gradient(loss, model.trainable_variables)
    assert all(g is not None and np.all(np.isfinite(g)) for g in grads)
    assert len(grads) == len(model.trainable_variables) > 0


def test_tracing_count_stays_one_across_batch_sizes():
    model = _model("kinetic-potential", convex=True)
    rng = np.random.default_rng(0)
    for batch in (1, 7, 1024, 1):
        q, qd = rng.normal(size=(batch, 3)), rng.normal(size=(batch, 3))
        model.mass_matrix(q, qd)
        model.acceleration(q, qd)
        model.acceleration(q, qd, rng.normal(size=(batch, 3)))
        model.energy(q, qd)
    for op in ("mass_matrix", "acceleration", "acceleration_free", "energy"):
        assert model.tracing_count(op) == 1, op
    assert model.tracing_count("inverse_dynamics") == 0


@pytest.mark.parametrize("kind, dtype", [("kinetic-potential", "float32"), ("structured", "float64")])
def test_save_load_round_trip_is_bit_identical(tmp_path, kind, dtype):
    model = LagrangianNetwork(
        2,
        kind=kind,
        hidden=(8, 8),
        angular=(True, False),
        damping=True,
        dtype=dtype,
        seed=11,
        convex=(kind == "kinetic-potential"),
        xla=False,
    )
    rng = np.random.default_rng(0)
    model.adapt(rng.normal(1.0, 2.0, (40, 2)), rng.normal(0.0, 3.0, (40, 2)), rng.normal(0.0, 5.0, (40, 2)))
    q, qd, tau = _states(n=2, batch=9)
    path = tmp_path / "model.keras"
    model.save(path)
    loaded = lnn.load_model(path)
    assert isinstance(loaded, LagrangianNetwork)
    assert (loaded.n_dof, loaded.kind, loaded.angular, loaded.dtype, loaded.damping) == (
        2,
        kind,
        (True, False),
        dtype,
        True,
    )
    assert loaded.get_config() == model.get_config()
    for a, b in zip(model.weights, loaded.weights):
        assert np.array_equal(np.asarray(a), np.asarray(b))
    for name in ("energy", "mass_matrix"):
        assert np.array_equal(getattr(model, name)(q, qd).numpy(), getattr(loaded, name)(q, qd).numpy())
    assert np.array_equal(
        model.acceleration(q, qd, tau, regularize=10.0).numpy(),
        loaded.acceleration(q, qd, tau, regularize=10.0).numpy(),
    )


def test_load_model_errors(tmp_path):
    with pytest.raises(FileNotFoundError, match="no such model file"):
        load_model(tmp_path / "missing.keras")
    text = tmp_path / "notes.keras"
    text.write_text("not a model")
    with pytest.raises(ValueError, match="not a Keras"):
        load_model(text)
    foreign = tmp_path / "foreign.keras"
    with zipfile.ZipFile(foreign, "w") as archive:
        archive.writestr("config.json", '{"class_name": "Nothing"}')
    with pytest.raises(ValueError, match="cannot load"):
        load_model(foreign)


def test_bad_inputs_raise_clearly():
    model = _model("kinetic-potential")
    q, qd, _ = _states()
    with pytest.raises(ValueError, match="n_dof = 3 columns"):
        model.acceleration(q[:, :2], qd[:, :2])
    with pytest.raises(ValueError, match="batch size 5 but q has batch size 6"):
        model.mass_matrix(q, qd[:5])
    with pytest.raises(ValueError, match="tau contains NaN"):
        model.acceleration(q, qd, np.full_like(q, np.nan))
    with pytest.raises(ValueError, match="q contains NaN"):
        model.energy(np.where(q > 1, np.nan, q), qd)
    # An unconstrained T with random weights is indefinite somewhere: reported, not hidden.
    rng = np.random.default_rng(0)
    for w in model.kinetic_net.trainable_weights:
        w.assign(rng.normal(0, 1.0, w.shape))
    q_many, qd_many = rng.normal(0, 3, (512, 3)), rng.normal(0, 3, (512, 3))
    health = model.mass_matrix_health(q_many, qd_many)
    assert health.fraction_not_positive_definite > 0
    with pytest.raises(mechanics.MassMatrixError, match=r"not positive definite for \d+ of 512"):
        model.acceleration(q_many, qd_many)
    with pytest.raises(ValueError, match="inputs must be a tuple"):
        model(tf.constant(q))


@pytest.mark.parametrize(
    "kwargs, error, message",
    [
        (dict(n_dof=0), ValueError, "n_dof must be a positive integer"),
        (dict(n_dof=2, kind="hamiltonian"), ValueError, "kind must be one of"),
        (dict(n_dof=2, activation="relu"), ValueError, "activation must be one of"),
        (dict(n_dof=2, angular=(True,)), ValueError, "angular must have n_dof = 2"),
        (dict(n_dof=2, angular=1.5), TypeError, "angular must be a bool or 2 bools, got 1.5"),
        (dict(n_dof=2, convex=True, kind="black-box"), ValueError, "convex=True applies"),
        (dict(n_dof=2, kind="kinetic-potential", convex=True, activation="tanh"), ValueError, "softplus"),
        (dict(n_dof=2, convex_init=True, activation="swish"), ValueError, "convex_init=True needs"),
        (dict(n_dof=2, hidden=()), ValueError, "hidden must be a non-empty"),
        (dict(n_dof=2, hidden=64), TypeError, "hidden must be a tuple"),
        (dict(n_dof=2, dtype="float16"), ValueError, "dtype must be"),
    ],
)
def test_bad_constructor_arguments(kwargs, error, message):
    with pytest.raises(error, match=message):
        LagrangianNetwork(kwargs.pop("n_dof"), **kwargs)


def test_one_bool_marks_every_coordinate_angular():
    assert LagrangianNetwork(3, kind="kinetic-potential", angular=True).angular == (True, True, True)
    assert LagrangianNetwork(2, kind="kinetic-potential", angular=False).angular == (False, False)


def test_angular_coordinates_are_periodic_and_adapt_scales_the_rest():
    model = _model("black-box")
    q, qd, _ = _states()
    shift = np.array([2 * np.pi, 0.0, -4 * np.pi])
    np.testing.assert_allclose(model.lagrangian(q + shift, qd).numpy(), model.lagrangian(q, qd).numpy(), rtol=1e-12)
    assert not np.allclose(model.lagrangian(q + 2 * np.pi, qd).numpy(), model.lagrangian(q, qd).numpy())
    np.testing.assert_array_equal(np.asarray(model.q_mean)[[0, 2]], 0.0)
    np.testing.assert_array_equal(np.asarray(model.q_std)[[0, 2]], 1.0)
    # The linear coordinate: exactly the mean and spread of the samples _model adapted to (a wrong
    # statistic, or none at all, 0 and 1, fails: the samples' mean is 0.61, their spread 2.2).
    rng = np.random.default_rng(3)
    q_adapted, qd_adapted = rng.normal(0.4, 2.0, (50, 3)), rng.normal(0.0, 3.0, (50, 3))
    np.testing.assert_allclose(np.asarray(model.q_mean)[1], q_adapted[:, 1].mean(), rtol=1e-12)
    np.testing.assert_allclose(np.asarray(model.q_std)[1], q_adapted[:, 1].std(), rtol=1e-12)
    np.testing.assert_allclose(np.asarray(model.qd_std), np.sqrt(np.mean(qd_adapted**2, axis=0)), rtol=1e-12)


def test_mlp_layers_and_feature_map_reimplement_the_model_in_numpy():
    model = _model("kinetic-potential", convex=True, hidden=(7, 5))
    q, qd, _ = _states()
    fmap = model.feature_map()
    x = q @ fmap.A + np.sin(q) @ fmap.B_sin + np.cos(q) @ fmap.B_cos + fmap.c
    layers = model.mlp_layers()

    def run(net_layers, inputs):
        h = inputs
        for layer in net_layers:
            z = h @ layer.kernel + layer.bias
            h = {"softplus": np.logaddexp(0.0, z), "linear": z}[layer.activation]
        return h[:, 0]

    t = run(layers["kinetic"], np.concatenate([x, qd / fmap.qd_scale], axis=1))
    t += 0.5 * model.epsilon * np.sum(qd**2, axis=1)
    v = run(layers["potential"], x)
    np.testing.assert_allclose(model.lagrangian(q, qd).numpy(), t - v, rtol=1e-12)
    # The gauge T(q, 0) = 0: the kinetic network's value at rest moves from T to V.
    t_rest = run(layers["kinetic"], np.concatenate([x, np.zeros_like(qd)], axis=1))
    np.testing.assert_allclose(model.kinetic_energy(q, qd).numpy(), t - t_rest, rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose(model.potential_energy(q).numpy(), v - t_rest, rtol=1e-12, atol=1e-12)
    assert all(np.all(layer.kernel >= 0) for layer in layers["kinetic"][1:])


def test_single_states_dtypes_and_numpy_path():
    model = LagrangianNetwork(
        2, kind="kinetic-potential", hidden=(8,), convex=True, seed=0, xla=False
    )  # float32 default
    q, qd = np.array([0.3, -0.2]), np.array([0.5, 1.0])
    qdd = model.acceleration(q, qd)
    assert qdd.shape == (2,) and qdd.dtype == tf.float32
    assert model.mass_matrix(q, qd).shape == (2, 2)
    assert model.energy(q, qd).shape == ()
    assert model((tf.constant(q[None]), tf.constant(qd[None]))).dtype == tf.float32


def test_damping_dissipates_and_power_balances():
    model = _model("structured", damping=True, hidden=(8,))
    q, qd, tau = _states(batch=16, seed=4)
    d = model.damping_matrix().numpy()
    assert np.all(np.linalg.eigvalsh(d) > 0)
    free = model.power_balance(q, qd)
    assert np.all(free.input_power < 0)  # -qd . D qd
    np.testing.assert_allclose(free.residual, 0.0, atol=1e-10)
    driven = model.power_balance(q, qd, tau)
    np.testing.assert_allclose(driven.energy_rate, driven.input_power, atol=1e-10)


_XLA_SCRIPT = textwrap.dedent("""
    import numpy as np
    from lnn import LagrangianNetwork
    from lnn.models import compiled
    rng = np.random.default_rng(0)
    q, qd, tau = rng.normal(size=(3, 7, 3))
    cases = [dict(kind="kinetic-potential", convex=True, damping=True),
             dict(kind="structured", damping=True)]
    for kw in cases:
        pair = [LagrangianNetwork(3, hidden=(8, 8), angular=(True, False, True), dtype="float64",
                                  seed=2, xla=xla, **kw) for xla in (True, False)]
        # Batches 5 and 7 run padded to 6 and 8 rows under XLA (lnn.models.compiled), once
        # the size has recurred and its XLA form is compiled (compiled.wait()).
        for rows in (5, 1, 7):
            for call in (lambda m: m.mass_matrix(q[:rows], qd[:rows]),
                         lambda m: m.acceleration(q[:rows], qd[:rows], tau[:rows]),
                         lambda m: m.inverse_dynamics(q[:rows], qd[:rows], tau[:rows])):
                for _ in range(compiled.XLA_AFTER_CALLS):
                    call(pair[0])
                compiled.wait()
                a, b = (call(m).numpy() for m in pair)
                assert a.shape[0] == rows, a.shape
                assert np.allclose(a, b, rtol=1e-9, atol=1e-11), (kw, np.abs(a - b).max())
        assert pair[0].tracing_count("mass_matrix") == 1
        assert pair[0].compiled_ops()[("mass_matrix", None)].ready == {1, 6, 8}
    from lnn import _runtime
    print("public" if _runtime.PUBLIC_ONLY else "private", "ok")
""")


def test_xla_path_in_a_fresh_process():
    """The default XLA path equals the plain graph (fresh process: XLA gradient registry pitfall)."""
    result = subprocess.run([sys.executable, "-c", _XLA_SCRIPT], capture_output=True, text=True, timeout=300)
    assert result.returncode == 0, result.stderr[-3000:]
    # The child inherits LNN_PUBLIC_TF, so CI's second pass checks the public paths here too.
    assert result.stdout.strip().endswith(("public" if _runtime.PUBLIC_ONLY else "private") + " ok")


@pytest.mark.parametrize("n, width", [(2, 8), (7, 32), (7, 128)])
def test_weighted_gram_equals_the_batched_matmul_under_xla(n, width):
    """Both forms of K diag(c) K^T (the fused sum under XLA for small n*n*H, else matmul)."""
    import tensorflow as tf

    from lnn.models.mlp import weighted_gram

    rng = np.random.default_rng(n)
    k = tf.constant(rng.normal(size=(5, n, width)))
    c = tf.constant(rng.normal(size=(5, width)))
    reference = np.einsum("bih,bh,bjh->bij", k.numpy(), c.numpy(), k.numpy())
    for jit in (False, True):
        body = _runtime.xla_body(weighted_gram) if jit else weighted_gram
        out = tf.function(body, jit_compile=jit, autograph=False)(k, c).numpy()
        np.testing.assert_allclose(out, reference, rtol=1e-12, atol=1e-12)


def test_a_refused_cholesky_of_a_large_model_names_the_samples_and_nothing_else_is_retried(monkeypatch):
    """n > 12 solves with TensorFlow's Cholesky, which raises on an indefinite M instead of returning NaN."""
    n = mechanics.UNROLLED_CHOLESKY_MAX_N + 1
    model = _model("kinetic-potential", n=n, angular=False, hidden=(8, 8))
    rng = np.random.default_rng(0)
    for w in model.kinetic_net.trainable_weights:  # an unconstrained T with random weights: indefinite somewhere
        w.assign(rng.normal(0, 1.0, w.shape))
    q, qd = rng.normal(0, 3, (64, n)), rng.normal(0, 3, (64, n))
    bad = int(round(64 * model.mass_matrix_health(q, qd).fraction_not_positive_definite))
    assert bad > 0
    with pytest.raises(mechanics.MassMatrixError, match=rf"not positive definite for {bad} of 64 samples"):
        model.acceleration(q, qd)

    # Any other failure of the compiled call is raised as it is, not run a second time.
    calls = []

    def failing_once(op, regularize=None):
        def call(x):
            calls.append(op)
            if len(calls) == 1:
                raise tf.errors.InvalidArgumentError(None, None, "an unrelated failure")
            return real(op, regularize)(x)

        return call

    real = model._compiled_op
    monkeypatch.setattr(model, "_compiled_op", failing_once)
    with pytest.raises(tf.errors.InvalidArgumentError, match="an unrelated failure"):
        model.acceleration(q[:2], qd[:2])
    assert calls == ["acceleration_free"]
