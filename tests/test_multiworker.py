"""lnn.fit across machines: MultiWorkerMirroredStrategy with two worker processes on localhost.

Two processes, each given its ``TF_CONFIG`` (a two-worker cluster on free
local ports), train the same tiny model with the same global batch under
``tf.distribute.MultiWorkerMirroredStrategy``; a third trains it in one
process with the default strategy. The epoch losses and the final weights
agree: the global batch is split over the workers and the gradients summed.
"""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import textwrap

import numpy as np
import pytest

pytest.importorskip("tensorflow")

pytestmark = pytest.mark.slow  # three TensorFlow processes: 30-60 s on two busy cores

_WORKER = textwrap.dedent("""
    import json, sys
    import tensorflow as tf
    multi = sys.argv[1] == "multi"
    strategy = tf.distribute.MultiWorkerMirroredStrategy() if multi else None  # before any op
    import numpy as np
    from types import SimpleNamespace
    from lnn.models import LagrangianNetwork
    from lnn.train import fit

    rng = np.random.default_rng(0)
    n = 200
    q = rng.uniform(-3, 3, (n, 1)); qd = rng.normal(size=(n, 1)); tau = rng.normal(size=(n, 1))
    data = SimpleNamespace(q=q, qd=qd, qdd=-9.81 * np.sin(q) + tau, tau=tau)

    def build():
        return LagrangianNetwork(1, kind="black-box", hidden=(8, 8), angular=(True,),
                                 dtype="float64", seed=1, xla=False)

    if multi:
        with strategy.scope():
            model = build()
    else:
        model = build()
    history = fit(model, data, epochs=3, batch_size=64, validation=None, strategy=strategy,
                  loss={"acceleration": 1.0, "torque": 0.5}, learning_rate=1e-2)
    print(json.dumps({
        "replicas": strategy.num_replicas_in_sync if multi else 1,
        "traces": history.traces,
        "total": [float(x) for x in history.train["total"]],
        "weights": [np.asarray(v).ravel().tolist() for v in model.trainable_variables],
    }))
""")


def _free_ports(count: int) -> list[int]:
    sockets = [socket.socket(socket.AF_INET, socket.SOCK_STREAM) for _ in range(count)]
    try:
        for s in sockets:
            s.bind(("localhost", 0))
        return [s.getsockname()[1] for s in sockets]
    finally:
        for s in sockets:
            s.close()


def _env(**extra) -> dict:
    env = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="3", CUDA_VISIBLE_DEVICES="-1", **extra)
    env.pop("TF_CONFIG", None)
    env.update(extra)
    return env


def _result(process: subprocess.Popen, name: str) -> dict:
    try:
        out, err = process.communicate(timeout=240)
    except subprocess.TimeoutExpired:
        process.kill()
        out, err = process.communicate()
        pytest.fail(f"{name} timed out:\n{err[-3000:]}")
    assert process.returncode == 0, f"{name} failed:\n{err[-3000:]}"
    return json.loads(out.strip().splitlines()[-1])


def test_two_workers_on_localhost_train_as_one_process():
    ports = _free_ports(2)
    cluster = {"worker": [f"localhost:{p}" for p in ports]}
    workers = []
    for index in range(2):
        config = json.dumps({"cluster": cluster, "task": {"type": "worker", "index": index}})
        workers.append(
            subprocess.Popen(
                [sys.executable, "-c", _WORKER, "multi"],
                text=True,
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
                env=_env(TF_CONFIG=config),
            )
        )
    single = subprocess.Popen(
        [sys.executable, "-c", _WORKER, "single"], text=True, stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=_env()
    )
    try:
        results = [_result(w, f"worker {i}") for i, w in enumerate(workers)]
        one = _result(single, "the single process")
    finally:
        for process in (*workers, single):
            if process.poll() is None:
                process.kill()
    for result in results:
        assert result["replicas"] == 2 and result["traces"] == 1
        assert len(result["total"]) == 3
        np.testing.assert_allclose(result["total"], one["total"], rtol=1e-9)
        for mine, theirs in zip(result["weights"], one["weights"]):
            np.testing.assert_allclose(mine, theirs, rtol=1e-8, atol=1e-10)
    # Training moved the weights, the same way on both workers.
    assert one["total"][-1] < one["total"][0]
    for a, b in zip(results[0]["weights"], results[1]["weights"]):
        np.testing.assert_array_equal(a, b)
