"""No compile stall on a new batch size; the private TensorFlow paths and their public fallbacks.

The compiled calls of a model run graph mode at once and get XLA only for a
padded batch size that recurs, compiled by a background thread
(:mod:`lnn.models.compiled`). These tests count compilations (no timing):
with the log the package keeps, and with XLA's own dumps in a fresh process.
"""

from __future__ import annotations

import glob
import json
import os
import subprocess
import sys
import textwrap
import warnings

import numpy as np
import pytest

import lnn
from lnn import _runtime
from lnn.mechanics import batch_bucket
from lnn.models import LagrangianNetwork, compiled

SIZES = (1, 7, 1024, 1, 13, 300)


def _calls(model, sizes=SIZES):
    rng = np.random.default_rng(0)
    q, qd = rng.normal(size=(max(sizes), 2)).astype("float32"), rng.normal(size=(max(sizes), 2)).astype("float32")
    out = []
    for b in sizes:
        out.append((model.acceleration(q[:b], qd[:b]).numpy(), model.mass_matrix(q[:b], qd[:b]).numpy()))
    return q, qd, out


def test_new_batch_sizes_compile_nothing_on_the_callers_path():
    """Sizes 1, 7, 1024, 1, 13, 300: only the recurring size 1 is compiled, in the background."""
    model = LagrangianNetwork(2, kind="kinetic-potential", angular=True, seed=0)  # the defaults: xla=True
    _calls(model)
    compiled.wait()
    for op in ("acceleration_free", "mass_matrix"):
        entry = model.compiled_ops()[(op, None)]
        assert [(c.rows, c.thread, c.ok) for c in entry.compilations] == [(1, "lnn-xla", True)], op
        assert entry.ready == {1}
        assert entry.calls == {batch_bucket(b): SIZES.count(b) for b in SIZES if b != 1} | {1: 2}
        assert model.tracing_count(op) == 1


def test_after_compilation_xla_and_graph_mode_agree():
    model = LagrangianNetwork(2, kind="kinetic-potential", angular=(True, False), seed=1, dtype="float64")
    q, qd, first = _calls(model, (5, 5))  # 5 rows recur: padded to 6, compiled
    compiled.wait()
    entry = model.compiled_ops()[("acceleration_free", None)]
    assert entry.ready == {6}
    qdd = model.acceleration(q[:5], qd[:5]).numpy()  # now XLA, padded and cut back
    np.testing.assert_allclose(qdd, first[0][0], rtol=1e-12, atol=1e-12)


def test_xla_calls_under_a_tape_give_the_graph_modes_gradients():
    import tensorflow as tf

    model = LagrangianNetwork(
        2, kind="kinetic-potential", angular=(True, False), seed=1, dtype="float64", hidden=(8, 8)
    )
    q, qd, _ = _calls(model, (5, 5))
    compiled.wait()
    grads = []
    for xla in (True, False):
        entry = model.compiled_ops()[("acceleration_free", None)]
        saved = set(entry.ready)
        if not xla:
            entry.ready.clear()
        with tf.GradientTape() as tape:
            loss = tf.reduce_sum(model.acceleration(q[:5].astype("float64"), qd[:5].astype("float64")) ** 2)
        grads.append([g.numpy() for g in tape.gradient(loss, model.trainable_variables)])
        entry.ready |= saved
    for a, b in zip(*grads):
        np.testing.assert_allclose(a, b, rtol=1e-10, atol=1e-12)


_DUMPS = textwrap.dedent("""
    import glob, json, os, sys
    import numpy as np
    from lnn.models import LagrangianNetwork, compiled
    rng = np.random.default_rng(0)
    model = LagrangianNetwork(2, angular=True, seed=0)
    q = rng.normal(size=(1024, 2)).astype("float32"); qd = rng.normal(size=(1024, 2)).astype("float32")
    from lnn import _runtime
    count = lambda: len(glob.glob(os.path.join(sys.argv[1], "*before_optimizations.txt")))
    base = count()  # the runtime's import compiles one trivial function where it picks XLA's emitters
    counts = []
    for b in (1, 7, 1024, 1, 13, 300):
        model.acceleration(q[:b], qd[:b]); model.mass_matrix(q[:b], qd[:b])
        compiled.wait()
        counts.append(count() - base)
    log = sum(len(op.compilations) for op in model.compiled_ops().values())
    print(json.dumps({"dumps": counts, "log": log, "base": base, "emitters": _runtime.XLA_CPU_EMITTERS,
                      "public": _runtime.PUBLIC_ONLY}))
""")


