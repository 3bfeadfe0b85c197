"""Every private TensorFlow or Keras call of the package, each with its public fallback.

No other module of ``lnn`` imports ``tensorflow.python``, ``keras.src`` or
``pywrap_tfe``: what the package takes from TensorFlow's internals for speed
lives here, next to the public way of doing the same thing.

=====================  =====================================  ==============================
what                   private (fast) path                    public fallback
=====================  =====================================  ==============================
:func:`fast_caller`    ``TFE_Py_Execute`` on the concrete     the ``ConcreteFunction`` call
                       function's inference graph (skips      itself
                       150-300 µs of Python per call)
:func:`tape_may_record`  ``record.could_possibly_record``     ``True`` (assume a tape may
                       (one C call)                           record: inputs stay tensors)
:func:`scalar_summary`  ``summary_pb2`` scalar metadata       ``tf.summary.scalar`` when the
                       (TensorBoard shows a scalar without    ``tensorboard`` package is
                       the ``tensorboard`` package)           installed, else a plain
                                                              ``tf.summary.write``
=====================  =====================================  ==============================

Measured and dropped (less than 10 % of a public call, the house rule):
the ``EagerTensor`` constructor (3-4 µs of a 70-120 µs call: :func:`eager_tensor`
is ``tf.constant``), ``control_flow_util.GraphOrParentsInXlaContext``
(replaced by the package's own flag, :func:`xla_tracing`, set while one of its
XLA functions traces) and Keras's ``_flatten_layers`` (:func:`sublayers`
walks the public ``layers`` attributes).

**XLA's CPU emitters.** TensorFlow 2.21's XLA generates CPU code for a fused
loop with MLIR "fusion emitters" by default; its classic emitters generate the
same loops 1.5-2.5x sooner and run them as fast (measured on one core: a
compiled 7-DOF rollout compiles in 1.7-2.4 s instead of 3.9-4.7 s at the same
run time; the first two epochs of ``fit`` on the double pendulum, compilation
included, 4.4-4.8 s instead of 10.8-11.0 s). XLA reads its options
(``XLA_FLAGS``) once per process, at its first compilation. So, on the
TensorFlow releases where this was measured (:data:`_CLASSIC_EMITTER_RELEASES`)
and unless ``XLA_FLAGS`` already names ``xla_cpu_use_fusion_emitters``, this
module's import adds ``--xla_cpu_use_fusion_emitters=false`` to ``XLA_FLAGS``,
compiles one trivial function (~0.1 s) so that XLA reads it, and puts
``XLA_FLAGS`` back as it was (JAX and child processes never see it). It
applies to every XLA compilation of TensorFlow in the process; if XLA has
compiled before (TensorFlow code that ran before ``lnn``'s first
TensorFlow-facing import), XLA keeps the options it read then.
``LNN_XLA_EMITTERS=default`` (or ``LNN_PUBLIC_TF=1``) leaves XLA's default;
``LNN_XLA_EMITTERS=classic`` asks for the classic emitters on any release.
:data:`XLA_CPU_EMITTERS` says which were asked for.

``LNN_PUBLIC_TF=1`` in the environment (read at import) makes the package use
only the public paths. A private path that cannot be set up on this
TensorFlow release falls back to the public one and says so once with a
Python warning (:class:`RuntimeFallbackWarning`).
"""

from __future__ import annotations

import contextlib
import os
import threading
import warnings

import numpy as np
import tensorflow as tf

from lnn.errors import RuntimeFallbackWarning

__all__ = [
    "PUBLIC_ONLY",
    "RuntimeFallbackWarning",
    "EagerTensor",
    "XLA_CPU_EMITTERS",
    "eager_tensor",
    "fast_caller",
    "in_xla_trace",
    "scalar_summary",
    "sublayers",
    "tape_may_record",
    "xla_tracing",
]

#: True when ``LNN_PUBLIC_TF=1``: only public TensorFlow and Keras APIs are used.
PUBLIC_ONLY = os.environ.get("LNN_PUBLIC_TF", "").strip().lower() in ("1", "true", "yes", "on")

#: The class of eager tensors (``type(tf.constant(0.0))``: found through public calls).
EagerTensor = type(tf.constant(0.0))


_WARNED: set = set()


def _fallback(what: str, reason: str) -> None:
    """Warn once per ``what`` that its public fallback is taken (not when it was asked for)."""
    if what in _WARNED:
        return
    _WARNED.add(what)
    warnings.warn(
        f"lnn: {what} is unavailable on TensorFlow {tf.__version__} ({reason}); "
        "using the public API instead (slower, same results)",
        RuntimeFallbackWarning,
        stacklevel=3,
    )


# ----------------------------------------------------------------------------- XLA's options

