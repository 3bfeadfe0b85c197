"""The documentation cannot rot: reference entries, included snippets, the README, the tutorials.

``mkdocs build --strict`` (CI) renders the site; these tests check what a
build does not: that every public name has a reference entry that is the
object ``lnn`` exports, that every included block exists, that the README
keeps the two commands first and within 150 lines (and agrees with CI), and
that every tutorial runs in its quick mode.
"""

from __future__ import annotations

import importlib
import re

import pytest

import lnn

from conftest import ROOT, load_script

DOCS = ROOT / "docs"
ENTRY = re.compile(r"^::: ([\w.]+)\s*$", re.MULTILINE)
SNIPPET = re.compile(r'^--8<-- "([^"]+)"\s*$', re.MULTILINE)
TUTORIALS = sorted((DOCS / "tutorials").glob("*.py"))


def _entries() -> list[str]:
    """Every ``::: dotted.path`` of the API reference pages."""
    return [
        path
        for page in sorted((DOCS / "reference").glob("*.md"))
        for path in ENTRY.findall(page.read_text(encoding="utf-8"))
    ]


def _resolve(dotted: str):
    """The object a dotted path names: the longest importable module, then attributes."""
    parts = dotted.split(".")
    for cut in range(len(parts), 0, -1):
        try:
            obj = importlib.import_module(".".join(parts[:cut]))
        except ModuleNotFoundError:
            continue
        for name in parts[cut:]:
            obj = getattr(obj, name)
        return obj
    raise ModuleNotFoundError(dotted)


def test_every_public_name_has_a_reference_entry():
    documented = {id(_resolve(path)) for path in _entries()}
    missing = [name for name in lnn.__all__ if id(getattr(lnn, name)) not in documented]
    assert not missing, f"no '::: ...' entry in docs/reference/ for lnn.{missing}"
    assert "simulations" in _entries()


def test_every_reference_entry_resolves():
    for path in _entries():
        _resolve(path)  # raises ImportError / AttributeError for a stale entry


def test_every_exception_class_of_the_package_is_exported():
    import inspect
    import pkgutil

    exported = {getattr(lnn, name) for name in lnn.__all__}
    for info in pkgutil.walk_packages(lnn.__path__, "lnn."):
        if ".cli" in info.name or info.name.endswith("__main__"):
            continue  # the command line turns exceptions into messages
        module = importlib.import_module(info.name)
        for _, cls in inspect.getmembers(module, inspect.isclass):
            if (
                cls.__module__ == module.__name__
                and issubclass(cls, (Exception, Warning))
                and not cls.__name__.startswith("_")
            ):
                assert cls in exported, f"{cls.__module__}.{cls.__qualname__} is not exported from lnn"


def test_included_snippets_exist():
    for page in sorted(DOCS.rglob("*.md")):
        for target in SNIPPET.findall(page.read_text(encoding="utf-8")):
            path, _, section = target.partition(":")
            text = (ROOT / path).read_text(encoding="utf-8")
            if section and not section[0].isdigit():
                assert f"--8<-- [start:{section}]" in text, f"{page.name}: no section {target}"
                assert f"--8<-- [end:{section}]" in text, f"{page.name}: unclosed section {target}"


def test_every_tutorial_script_has_a_page_that_includes_it():
    pages = " ".join(page.read_text(encoding="utf-8") for page in (DOCS / "tutorials").glob("*.md"))
    for script in TUTORIALS:
        assert f'--8<-- "docs/tutorials/{script.name}:' in pages, script.name


def test_readme_is_short_and_starts_with_the_two_commands():
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    assert len(readme.splitlines()) <= 150
    blocks = re.findall(r"```(\w*)\n(.*?)```", readme, re.DOTALL)
    assert blocks[0] == ("bash", "pip install -e . && lnn demo\n")
    assert blocks[1] == ("bash", "pip install -e '.[test]' && python -m pytest -n auto --durations=30\n")
    ci = (ROOT / ".ci" / "run").read_text(encoding="utf-8")
    assert "python -m pip install -e '.[test]'\n" in ci and "python -m pytest -n auto --durations=30\n" in ci
    assert "mkdocs build --strict" in ci


