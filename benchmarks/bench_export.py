"""The exported SavedModel (issue 53): latency of one ``inverse_dynamics`` call at B = 1, from Python and C.

A script, not a test. The model: the rigid-body kind on the 7-DOF Panda
(``simulations.panda()``, fingers locked) with the learned forces of
``lnn identify``'s residual stage (``viscous+coulomb+joint_network``), in
float64 (as ``identify`` trains) and float32, exported with
``LagrangianNetwork.export`` (:mod:`lnn.export.savedmodel`). Rows:

``lnn``
    ``model.inverse_dynamics(q, qd, qdd)`` in ``lnn`` (numpy in, its compiled
    operation), the reference.
``python``
    ``tf.saved_model.load(dir).signatures["inverse_dynamics"](q=, qd=, qdd=)``,
    TensorFlow tensors built once (what a Python controller calls).
``c-api``
    A C program compiled at run time with ``gcc`` against the TensorFlow
    C API that the pip wheel ships (``tensorflow/libtensorflow_cc.so.2``,
    ``libtensorflow_framework.so.2``, headers in ``tensorflow/include``):
    ``TF_LoadSessionFromSavedModel`` (tag ``serve``), then ``TF_SessionRun``
    on the signature's tensors in a loop, each call timed with
    ``clock_gettime``; it also prints its ``tau`` for a check against Python's.

Each row: the median of ``--calls`` timed calls after 50 warm-up calls, and
the ratio to the ``python`` row. A 1 kHz controller has 1 ms per cycle.

Usage::

    python benchmarks/bench_export.py                 # float64 and float32, 2000 calls each
    python benchmarks/bench_export.py --dtype float64 --calls 5000
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")

import numpy as np  # noqa: E402

import lnn  # noqa: E402
import simulations  # noqa: E402
from lnn.export import export_savedmodel  # noqa: E402

C_PROGRAM = r"""
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include "tensorflow/c/c_api.h"

static int compare(const void *a, const void *b) {
  double x = *(const double *)a, y = *(const double *)b;
  return (x > y) - (x < y);
}

static void check(TF_Status *s, const char *what) {
  if (TF_GetCode(s) != TF_OK) { fprintf(stderr, "%s: %s\n", what, TF_Message(s)); exit(1); }
}

static TF_Output output(TF_Graph *g, const char *name) {
  char op[256]; int index = 0; const char *colon = strrchr(name, ':');
  size_t len = colon ? (size_t)(colon - name) : strlen(name);
  memcpy(op, name, len); op[len] = 0; if (colon) index = atoi(colon + 1);
  TF_Operation *o = TF_GraphOperationByName(g, op);
  if (!o) { fprintf(stderr, "no operation %s\n", op); exit(1); }
  TF_Output out = {o, index}; return out;
}

/* usage: prog DIR N DTYPE(0: float64, 1: float32) CALLS IN_Q IN_QD IN_QDD OUT_TAU */
int main(int argc, char **argv) {
  const char *dir = argv[1]; int n = atoi(argv[2]); int f32 = atoi(argv[3]); int calls = atoi(argv[4]);
  TF_Status *s = TF_NewStatus(); TF_Graph *g = TF_NewGraph(); TF_SessionOptions *o = TF_NewSessionOptions();
  const char *tags[] = {"serve"};
  TF_Session *session = TF_LoadSessionFromSavedModel(o, NULL, dir, tags, 1, g, NULL, s);
  check(s, "TF_LoadSessionFromSavedModel");
  TF_Output in[3] = {output(g, argv[5]), output(g, argv[6]), output(g, argv[7])};
  TF_Output out[1] = {output(g, argv[8])};
  TF_DataType type = f32 ? TF_FLOAT : TF_DOUBLE; size_t size = f32 ? 4 : 8;
  int64_t dims[2] = {1, n}; TF_Tensor *values[3];
  for (int k = 0; k < 3; k++) {
    values[k] = TF_AllocateTensor(type, dims, 2, size * n);
    for (int j = 0; j < n; j++) {
      double v = 0.1 * (j + 1) * (k + 1) - 0.3;
      if (f32) ((float *)TF_TensorData(values[k]))[j] = (float)v; else ((double *)TF_TensorData(values[k]))[j] = v;
    }
  }
  double *times = malloc(sizeof(double) * calls); TF_Tensor *result[1];
  for (int i = -50; i < calls; i++) {
    struct timespec a, b; clock_gettime(CLOCK_MONOTONIC, &a);
    TF_SessionRun(session, NULL, in, values, 3, out, result, 1, NULL, 0, NULL, s);
    clock_gettime(CLOCK_MONOTONIC, &b); check(s, "TF_SessionRun");
    if (i == calls - 1) {
      printf("tau");
      void *data = TF_TensorData(result[0]);
      for (int j = 0; j < n; j++) printf(" %.17g", f32 ? (double)((float *)data)[j] : ((double *)data)[j]);
      printf("\n");
    }
    TF_DeleteTensor(result[0]);
    if (i >= 0) times[i] = (b.tv_sec - a.tv_sec) * 1e6 + (b.tv_nsec - a.tv_nsec) * 1e-3;
  }
  qsort(times, calls, sizeof(double), compare);
  printf("median_us %.3f\n", times[calls / 2]);
  return 0;
}
"""


def tensorflow_dir() -> Path:
    import tensorflow as tf

    return Path(tf.__file__).resolve().parent


def signature_tensors(export_dir: Path, name: str) -> tuple[list[str], str]:
    """The graph tensor names of a signature's inputs (q, qd, qdd) and its output, from saved_model.pb."""
    from tensorflow.core.protobuf import saved_model_pb2

    proto = saved_model_pb2.SavedModel()
    proto.ParseFromString((export_dir / "saved_model.pb").read_bytes())
    signature = proto.meta_graphs[0].signature_def[name]
    inputs = [signature.inputs[k].name for k in ("q", "qd", "qdd")]
    return inputs, signature.outputs["tau"].name


