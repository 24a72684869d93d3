"""CI (.ci/run) checks what README.md says it does, in order: the linters, the type check of the
whole package, then the tests."""

import tomllib
from pathlib import Path

ROOT = Path(__file__).parents[2]
CHECKS = ["ruff check .", "ruff format --check .", "mypy", "python -m pytest -q"]


def test_ci_runs_the_linters_the_type_check_then_the_tests():
    lines = [line.strip() for line in (ROOT / ".ci" / "run").read_text().splitlines()]
    assert [line for line in lines if line in CHECKS] == CHECKS


def test_the_readme_names_each_check_ci_runs():
    readme = (ROOT / "README.md").read_text()
    assert all(f"`{check}`" in readme for check in CHECKS[:-1])


def test_the_type_check_covers_the_package_and_every_function_is_annotated():
    mypy = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["mypy"]
    assert mypy["files"] == ["aeronio"] and mypy["check_untyped_defs"] is True
    assert mypy["disallow_untyped_defs"] is True
