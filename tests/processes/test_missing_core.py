"""`import aeronio` from a source tree whose compiled core was never built says how to build it,
instead of a bare ModuleNotFoundError."""

from __future__ import annotations

import shutil
import subprocess
import sys
import sysconfig
from pathlib import Path

import aeronio

PACKAGE = Path(aeronio.__file__).parent


def import_from(tree: Path, code: str) -> subprocess.CompletedProcess:
    """`code` run with the package copy in `tree` first and the installed dependencies, without
    site's .pth files (an editable install's finder would find the checkout's core)."""
    paths = [str(tree), sysconfig.get_paths()["purelib"], sysconfig.get_paths()["platlib"]]
    return subprocess.run(
        [sys.executable, "-S", "-c", code],
        cwd=tree,
        env={"PYTHONPATH": ":".join(paths), "PATH": "/usr/bin:/bin"},
        capture_output=True,
        text=True,
        timeout=60,
    )


def test_import_without_the_compiled_core_says_how_to_build_it(tmp_path):
    shutil.copytree(PACKAGE, tmp_path / "aeronio", ignore=shutil.ignore_patterns("*.so", "*.pyd"))
    run = import_from(tmp_path, "import aeronio")
    assert run.returncode == 1
    last = run.stderr.strip().splitlines()[-1]
    assert last.startswith("ImportError: aeronio's compiled core (aeronio._core) is not built")
    assert "pip install" in last and "build_ext --inplace" in last
    assert "ModuleNotFoundError" not in run.stderr  # `from None`: one clear error


def test_the_control_case_imports(tmp_path):
    shutil.copytree(PACKAGE, tmp_path / "aeronio")
    run = import_from(tmp_path, "import aeronio; print(aeronio.connect.__name__)")
    assert run.returncode == 0, run.stderr
    assert run.stdout.strip() == "connect"