def compile_c(workdir: Path) -> Path:
    tf_dir = tensorflow_dir()
    source, binary = workdir / "call_savedmodel.c", workdir / "call_savedmodel"
    source.write_text(C_PROGRAM)
    command = [
        "gcc", "-O2", str(source), "-o", str(binary), f"-I{tf_dir / 'include'}", f"-L{tf_dir}",
        "-l:libtensorflow_cc.so.2", "-l:libtensorflow_framework.so.2", f"-Wl,-rpath,{tf_dir}",
    ]  # fmt: skip
    subprocess.run(command, check=True, capture_output=True, text=True)
    return binary


def time_calls(fn, calls: int) -> float:
    for _ in range(50):
        fn()
    times = []
    for _ in range(calls):
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
    return statistics.median(times)


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--dtype", choices=("float64", "float32", "both"), default="both")
    parser.add_argument("--calls", type=int, default=2000)
    parser.add_argument("--xla", action="store_true", help="export with xla=True (jit_compile signature functions)")
    args = parser.parse_args(argv)
    import tensorflow as tf

    robot = simulations.panda()
    n = robot.n_dof
    dtypes = ("float64", "float32") if args.dtype == "both" else (args.dtype,)
    print(
        f"# exported {n}-DOF Panda rigid body + viscous+coulomb+joint_network (xla={args.xla}); B = 1; "
        f"median of {args.calls} calls"
    )
    print("# loaded machine: 2 cores shared with other jobs; the numbers are upper bounds of an idle machine's")
    header = f"{'dtype':<8} {'method':<8} {'B':>2} {'n':>2} {'median':>11} {'vs python':>10}"
    print(header)
    print("-" * len(header))
    with tempfile.TemporaryDirectory() as tmp:
        workdir = Path(tmp)
        binary = compile_c(workdir)
        for dtype in dtypes:
            model = lnn.LagrangianNetwork(
                n, kind="rigid-body", prior=robot, dtype=dtype, friction="viscous+coulomb+joint_network", seed=0
            )
            export_dir = workdir / dtype
            export_savedmodel(model, export_dir, xla=args.xla)
            q, qd, qdd = ((0.1 * np.arange(1, n + 1) * k - 0.3).astype(dtype)[None] for k in (1, 2, 3))
            loaded = tf.saved_model.load(str(export_dir))
            signature = loaded.signatures["inverse_dynamics"]
            tq, tqd, tqdd = (tf.constant(a) for a in (q, qd, qdd))
            times = {
                "lnn": time_calls(lambda: model.inverse_dynamics(q, qd, qdd), args.calls),
                "python": time_calls(lambda: signature(q=tq, qd=tqd, qdd=tqdd), args.calls),
            }
            inputs, output = signature_tensors(export_dir, "inverse_dynamics")
            run = subprocess.run(
                [str(binary), str(export_dir), str(n), str(int(dtype == "float32")), str(args.calls), *inputs, output],
                capture_output=True,
                text=True,
            )
            if run.returncode != 0:
                print(f"# c-api failed: {run.stderr.strip()[-500:]}", file=sys.stderr)
            else:
                lines = dict(line.split(" ", 1) for line in run.stdout.strip().splitlines())
                times["c-api"] = float(lines["median_us"]) * 1e-6
                tau_c = np.array(lines["tau"].split(), float)
                tau_py = signature(q=tq, qd=tqd, qdd=tqdd)["tau"].numpy()[0]
                gap = np.abs(tau_c - tau_py).max() / np.abs(tau_py).max()
                print(f"# {dtype}: C API tau vs Python signature tau, max relative difference {gap:.2e}")
            for method, seconds in times.items():
                ratio = seconds / times["python"]
                print(f"{dtype:<8} {method:<8} {1:>2} {n:>2} {seconds * 1e6:>9.1f}us {ratio:>9.2f}x")
    return 0


if __name__ == "__main__":
    sys.exit(main())
