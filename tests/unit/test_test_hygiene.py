"""The tests share their helpers: no test file defines its own polling wait (tests/support/procs.py
has `wait_until`, `await_until`, `wait_for_image`), and only tests/support/driver_internals.py
reaches into a client's embedded driver, so a change of the driver's wiring is one change; the
tests that read code parse it with tests/support/python_source.py's `parse`."""

import ast
import gc
import traceback
from pathlib import Path

from tests.support.python_source import parse

TESTS = Path(__file__).parents[1]
SUPPORT = TESTS / "support"
DATA = TESTS / "data"  # scripts that made the recorded data, run on their own
SHARED_WAITS = {"wait_until", "await_until", "until", "wait_for_image", "wait_connected"}
OWNED_DRIVER = "_owned" + "_driver"  # spelled apart, so this file does not name it
DRIVER_INTERNALS = SUPPORT / "driver_internals.py"
RAW_PARSE = "ast." + "parse("  # spelled apart, so this file does not call it
PYTHON_SOURCE = SUPPORT / "python_source.py"


def own_waits(path: Path) -> list[str]:
    """`line: def name` of each function in `path` named like a shared wait."""
    return [
        f"{node.lineno}: def {node.name}"
        for node in ast.walk(parse(path))
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef) and node.name in SHARED_WAITS
    ]


def lines_naming(path: Path, name: str) -> list[int]:
    """The lines of `path` that hold `name`."""
    lines = path.read_text().splitlines()
    return [number for number, line in enumerate(lines, 1) if name in line]


def test_no_test_file_defines_its_own_wait():
    found = [
        f"{path.relative_to(TESTS)}:{line}"
        for path in sorted(TESTS.rglob("*.py"))
        if SUPPORT not in path.parents and DATA not in path.parents
        for line in own_waits(path)
    ]
    assert found == [], "use tests/support/procs.py's waits:\n" + "\n".join(found)


def naming_outside(owner: Path, name: str) -> list[str]:
    """`file:line` of each line holding `name` in a test file other than `owner`."""
    return [
        f"{path.relative_to(TESTS)}:{number}"
        for path in sorted(TESTS.rglob("*.py"))
        if path != owner
        for number in lines_naming(path, name)
    ]


def test_only_driver_internals_reaches_into_a_clients_driver():
    found = naming_outside(DRIVER_INTERNALS, OWNED_DRIVER)
    assert found == [], "use tests/support/driver_internals.py:\n" + "\n".join(found)


def test_only_python_source_parses_with_ast():
    found = naming_outside(PYTHON_SOURCE, RAW_PARSE)
    assert found == [], "use tests/support/python_source.py's parse:\n" + "\n".join(found)


def test_the_checks_find_what_they_refuse(tmp_path):
    bad = tmp_path / "test_bad.py"
    bad.write_text(
        f"async def wait_until(p):\n    return p\n\n\nx = aeron.{OWNED_DRIVER}\n{RAW_PARSE}'')\n"
    )
    assert own_waits(bad) == ["1: def wait_until"]
    assert lines_naming(bad, OWNED_DRIVER) == [5]
    assert lines_naming(bad, RAW_PARSE) == [6]


class _Traced:
    """An object in a cycle whose finaliser formats a traceback, as Py4J's do when it logs a
    reset connection (3.11's traceback parses the source line for its carets)."""

    def __init__(self) -> None:
        self.me = self

    def __del__(self) -> None:
        try:
            raise RuntimeError("the JVM reset the connection")
        except RuntimeError:
            traceback.format_exc()


def test_a_parse_holds_while_finalisers_parse():
    source = (TESTS / "driver" / "test_data_path.py").read_text()
    threshold = gc.get_threshold()
    gc.set_threshold(50)  # a collection within each parse of `source`
    try:
        for _ in range(20):
            cycles = [_Traced() for _ in range(30)]
            del cycles
            assert isinstance(parse(source, "test_data_path.py"), ast.Module)
    finally:
        gc.set_threshold(*threshold)
        gc.collect()
