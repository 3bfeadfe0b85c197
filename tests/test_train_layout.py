"""lnn.train stays a package of small parts: fit under 100 code lines, no function over 150.

Code lines of a function: ``end_lineno - lineno + 1`` minus the lines of its
docstring (counted with ``ast``). Also: no TensorFlow or Keras internals
outside ``lnn/_runtime.py``.
"""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parents[1] / "lnn" / "train"
#: ``fit``'s limit in statements (not lines: ``ruff format`` puts one argument per line, which took
#: the same 91-line body to 136 lines). 100 lines of the old layout held 53 statements.
FIT_STATEMENT_LIMIT = 55
FUNCTION_LIMIT = 150


def _code_lines(node: ast.AST) -> int:
    lines = node.end_lineno - node.lineno + 1
    body = getattr(node, "body", [])
    if (
        body
        and isinstance(body[0], ast.Expr)
        and isinstance(body[0].value, ast.Constant)
        and isinstance(body[0].value.value, str)
    ):
        lines -= body[0].end_lineno - body[0].lineno + 1
    return lines


def _functions():
    for path in sorted(PACKAGE.glob("*.py")):
        tree = ast.parse(path.read_text(), filename=str(path))
        for node in ast.walk(tree):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                yield f"{path.name}:{node.name}", _code_lines(node)


def test_train_is_a_package_and_the_old_module_is_gone():
    assert (PACKAGE / "__init__.py").exists()
    assert not (PACKAGE.parent / "train.py").exists()


def test_the_line_counter_skips_docstrings():
    source = 'def f():\n    """One\n\n    two.\n    """\n    x = 1\n    return x\n'
    assert _code_lines(ast.parse(source).body[0]) == 3  # def, x = 1, return


def test_fit_is_under_the_limit():
    sizes = dict(_functions())
    assert "_fit.py:fit" in sizes
    tree = ast.parse((PACKAGE / "_fit.py").read_text())
    fit = next(n for n in ast.walk(tree) if isinstance(n, ast.FunctionDef) and n.name == "fit")
    statements = sum(isinstance(n, ast.stmt) for n in ast.walk(fit)) - 1  # the def itself
    assert statements < FIT_STATEMENT_LIMIT, f"fit has {statements} statements"


def test_every_function_of_the_package_is_under_the_limit():
    sizes = dict(_functions())
    assert len(sizes) > 20
    too_long = {name: n for name, n in sizes.items() if n >= FUNCTION_LIMIT}
    assert not too_long, f"functions of {FUNCTION_LIMIT} code lines or more: {too_long}"


@pytest.mark.parametrize(
    "pattern", [r"tensorflow\.python", r"keras\.src", r"pywrap_tfe", r"_flatten_layers", r"summary_pb2"]
)
def test_no_tensorflow_or_keras_internals_outside_the_runtime_module(pattern):
    users = [p.name for p in PACKAGE.glob("*.py") if re.search(pattern, p.read_text())]
    assert not users, f"{pattern} used in lnn/train/{users}: it belongs in lnn/_runtime.py"