def test_xla_compiles_exactly_what_the_log_says(tmp_path):
    """XLA's own dumps (a fresh process) count the same compilations as the package's log."""
    env = dict(os.environ, XLA_FLAGS=f"--xla_dump_to={tmp_path}", TF_CPP_MIN_LOG_LEVEL="2")
    done = subprocess.run(
        [sys.executable, "-c", _DUMPS, str(tmp_path)], env=env, capture_output=True, text=True, timeout=300
    )
    assert done.returncode == 0, done.stderr[-2000:]
    out = json.loads(done.stdout.strip().splitlines()[-1])
    assert out["dumps"][:3] == [0, 0, 0]  # sizes 1, 7, 1024 seen once: nothing compiled
    assert out["dumps"][-1] == out["dumps"][3] > 0  # size 1 recurred: compiled once, then no more
    assert out["log"] == 2  # acceleration and mass matrix at the padded size 1
    assert out["base"] == (1 if out["emitters"] == "classic" else 0)
    assert out["public"] == _runtime.PUBLIC_ONLY  # the child inherits LNN_PUBLIC_TF (CI's second pass)


# -- the runtime module -----------------------------------------------------------------


def test_no_module_but_the_runtime_imports_tensorflow_internals():
    root = os.path.dirname(lnn.__file__)
    offenders = []
    for path in glob.glob(os.path.join(root, "**", "*.py"), recursive=True):
        if os.path.basename(path) == "_runtime.py":
            continue
        text = open(path, encoding="utf-8").read()
        for needle in (
            "tensorflow.python",
            "keras.src",
            "pywrap_tfe",
            "_flatten_layers",
            "summary_pb2",
            "_inference_function",
        ):
            if needle in text:
                offenders.append((os.path.relpath(path, root), needle))
    assert offenders == []


_PUBLIC = textwrap.dedent("""
    import json, warnings
    warnings.simplefilter("error", RuntimeWarning)
    import numpy as np
    from lnn import _runtime
    from lnn.models import LagrangianNetwork
    model = LagrangianNetwork(2, angular=(True, False), seed=1, dtype="float64", hidden=(8, 8))
    q = np.array([[0.1, 0.2], [0.3, -0.4]]); qd = np.array([[0.5, 0.0], [-1.0, 2.0]])
    out = {"public": _runtime.PUBLIC_ONLY, "tape": _runtime.tape_may_record(),
           "qdd": model.acceleration(q, qd).numpy().tolist(),
           "M": model.mass_matrix(q, qd).numpy().tolist()}
    op = model.compiled_ops()[("mass_matrix", None)]
    out["fast"] = op._graph is not op.graph_function.get_concrete_function()
    print(json.dumps(out))
""")


def _run_public(flag):
    env = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="2")
    env.pop("LNN_PUBLIC_TF", None)
    if flag:
        env["LNN_PUBLIC_TF"] = "1"
    done = subprocess.run([sys.executable, "-c", _PUBLIC], env=env, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-2000:]
    return json.loads(done.stdout.strip().splitlines()[-1])


@pytest.mark.skipif(_runtime.PUBLIC_ONLY, reason="sets LNN_PUBLIC_TF in its own subprocesses: the first pass ran it")
def test_public_only_mode_gives_the_same_results_without_the_private_paths():
    private, public = _run_public(False), _run_public(True)
    assert public["public"] and public["tape"] and not public["fast"]  # every fallback taken
    assert not private["public"] and not private["tape"] and private["fast"]
    np.testing.assert_allclose(public["qdd"], private["qdd"], rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose(public["M"], private["M"], rtol=1e-12, atol=1e-12)


_EMITTERS = textwrap.dedent("""
    import json, os, sys
    before = os.environ.get("XLA_FLAGS")
    from lnn import _runtime
    out = {"emitters": _runtime.XLA_CPU_EMITTERS, "unchanged": os.environ.get("XLA_FLAGS") == before}
    if sys.argv[1] == "solve":
        import numpy as np
        import simulations
        from lnn import rollout
        from lnn.models import LagrangianNetwork
        model = LagrangianNetwork(2, kind="kinetic-potential", convex=True, hidden=(16, 16),
                                  angular=(True, True), dtype="float64", seed=0)
        truth = simulations.DoublePendulum()
        s = truth.sample_state(4, rng=0)
        out["q"] = rollout(model, s.q, s.qd, np.linspace(0, 2, 21), method="dopri5").q.tolist()
    if sys.argv[1] == "read":  # XLA read its options at the import: a new XLA_FLAGS is not read again
        import tensorflow as tf
        os.environ["XLA_FLAGS"] = "--xla_no_such_flag=1"
        out["compiled"] = float(tf.function(lambda x: 2.0 * x, jit_compile=True)(tf.constant(3.0)))
    print(json.dumps(out))
""")


def _emitters(what="", **env):
    full = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="2")
    for name in ("LNN_PUBLIC_TF", "LNN_XLA_EMITTERS", "XLA_FLAGS"):
        full.pop(name, None)
    full.update(env)
    command = [sys.executable, "-c", _EMITTERS, what]
    done = subprocess.run(command, env=full, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-2000:]
    return json.loads(done.stdout.strip().splitlines()[-1])


