"""The tests share their helpers: no test file defines its own polling wait (tests/support/procs.py
has `wait_until`, `await_until`, `wait_for_image`), and only tests/support/driver_internals.py
reaches into a client's embedded driver, so a change of the driver's wiring is one change."""

import ast
from pathlib import Path

TESTS = Path(__file__).parents[1]
SUPPORT = TESTS / "support"
DATA = TESTS / "data"  # scripts that made the recorded data, run on their own
SHARED_WAITS = {"wait_until", "await_until", "until", "wait_for_image", "wait_connected"}
OWNED_DRIVER = "_owned" + "_driver"  # spelled apart, so this file does not name it
DRIVER_INTERNALS = SUPPORT / "driver_internals.py"


def own_waits(path: Path) -> list[str]:
    """`line: def name` of each function in `path` named like a shared wait."""
    return [
        f"{node.lineno}: def {node.name}"
        for node in ast.walk(ast.parse(path.read_text(), str(path)))
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef) and node.name in SHARED_WAITS
    ]


def reaches(path: Path) -> list[int]:
    """The lines of `path` that name the client's embedded driver."""
    lines = path.read_text().splitlines()
    return [number for number, line in enumerate(lines, 1) if OWNED_DRIVER in line]


def test_no_test_file_defines_its_own_wait():
    found = [
        f"{path.relative_to(TESTS)}:{line}"
        for path in sorted(TESTS.rglob("*.py"))
        if SUPPORT not in path.parents and DATA not in path.parents
        for line in own_waits(path)
    ]
    assert found == [], "use tests/support/procs.py's waits:\n" + "\n".join(found)


def test_only_driver_internals_reaches_into_a_clients_driver():
    found = [
        f"{path.relative_to(TESTS)}:{number}"
        for path in sorted(TESTS.rglob("*.py"))
        if path != DRIVER_INTERNALS
        for number in reaches(path)
    ]
    assert found == [], "use tests/support/driver_internals.py:\n" + "\n".join(found)


def test_the_checks_find_what_they_refuse(tmp_path):
    bad = tmp_path / "test_bad.py"
    bad.write_text(f"async def wait_until(p):\n    return p\n\n\nx = aeron.{OWNED_DRIVER}\n")
    assert own_waits(bad) == ["1: def wait_until"]
    assert reaches(bad) == [5]
