"""Current Aeron (1.53) for the `aeron_c` tests: an interpreter with pyaeron (the Aeron C client and
an embeddable C media driver) and its roles as child processes (tests/support/pyaeron_roles.py).

pyaeron 0.1.0 needs CPython 3.12 or later; aeronio's tests may run on 3.11, so pyaeron runs in a
child on an interpreter of its own:

- `$AERONIO_PYAERON_PYTHON`, when set: an interpreter that imports pyaeron already (a fast loop);
- else a virtual environment made once per test session in a temporary directory (removed at the
  session's end) from the first Python 3.12+ found (`python3.12`, `python3.13` on PATH, or pyenv's
  3.12 / 3.13 versions), with `pip install pyaeron==0.1.0` from the package registry.

Without either, the tests skip, saying what is missing.
"""

from __future__ import annotations

import glob
import json
import os
import shutil
import subprocess
import tempfile

from tests.support.child import Child

PYAERON = "pyaeron==0.1.0"
ROLES = os.path.join(os.path.dirname(os.path.abspath(__file__)), "pyaeron_roles.py")


def _base_interpreters() -> list[str]:
    """Python 3.12+ interpreters on this machine that run (a pyenv shim may not), pyenv's
    versions first."""
    pyenv_root = os.environ.get("PYENV_ROOT") or os.path.expanduser("~/.pyenv")
    found = []
    for minor in ("3.12", "3.13"):
        found += sorted(
            glob.glob(os.path.join(pyenv_root, "versions", f"{minor}.*", "bin", "python"))
        )
    found += [shutil.which(name) for name in ("python3.12", "python3.13")]
    return [path for path in found if path and _runs(path)]


def _runs(python: str) -> bool:
    try:
        return (
            subprocess.run([python, "-c", "pass"], capture_output=True, timeout=60).returncode == 0
        )
    except (OSError, subprocess.TimeoutExpired):
        return False


class PyaeronPython:
    """The interpreter that runs pyaeron's roles (made on first use, removed by `close`)."""

    def __init__(self) -> None:
        self.path: str | None = None
        self.skip_reason = ""
        self._made: str | None = None

    def get(self) -> str:
        """The interpreter's path; skips the test (saying why) when there is none."""
        import pytest  # here: bench/versus_aeron_c.py uses `find` without pytest

        path = self.find()
        if path is None:
            pytest.skip(self.skip_reason)
        return path

    def find(self) -> str | None:
        """The interpreter's path, or None (`skip_reason` says why)."""
        if self.path is None and not self.skip_reason:
            self._provide()
        return self.path

    def _provide(self) -> None:
        given = os.environ.get("AERONIO_PYAERON_PYTHON")
        if given:
            self.path = given
            return
        bases = _base_interpreters()
        if not bases:
            self.skip_reason = (
                "needs Python 3.12+ for pyaeron (python3.12 on PATH, pyenv's 3.12, or "
                "$AERONIO_PYAERON_PYTHON naming an interpreter with pyaeron installed)"
            )
            return
        self._made = tempfile.mkdtemp(prefix="aeronio-pyaeron-venv-")
        venv = os.path.join(self._made, "venv")
        python = os.path.join(venv, "bin", "python")
        try:
            subprocess.run(
                [bases[0], "-m", "venv", venv], check=True, capture_output=True, text=True
            )
            subprocess.run(
                [python, "-m", "pip", "install", "--quiet", "--disable-pip-version-check", PYAERON],
                check=True,
                capture_output=True,
                text=True,
                timeout=600,
            )
        except (subprocess.CalledProcessError, subprocess.TimeoutExpired) as e:
            output = getattr(e, "stderr", "") or ""
            self.skip_reason = f"cannot install {PYAERON} with {bases[0]}: {output.strip()[-500:]}"
            self.close()
            return
        self.path = python

    def close(self) -> None:
        if self._made is not None:
            shutil.rmtree(self._made, ignore_errors=True)
            self._made = None


def spawn_role(python: str, role: str, name: str | None = None, **kwargs) -> Child:
    """A child running `pyaeron_roles.ROLES[role](**kwargs)` on `python`, its stdin a pipe (it
    ends its role when the pipe closes: `Child.release`)."""
    return Child([python, ROLES, role, json.dumps(kwargs)], name or f"pyaeron-{role}", stdin=True)