#: TensorFlow releases (major, minor) on which the classic emitters were measured (module docstring).
_CLASSIC_EMITTER_RELEASES = ((2, 21),)
_EMITTER_FLAG = "xla_cpu_use_fusion_emitters"


def _release() -> tuple[int, int]:
    major, minor = (tf.__version__.split(".") + ["0"])[:2]
    return int(major), int("".join(ch for ch in minor if ch.isdigit()) or 0)


def _choose_cpu_emitters() -> str:
    """Ask TensorFlow's XLA for its classic CPU emitters where that was measured; ``"classic"`` or ``"default"``.

    See the module docstring. A failure to compile the trivial function (an
    XLA-less TensorFlow build) leaves the default and says so once.
    """
    asked = os.environ.get("LNN_XLA_EMITTERS", "").strip().lower()
    if asked not in ("", "classic", "default"):
        raise ValueError(f"LNN_XLA_EMITTERS must be 'classic' or 'default', got {asked!r}")
    flags = os.environ.get("XLA_FLAGS")
    if asked == "default" or PUBLIC_ONLY or (flags is not None and _EMITTER_FLAG in flags):
        return "default"
    if asked != "classic" and _release() not in _CLASSIC_EMITTER_RELEASES:
        return "default"
    os.environ["XLA_FLAGS"] = f"{flags or ''} --{_EMITTER_FLAG}=false".strip()
    try:
        trivial = tf.function(lambda x: x + 1.0, jit_compile=True, autograph=False)
        trivial(tf.constant(0.0))
    except Exception as exc:  # no XLA in this build: nothing was read
        _fallback("XLA's classic CPU emitters", repr(exc))
        return "default"
    finally:
        if flags is None:
            os.environ.pop("XLA_FLAGS", None)
        else:
            os.environ["XLA_FLAGS"] = flags
    return "classic"


#: The XLA CPU emitters this module asked for at import: ``"classic"`` or ``"default"`` (see above).
XLA_CPU_EMITTERS = _choose_cpu_emitters()


# ----------------------------------------------------------------------------- tapes


def _load_could_record():
    if PUBLIC_ONLY:
        return None
    try:
        from tensorflow.python.eager.record import could_possibly_record

        could_possibly_record()
        return could_possibly_record
    except Exception as exc:  # ImportError, AttributeError, TypeError on other releases
        _fallback("tensorflow.python.eager.record.could_possibly_record", repr(exc))
        return None


_could_record = _load_could_record()


def tape_may_record() -> bool:
    """Whether a gradient tape or forward accumulator could record an op now (True if unknown)."""
    return _could_record is None or bool(_could_record())


# ----------------------------------------------------------------------------- eager calls


def eager_tensor(array: np.ndarray, dtype) -> tf.Tensor:
    """An eager tensor holding ``array`` (``tf.constant``; the private constructor saved < 10 %)."""
    return tf.constant(array, dtype=dtype)


def _load_execute():
    if PUBLIC_ONLY or _could_record is None:
        return None
    try:
        from tensorflow.python import pywrap_tfe
        from tensorflow.python.eager import context, core

        ctx = context.context()
        ctx.ensure_initialized()
        ctx.function_call_options.as_attrs()
        return (pywrap_tfe.TFE_Py_Execute, ctx, core._NotOkStatusException, core._status_to_exception)
    except Exception as exc:
        _fallback("tensorflow.python.pywrap_tfe.TFE_Py_Execute", repr(exc))
        return None


_execute = _load_execute()


def _call_attrs(ctx):
    """``attrs()``: the function-call attributes of the context's current call options.

    What ``Context.call_function`` passes (executor type and the serialized
    session config), rebuilt only when the options object or its config
    changes (``tf.config`` changes replace them).
    """
    cache = [None, None, None]

    def attrs():
        options = ctx.function_call_options
        config = options.config_proto_serialized
        if cache[0] is not options or cache[1] is not config:
            flat = options.as_attrs()
            cache[:] = options, config, ("executor_type", flat["executor_type"], "config_proto", flat["config_proto"])
        return cache[2]

    return attrs