@pytest.mark.skipif(_runtime.PUBLIC_ONLY, reason="sets LNN_PUBLIC_TF in its own subprocesses: the first pass ran it")
def test_xla_gets_its_classic_cpu_emitters_at_import_and_the_environment_is_left_as_it_was():
    """A fresh process: the import asks XLA for the classic emitters (where measured), XLA reads them then and
    never again, and XLA_FLAGS is left as it was. What each setting chooses is the next test's (in this process:
    the choice returns before XLA is touched, or sets and restores the flag around one compilation)."""
    measured = _runtime._release() in _runtime._CLASSIC_EMITTER_RELEASES
    out = _emitters("read" if measured else "")
    assert out["unchanged"] and out["emitters"] == ("classic" if measured else "default")
    if measured:
        assert out["compiled"] == 6.0  # the bogus flag set after the import was never parsed


def test_each_setting_chooses_its_emitters_and_leaves_xla_flags_as_it_was(monkeypatch):
    measured = _runtime._release() in _runtime._CLASSIC_EMITTER_RELEASES
    for name in ("LNN_XLA_EMITTERS", "XLA_FLAGS"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setattr(_runtime, "PUBLIC_ONLY", False)  # the same checks in CI's LNN_PUBLIC_TF=1 pass
    monkeypatch.setenv("XLA_FLAGS", "--xla_dump_hlo_as_text=true")  # the user's own XLA_FLAGS survive
    assert _runtime._choose_cpu_emitters() == ("classic" if measured else "default")
    assert os.environ["XLA_FLAGS"] == "--xla_dump_hlo_as_text=true"
    monkeypatch.setenv("LNN_XLA_EMITTERS", "classic")  # asked for: on every release
    assert _runtime._choose_cpu_emitters() == "classic"
    assert os.environ["XLA_FLAGS"] == "--xla_dump_hlo_as_text=true"
    monkeypatch.delenv("XLA_FLAGS")
    assert _runtime._choose_cpu_emitters() == "classic" and "XLA_FLAGS" not in os.environ
    monkeypatch.setenv("LNN_XLA_EMITTERS", "default")
    assert _runtime._choose_cpu_emitters() == "default" and "XLA_FLAGS" not in os.environ
    monkeypatch.delenv("LNN_XLA_EMITTERS")
    monkeypatch.setenv("XLA_FLAGS", "--xla_cpu_use_fusion_emitters=true")  # the user chose: left alone
    assert _runtime._choose_cpu_emitters() == "default"
    assert os.environ["XLA_FLAGS"] == "--xla_cpu_use_fusion_emitters=true"
    monkeypatch.delenv("XLA_FLAGS")
    monkeypatch.setattr(_runtime, "PUBLIC_ONLY", True)  # LNN_PUBLIC_TF=1: no private options either
    assert _runtime._choose_cpu_emitters() == "default" and "XLA_FLAGS" not in os.environ


@pytest.mark.skipif(_runtime.PUBLIC_ONLY, reason="sets LNN_PUBLIC_TF in its own subprocesses: the first pass ran it")
def test_the_classic_and_default_emitters_solve_alike():
    # Both are asked for explicitly (LNN_XLA_EMITTERS), which the runtime honours on every release: the test
    # runs on whatever TensorFlow is installed, not only on the releases where the classic ones are the default.
    classic, default = _emitters("solve", LNN_XLA_EMITTERS="classic"), _emitters("solve", LNN_XLA_EMITTERS="default")
    assert classic["emitters"] == "classic" and default["emitters"] == "default"
    np.testing.assert_allclose(classic["q"], default["q"], rtol=1e-9, atol=1e-9)


def test_a_bad_emitter_setting_is_refused_with_what_was_received(monkeypatch):
    monkeypatch.setenv("LNN_XLA_EMITTERS", "fast")
    with pytest.raises(ValueError, match=r"LNN_XLA_EMITTERS must be 'classic' or 'default', got 'fast'"):
        _runtime._choose_cpu_emitters()


def test_a_missing_internal_warns_once_and_falls_back(monkeypatch):
    monkeypatch.setattr(_runtime, "_WARNED", set())
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        for _ in range(3):
            _runtime._fallback("some.private.call", "AttributeError('moved')")
    assert len(caught) == 1 and issubclass(caught[0].category, _runtime.RuntimeFallbackWarning)
    assert "some.private.call" in str(caught[0].message) and "public" in str(caught[0].message)


def test_fast_caller_falls_back_to_the_concrete_function_when_its_internals_move(monkeypatch):
    import tensorflow as tf

    concrete = tf.function(
        lambda x: 2.0 * x, input_signature=[tf.TensorSpec((None,), tf.float32)]
    ).get_concrete_function()

    class Moved:  # a concrete function without the private attributes
        def __getattr__(self, name):
            if name == "_inference_function":
                raise AttributeError(name)
            return getattr(concrete, name)

        def __call__(self, *args):
            return concrete(*args)

    monkeypatch.setattr(_runtime, "_WARNED", set())
    moved = Moved()
    if _runtime._execute is None:  # LNN_PUBLIC_TF=1: the public call, asked for, so no warning
        with warnings.catch_warnings():
            warnings.simplefilter("error")
            assert _runtime.fast_caller(moved) is moved and _runtime.fast_caller(concrete) is concrete
        return
    with pytest.warns(_runtime.RuntimeFallbackWarning, match="_inference_function"):
        caller = _runtime.fast_caller(moved)
    assert caller is moved
    fast = _runtime.fast_caller(concrete)  # with the internals: the fast path, the same answer
    assert fast is not concrete
    np.testing.assert_array_equal(fast(tf.constant([1.0, 2.0])).numpy(), [2.0, 4.0])


def test_sublayers_and_scalar_summaries_through_public_apis(tmp_path):
    import keras
    import tensorflow as tf

    model = LagrangianNetwork(2, kind="kinetic-potential", seed=0, hidden=(4,))
    assert [layer.name for layer in _runtime.sublayers(model)] == ["kinetic", "potential"]
    seq = keras.Sequential([keras.Input((3,)), keras.layers.Dense(2), keras.layers.Dense(1)])
    assert len(_runtime.sublayers(seq)) == 2
    writer = tf.summary.create_file_writer(str(tmp_path))
    with writer.as_default():
        _runtime.scalar_summary("loss", 0.5, 3)
    writer.close()
    events = glob.glob(str(tmp_path / "events.out.tfevents.*"))
    assert events
    record = next(iter(tf.data.TFRecordDataset(events[0]).skip(1)))
    assert b"loss" in record.numpy()


# -- a failed compilation says why ------------------------------------------------------


def _failing_xla_body(x):
    raise RuntimeError("no XLA form here")


def test_a_failed_compilation_stays_in_graph_mode_and_warns_once_with_its_reason(monkeypatch):
    import tensorflow as tf

    monkeypatch.setattr(compiled, "_REPORTED", set())
    op = compiled.CompiledOp(
        lambda x: 2.0 * x, width=2, dtype=tf.float64, xla=True, xla_body=_failing_xla_body, name="doubling"
    )
    x = np.arange(14.0).reshape(7, 2)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        for rows in (3, 3, 5, 5, 3):  # two sizes recur: two compilations, both fail
            out = op(x[:rows])
            np.testing.assert_array_equal(out.numpy(), 2.0 * x[:rows])
        compiled.wait()
    assert [(c.rows, c.ok) for c in op.compilations] == [(3, False), (6, False)]
    assert all(c.error == "RuntimeError: no XLA form here" for c in op.compilations)
    assert op.ready == set()
    np.testing.assert_array_equal(op(x[:3]).numpy(), 2.0 * x[:3])  # still graph mode, same results
    reports = [w for w in caught if issubclass(w.category, lnn.CompilationWarning)]
    assert len(reports) == 1, [str(w.message) for w in caught]  # once per operation and kind of failure
    assert "XLA compilation of doubling at 3 rows failed (RuntimeError: no XLA form here)" in str(reports[0].message)


def test_a_failed_compilation_of_a_solver_loop_is_logged_with_its_reason(monkeypatch):
    from lnn.solvers import _scheduler

    class Refusing:
        def get_concrete_function(self):
            raise ValueError("the loop does not compile")

    monkeypatch.setattr(compiled, "_REPORTED", set())
    scheduler = object.__new__(_scheduler.RolloutScheduler)  # only what _compile reads
    scheduler._xla, scheduler._xla_function, scheduler.compilations, scheduler.ready = None, Refusing(), [], set()
    with pytest.warns(lnn.CompilationWarning, match=r"solver loop at 4 rows failed \(ValueError: the loop does not"):
        scheduler._compile((4, 9), ((), ()))
    assert [(c.rows, c.ok, c.error) for c in scheduler.compilations] == [
        (4, False, "ValueError: the loop does not compile")
    ]
    assert scheduler.ready == set()
