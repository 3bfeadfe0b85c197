"""House rules that code review alone lets slip: function size, the import graph, the kinds' homes.

The import graph is read from the code's own import statements (``ast``, nothing is
imported): every ``import`` and ``from ... import`` of ``lnn/`` and ``simulations/``,
at module level, inside functions and under ``TYPE_CHECKING``, and the modules that
``importlib.import_module`` loads (a literal, the values of a module-level table such
as a lazy-import map, or every module an f-string prefix can name).
"""

from __future__ import annotations

import ast
import collections
import pathlib

import lnn

ROOT = pathlib.Path(lnn.__file__).parent
BASE = ROOT.parent
#: The packages whose import graph is checked.
PACKAGES = ("lnn", "simulations")

#: The longest function the package allows, in code lines (docstring, comments, blanks excluded).
MAX_CODE_LINES = 100


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


def test_no_function_of_the_package_is_longer_than_100_code_lines():
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


# -- the import graph --------------------------------------------------------------------------


def _modules() -> dict:
    """Dotted module name -> (path, is a package), for every module of :data:`PACKAGES`."""
    out = {}
    for package in PACKAGES:
        for path in sorted((BASE / package).rglob("*.py")):
            parts = list(path.relative_to(BASE).with_suffix("").parts)
            is_package = parts[-1] == "__init__"
            out[".".join(parts[:-1] if is_package else parts)] = (path, is_package)
    return out


def _tables(tree) -> dict:
    """Module-level ``NAME = {...}`` / ``(...)`` / ``[...]`` literals: name -> their string values."""
    out = {}
    for node in tree.body:
        if isinstance(node, (ast.Assign, ast.AnnAssign)) and isinstance(node.value, (ast.Dict, ast.Tuple, ast.List)):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            values = node.value.values if isinstance(node.value, ast.Dict) else node.value.elts
            strings = [v.value for v in values if isinstance(v, ast.Constant) and isinstance(v.value, str)]
            out.update({t.id: strings for t in targets if isinstance(t, ast.Name)})
    return out


def _loaded(arg, tables: dict, modules: dict) -> list:
    """The modules that ``importlib.import_module(arg)`` may load."""
    if isinstance(arg, ast.Constant) and isinstance(arg.value, str):
        return [arg.value] if arg.value in modules else []
    if isinstance(arg, ast.JoinedStr):
        prefix = "".join(v.value for v in arg.values[:1] if isinstance(v, ast.Constant))
        return [m for m in modules if prefix and m.startswith(prefix) and m.count(".") == prefix.count(".")]
    return [m for n in ast.walk(arg) if isinstance(n, ast.Name) for m in tables.get(n.id, []) if m in modules]


def _imports(name: str, tree, modules: dict):
    """``(target module, imported name or None)`` for every import of module ``name``."""
    package = name if modules[name][1] else name.rpartition(".")[0]
    tables = _tables(tree)
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            yield from ((a.name, None) for a in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                parts = package.split(".")
                base = ".".join(parts[: len(parts) - node.level + 1] + ([node.module] if node.module else []))
            for alias in node.names:
                full = f"{base}.{alias.name}"
                yield (full, None) if full in modules else (base, alias.name)
        elif isinstance(node, ast.Call) and node.args:
            fn = node.func
            if (fn.attr if isinstance(fn, ast.Attribute) else getattr(fn, "id", None)) in (
                "import_module",
                "__import__",
            ):
                yield from ((m, None) for m in _loaded(node.args[0], tables, modules))


def _graph():
    """``(modules, edges, private)``: the import graph and the private names imported across modules.

    A private (underscore) name defined in a module may be imported by the modules of the same
    subpackage (a directory below ``lnn/``), never from elsewhere, and never across the modules
    directly under ``lnn/`` or ``simulations/``; a private module ``pkg/_m.py`` only from inside
    ``pkg/``.
    """
    modules = _modules()
    edges, private = collections.defaultdict(set), []
    for name, (path, _) in modules.items():
        for target, attribute in _imports(name, ast.parse(path.read_text(encoding="utf-8")), modules):
            owner = target
            while owner and owner not in modules:
                owner = owner.rpartition(".")[0]
            if not owner or owner == name:
                continue
            edges[name].add(owner)
            if attribute and attribute.startswith("_") and not attribute.startswith("__"):
                home = owner if modules[owner][1] else owner.rpartition(".")[0]
                if home in PACKAGES or not (name == home or name.startswith(home + ".")):
                    private.append(f"{name} imports {attribute} from {owner}")
            leaf = target.rpartition(".")[2]
            if attribute is None and target in modules and leaf.startswith("_") and not leaf.startswith("__"):
                home = target.rpartition(".")[0]
                if not (name == home or name.startswith(home + ".")):
                    private.append(f"{name} imports the private module {target}")
    return modules, edges, private


def _cycles(nodes, edges) -> list:
    """The strongly connected components of more than one module (Tarjan), each sorted."""
    index, low, stack, on_stack, found = {}, {}, [], set(), []

    def visit(v):
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        for w in sorted(edges.get(v, ())):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                component.append(w)
                if w == v:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    for v in sorted(nodes):
        if v not in index:
            visit(v)
    return found


def test_the_packages_have_no_import_cycle():
    modules, edges, _ = _graph()
    assert _cycles(modules, edges) == []


def test_no_module_imports_another_modules_private_names():
    assert _graph()[2] == []


def test_the_graph_reader_sees_cycles_and_private_imports(tmp_path, monkeypatch):
    """The checks above fail on a cycle through a lazy import and on a private name taken across modules."""
    for relative, text in {
        "lnn/__init__.py": "",
        "lnn/a.py": "from lnn.b import _helper\n",
        "lnn/b.py": "import importlib\n_LAZY = {'x': 'lnn.c'}\n\ndef f():\n    importlib.import_module(_LAZY['x'])\n",
        "lnn/c.py": "def g():\n    from lnn import a\n",
        "simulations/__init__.py": "",
    }.items():
        path = tmp_path / relative
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    monkeypatch.setattr(__import__(__name__), "BASE", tmp_path)
    modules, edges, private = _graph()
    assert _cycles(modules, edges) == [["lnn.a", "lnn.b", "lnn.c"]]
    assert private == ["lnn.a imports _helper from lnn.b"]