def fast_caller(concrete):
    """A caller of a concrete function that skips TensorFlow's Python dispatch when it can.

    Calling a ``ConcreteFunction`` costs 150-300 µs of Python on a small CPU
    before any maths runs: deciding whether a gradient tape is watching,
    binding the arguments, three context managers and the call options. When
    no tape can record (no ``tf.GradientTape`` or ``ForwardAccumulator``
    active anywhere, one C call) and execution is eager, the returned
    callable hands the tensors and the captured variables straight to the
    eager runtime (``TFE_Py_Execute``, what ``ConcreteFunction`` ends in).
    Under a tape, or inside a graph, it calls ``concrete`` itself, so
    gradients are recorded as usual. Errors of the graph (a failed Cholesky,
    say) raise TensorFlow's usual exception classes. With ``LNN_PUBLIC_TF=1``
    (or where the internals moved) it returns ``concrete`` unchanged.

    Parameters
    ----------
    concrete : tf.types.experimental.ConcreteFunction
        Traced with a flat signature of tensors only.

    Returns
    -------
    callable
        ``f(*tensors)`` with the same outputs as ``concrete(*tensors)``; its
        attribute ``concrete`` is the concrete function.
    """
    if _execute is None:
        return concrete
    execute, ctx, not_ok, to_exception = _execute
    try:
        atomic = concrete._inference_function
        name = atomic.name.decode() if isinstance(atomic.name, bytes) else str(atomic.name)
        n_outputs = len(atomic.function_type.flat_outputs)
        pack = atomic.function_type.pack_output
        captures = list(concrete.captured_inputs)
        attrs_of = _call_attrs(ctx)
    except (AttributeError, TypeError) as exc:
        _fallback("ConcreteFunction._inference_function", repr(exc))
        return concrete
    could_record = _could_record
    executing_eagerly = tf.executing_eagerly

    def run(*args):
        if could_record() or not executing_eagerly():
            return concrete(*args)
        try:
            flat = execute(ctx._handle, ctx.device_name, name, list(args) + captures, attrs_of(), n_outputs)
        except not_ok as error:
            raise to_exception(error) from None
        return pack(flat)

    run.concrete = concrete
    return run


# ----------------------------------------------------------------------------- XLA tracing

_TRACE = threading.local()


@contextlib.contextmanager
def xla_tracing():
    """Mark the trace running inside this block as one that XLA will compile.

    The package's XLA functions trace their bodies inside it, so that
    :func:`in_xla_trace` lets the mathematics pick forms that XLA's CPU
    backend runs fast (an unrolled Cholesky, fused Gram sums).
    """
    depth = getattr(_TRACE, "depth", 0)
    _TRACE.depth = depth + 1
    try:
        yield
    finally:
        _TRACE.depth = depth


def in_xla_trace() -> bool:
    """Whether the graph being traced is one of the package's XLA functions (see :func:`xla_tracing`)."""
    return getattr(_TRACE, "depth", 0) > 0


def xla_body(fn):
    """``fn`` traced inside :func:`xla_tracing` (wrap the Python body of a ``jit_compile`` function)."""

    def traced(*args, **kwargs):
        with xla_tracing():
            return fn(*args, **kwargs)

    traced.__name__ = getattr(fn, "__name__", "xla_body")
    traced.__doc__ = getattr(fn, "__doc__", None)
    return traced


# ----------------------------------------------------------------------------- Keras


def sublayers(model) -> list:
    """Every layer below ``model``, depth first (through the public ``layers`` attributes).

    Keras models list their direct layers in the list ``layers`` (a model's
    layer attributes, such as the networks of ``lnn.LagrangianNetwork``, are
    tracked there); a layer whose ``layers`` is not a list (``lnn``'s MLPs
    have a ``layers()`` method) has no sublayers.
    """

    def children(layer):
        found = getattr(layer, "layers", ())
        return list(found)[::-1] if isinstance(found, (list, tuple)) else []

    out, seen = [], {id(model)}
    stack = children(model)
    while stack:
        layer = stack.pop()
        if id(layer) in seen:
            continue
        seen.add(id(layer))
        out.append(layer)
        stack.extend(children(layer))
    return out


# ----------------------------------------------------------------------------- summaries


def _load_summary_metadata():
    try:
        import tensorboard  # noqa: F401  (the public tf.summary.scalar needs it)

        return "public"
    except ImportError:
        pass
    if PUBLIC_ONLY:
        return None
    try:
        from tensorflow.core.framework import summary_pb2

        metadata = summary_pb2.SummaryMetadata(data_class=summary_pb2.DATA_CLASS_SCALAR)
        metadata.plugin_data.plugin_name = "scalars"
        return metadata
    except Exception as exc:
        _fallback("tensorflow.core.framework.summary_pb2", repr(exc))
        return None


_SUMMARY = []


def scalar_summary(tag: str, value: float, step: int) -> None:
    """Write one TensorBoard scalar to the default summary writer.

    With the ``tensorboard`` package installed this is ``tf.summary.scalar``;
    without it, TensorFlow alone writes the same event through the scalar
    plugin's metadata (private ``summary_pb2``); with ``LNN_PUBLIC_TF=1`` and
    no ``tensorboard``, a plain ``tf.summary.write`` (a tensor summary).
    """
    if not _SUMMARY:
        _SUMMARY.append(_load_summary_metadata())
    metadata = _SUMMARY[0]
    if metadata == "public":
        tf.summary.scalar(tag, value, step=step)
    elif metadata is None:
        tf.summary.write(tag, tf.constant(value, tf.float32), step=step)
    else:
        tf.summary.write(tag, tf.constant(value, tf.float32), step=step, metadata=metadata)
