"""Fixtures of the `aeron_c` tests: current Aeron's C client and C media driver (pyaeron) in child
processes beside aeronio (tests/support/aeron_c.py)."""

from collections.abc import Iterator

import pytest

from tests.support import ports
from tests.support.aeron_c import PyaeronPython, spawn_role
from tests.support.child import Child
from tests.support.procs import Procs


@pytest.fixture(scope="session")
def pyaeron_interpreter() -> Iterator[PyaeronPython]:
    interpreter = PyaeronPython()
    yield interpreter
    interpreter.close()


class AeronC(Procs):
    """pyaeron roles (and aeronio children, as `Procs`) of one test, stopped at its end."""

    def __init__(self, python: str):
        super().__init__()
        self.python = python

    def pyaeron(self, role: str, name: str | None = None, **kwargs) -> Child:
        child = spawn_role(self.python, role, name, **kwargs)
        self.children.append(child)
        return child


@pytest.fixture
def aeron_c(pyaeron_interpreter: PyaeronPython) -> Iterator[AeronC]:
    procs = AeronC(pyaeron_interpreter.get())
    try:
        yield procs
    finally:
        procs.close()


@pytest.fixture
def free_port() -> int:
    """A port for a channel (tests/support/ports.py says how it is chosen)."""
    return ports.free_port()
