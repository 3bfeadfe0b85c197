"""The layout of the ``lnn.cli`` package: one module per verb, shared helpers in ``_common`` only."""

from __future__ import annotations

import ast
import importlib
import subprocess
import sys
from pathlib import Path

import pytest

import lnn.cli

PACKAGE = Path(lnn.cli.__file__).parent
#: Modules of the package that are not verbs.
NOT_VERBS = {"__init__", "__main__", "_common"}
VERBS = sorted(path.stem for path in PACKAGE.glob("*.py") if path.stem not in NOT_VERBS)


def _imported_modules(path: Path) -> set[str]:
    """Every module that ``path`` imports, anywhere in the file, as an absolute dotted name.

    ``from X import a, b`` yields ``X``, ``X.a`` and ``X.b`` (``a`` may be a submodule).
    """
    package = f"lnn.cli.{path.stem}".rsplit(".", 1)[0]
    names = set()
    for node in ast.walk(ast.parse(path.read_text(), filename=str(path))):
        if isinstance(node, ast.Import):
            names.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                parent = package.rsplit(".", node.level - 1)[0] if node.level > 1 else package
                base = f"{parent}.{base}" if base else parent
            names.add(base)
            names.update(f"{base}.{alias.name}" for alias in node.names)
    return names


def test_the_package_has_the_verbs_of_the_parser():
    assert VERBS == sorted(name.rsplit(".", 1)[1] for name in lnn.cli.COMMAND_MODULES)
    assert all(name.startswith("lnn.cli.") for name in lnn.cli.COMMAND_MODULES)
    old = sorted(path.name for path in PACKAGE.parent.glob("cli*.py"))
    assert old == [], f"old CLI modules left next to the package: {old}"


@pytest.mark.parametrize("verb", VERBS)
def test_each_verb_module_has_register_and_run(verb):
    module = importlib.import_module(f"lnn.cli.{verb}")
    assert callable(getattr(module, "register", None)), f"lnn.cli.{verb} has no register()"
    assert callable(getattr(module, "run", None)), f"lnn.cli.{verb} has no run()"


@pytest.mark.parametrize("verb", VERBS)
def test_verb_modules_import_helpers_only_from_common(verb):
    imported = _imported_modules(PACKAGE / f"{verb}.py")
    from_cli = {name for name in imported if name == "lnn.cli" or name.startswith("lnn.cli.")}
    allowed = {"lnn.cli._common"} | {n for n in from_cli if n.startswith("lnn.cli._common.")}
    assert from_cli <= allowed, f"lnn.cli.{verb} imports {sorted(from_cli - allowed)}"


def test_common_imports_no_verb():
    imported = _imported_modules(PACKAGE / "_common.py")
    assert not {name for name in imported if name == "lnn.cli" or name.startswith("lnn.cli.")}


def test_the_import_checker_sees_every_form_of_import(tmp_path):
    source = (
        "import lnn.cli.plot\n"
        "from lnn.cli import train\n"
        "def f():\n    from .rollout import make_system\n    from . import demo\n"
    )
    path = tmp_path / "fake.py"
    path.write_text(source)
    imported = _imported_modules(path)
    for name in ("lnn.cli.plot", "lnn.cli.train", "lnn.cli.rollout", "lnn.cli.demo"):
        assert name in imported


def test_public_names_keep_working():
    from lnn.cli._common import ProgressBar

    assert lnn.cli.ProgressBar is ProgressBar
    assert callable(lnn.cli.main) and callable(lnn.cli.build_parser)


def _help_of(verb: str) -> str:
    """What ``lnn VERB --help`` prints."""
    import contextlib
    import io

    text = io.StringIO()
    with contextlib.redirect_stdout(text), pytest.raises(SystemExit):
        lnn.cli.build_parser().parse_args([verb, "--help"])
    return text.getvalue()


def test_building_the_parser_imports_no_tensorflow():
    """``lnn --help`` and the verbs without TensorFlow (``systems``, ``simulate``, ``import``) build every verb's
    parser: one help that imported the models imported TensorFlow (seconds, and its C++ start-up log on the
    terminal) for all of them."""
    code = (
        "import contextlib, io, sys\n"
        "import lnn.cli\n"
        "for verb in [None] + [name.rsplit('.', 1)[1].rstrip('_') for name in lnn.cli.COMMAND_MODULES]:\n"
        "    with contextlib.redirect_stdout(io.StringIO()), contextlib.suppress(SystemExit):\n"
        "        lnn.cli.build_parser().parse_args(['--help'] if verb is None else [verb, '--help'])\n"
        "print('tensorflow' in sys.modules, 'keras' in sys.modules)\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.split() == ["False", "False"], out.stderr[-2000:]


def test_the_help_names_what_the_library_uses():
    """The names the parser shows without importing the models are the registry's and ``identify``'s."""
    from lnn._catalog import BUILT_IN_FORCES, DEFAULT_FRICTION
    from lnn.identification import DEFAULT_FRICTION as identify_default
    from lnn.models.forces import force_names

    assert force_names()[: len(BUILT_IN_FORCES)] == BUILT_IN_FORCES
    assert identify_default == DEFAULT_FRICTION
    text = " ".join(_help_of("identify").split())
    assert all(name in text for name in BUILT_IN_FORCES) and DEFAULT_FRICTION in text.replace("+ ", "+")


def test_the_librarys_warnings_reach_the_terminal_as_one_line(monkeypatch, capsys):
    import warnings

    import lnn.cli.systems

    def run(args):
        warnings.warn("the model left its training states", lnn.NoveltyWarning, stacklevel=2)
        return 0

    monkeypatch.setattr(lnn.cli.systems, "run", run)
    assert lnn.cli.main(["systems"]) == 0
    assert capsys.readouterr().err == "lnn systems: NoveltyWarning: the model left its training states\n"
