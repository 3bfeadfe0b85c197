"""House rules that code review alone lets slip: function size, one runtime module, the kinds' homes."""

from __future__ import annotations

import ast
import pathlib

import lnn

ROOT = pathlib.Path(lnn.__file__).parent

#: The longest function the package allows, in code lines (docstring, comments, blanks excluded).
MAX_CODE_LINES = 150


def _code_lines(lines: list[str], node) -> int:
    span = set(range(node.lineno, node.end_lineno + 1))
    body = node.body
    if (
        body
        and isinstance(body[0], ast.Expr)
        and isinstance(getattr(body[0], "value", None), ast.Constant)
        and isinstance(body[0].value.value, str)
    ):
        span -= set(range(body[0].lineno, body[0].end_lineno + 1))
    return sum(1 for i in span if lines[i - 1].strip() and not lines[i - 1].strip().startswith("#"))


def test_no_function_of_the_package_is_longer_than_150_code_lines():
    long = []
    for path in sorted(ROOT.rglob("*.py")):
        text = path.read_text(encoding="utf-8")
        lines = text.splitlines()
        for node in ast.walk(ast.parse(text)):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                count = _code_lines(lines, node)
                if count > MAX_CODE_LINES:
                    long.append(f"{path.relative_to(ROOT)}:{node.lineno} {node.name} ({count} lines)")
    assert long == []


def test_the_keras_model_never_branches_on_a_kind():
    """``kind ==`` comparisons belong to nobody: a kind's behaviour lives in its own module."""
    offenders = []
    for path in sorted((ROOT / "models").glob("*.py")) + [ROOT / "fast.py"]:
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Compare):
                sides = [node.left, *node.comparators]
                names = [getattr(n, "attr", getattr(n, "id", None)) for n in sides]
                literal = any(
                    isinstance(n, ast.Constant)
                    and isinstance(n.value, str)
                    or isinstance(n, (ast.Tuple, ast.List, ast.Set))
                    for n in sides
                )
                if "kind" in names and literal:  # kind == "structured", kind in ("a", "b")
                    offenders.append(f"{path.name}:{node.lineno}")
    assert offenders == []
