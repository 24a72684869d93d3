"""What the built distributions carry besides the modules: the types (py.typed and the core's
stub, so that users' type checkers and IDEs see them) and, in the sdist, the Cython source the
core is built from."""

import subprocess
import sys
import tarfile
from pathlib import Path

ROOT = Path(__file__).parents[2]
TYPES = ["aeronio/py.typed", "aeronio/_core.pyi"]


def setup(*arguments: str) -> None:
    subprocess.run(
        [sys.executable, "setup.py", "-q", *arguments], cwd=ROOT, check=True, capture_output=True
    )


def test_the_wheel_carries_the_types(tmp_path: Path):
    setup("build_py", "--build-lib", str(tmp_path))  # what the wheel's aeronio/ is made of
    for name in TYPES:
        assert (tmp_path / name).read_bytes() == (ROOT / name).read_bytes(), name


def test_the_sdist_carries_the_types_and_the_cython_source(tmp_path: Path):
    setup("egg_info", "--egg-base", str(tmp_path), "sdist", "--dist-dir", str(tmp_path))
    (sdist,) = tmp_path.glob("aeronio-*.tar.gz")
    with tarfile.open(sdist) as tar:
        names = {name.split("/", 1)[1] for name in tar.getnames() if "/" in name}
    cython = [
        str(path.relative_to(ROOT))
        for pattern in ("*.pyx", "*.pxi", "*.pxd", "*.h")
        for path in (ROOT / "cython_core").glob(pattern)
    ]
    assert {"cython_core/_core.pyx", "cython_core/atomics.pxd"} <= set(cython)
    assert not set(TYPES + cython) - names, sorted(set(TYPES + cython) - names)
    assert "build_support/backend.py" in names  # pyproject.toml's build backend
    assert not [name for name in names if name.endswith(".jar")]  # built, never shipped
    assert not [name for name in names if name.endswith(".c")]  # Cython's output, regenerated