def test_griffe_extension_rewrites_sphinx_markup():
    pytest.importorskip("griffe")
    roles = load_script(DOCS / "_ext" / "griffe_roles.py")
    assert (
        roles.markdown("see :func:`lnn.rollout` and :class:`~lnn.Trajectory`") == "see `lnn.rollout` and `Trajectory`"
    )
    table = "\n".join(
        [
            "=====  ===========",
            "name   what",
            "=====  ===========",
            "a      first",
            "       continued",
            "b      second",
            "=====  ===========",
        ]
    )
    assert roles.markdown(table).strip().splitlines() == [
        "| name | what |",
        "|---|---|",
        "| a | first continued |",
        "| b | second |",
    ]


@pytest.mark.slow
@pytest.mark.parametrize("script", TUTORIALS, ids=[path.stem for path in TUTORIALS])
def test_tutorial_runs_in_quick_mode(script, tmp_path, capsys):
    module = load_script(script)
    argv = ["--quick"]
    if "--output-dir" in script.read_text(encoding="utf-8"):
        argv += ["--output-dir", str(tmp_path)]
    #: what each tutorial must print: the training tutorials fit unforced data (and explain the
    #: IdentifiabilityWarning), the robot tutorial identifies from torques and closes a control loop
    forced = script.stem == "tutorial_robot_log"
    if forced:
        assert module.main(argv) == 0
    else:
        with pytest.warns(lnn.IdentifiabilityWarning):  # unforced data: the tutorials explain it
            assert module.main(argv) == 0
    out = capsys.readouterr().out
    written = sorted(path.name for path in tmp_path.iterdir() if path.stat().st_size > 0)
    assert written == TUTORIAL_OUTPUTS[script.stem], written
    TUTORIAL_CHECKS[script.stem](out)


def _number(pattern: str, out: str) -> list[float]:
    found = re.search(pattern, out)
    assert found, f"{pattern!r} not in the output:\n{out[-2000:]}"
    return [float(x) for x in found.groups()]


def _learned_the_double_pendulum(out: str) -> None:
    # Held-out median |qdd error| / |qdd| against the true system: an untrained model scores about 1
    # (0.97 after 2 epochs), 100 epochs about 0.37.
    (error,) = _number(r"median relative qdd error: ([0-9.]+)", out)
    assert error < 0.6, error
    (drift,) = _number(r"largest drift of the learned energy ([0-9.e+-]+) J", out)
    assert drift < 1e-3, drift  # a Lagrangian model conserves its own energy (about 28 J here)
    assert "identical accelerations True" in out


def _identified_the_robot(out: str) -> None:
    sheet, identified = (
        _number(rf"computed-torque control with the {name} model: RMS tracking error ([0-9.e+-]+) rad", out)[0]
        for name in ("data sheet", "identified")
    )
    assert identified < 0.7 * sheet, (identified, sheet)  # the identified model tracks better than the nominal


def _trained_through_rollouts(out: str) -> None:
    first, last = _number(r"own rollout loss over 3 steps: ([0-9.e+-]+) -> ([0-9.e+-]+)", out)
    assert last < first, (first, last)  # the gradient through odeint lowered the error against the truth
    (gap,) = _number(r"against solve_ivp \(DOP853\): largest \|Δq\| ([0-9.e+-]+) rad", out)
    assert gap < 1e-4, gap  # RK4 at 10 ms against an adaptive solve of the same model


#: What each tutorial's quick mode writes into --output-dir, and what its output must show.
TUTORIAL_OUTPUTS = {
    "tutorial_double_pendulum": ["double_pendulum.keras", "double_pendulum.png"],
    "tutorial_robot_log": ["data.npz", "log_0.csv", "log_1.csv", "log_2.csv", "log_3.csv", "robot.keras"],
    "tutorial_rollout_training": [],  # prints only (no --output-dir)
}
TUTORIAL_CHECKS = {
    "tutorial_double_pendulum": _learned_the_double_pendulum,
    "tutorial_robot_log": _identified_the_robot,
    "tutorial_rollout_training": _trained_through_rollouts,
}
