"""The JVM reader's jar (aeronio/spark/jar.py): built into the package by the project's build
(setup.py's build_jar, and without javac the build goes on saying so)."""

from __future__ import annotations

import os
import runpy
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

from tests.spark.conftest import _spark_or_skip

ROOT = Path(__file__).parents[2]


@pytest.fixture(scope="module")
def pyspark_jars():
    _spark_or_skip()
    from aeronio.spark import jar

    return jar.spark_jars()


def setup_py(build_lib: Path, env: dict[str, str] | None = None) -> subprocess.CompletedProcess:
    """What a wheel's aeronio/ is made of, besides the core: setup.py's build_py and
    build_jar into `build_lib`."""
    return subprocess.run(
        [sys.executable, "setup.py", "build_py", "--build-lib", str(build_lib), "build_jar"],
        cwd=ROOT, env=env, capture_output=True, text=True, timeout=300, check=False,
    )  # fmt: skip


def without_javac(tmp: Path) -> dict[str, str]:
    """The environment with a PATH of every program of this host but javac (symlinks in
    `tmp`/bin), and no JAVA_HOME: a JRE's."""
    bin_dir = tmp / "bin"
    bin_dir.mkdir()
    for directory in os.environ["PATH"].split(os.pathsep):
        if not os.path.isdir(directory):
            continue
        for entry in os.scandir(directory):
            link = bin_dir / entry.name
            if entry.name != "javac" and not link.exists() and os.access(entry.path, os.X_OK):
                link.symlink_to(entry.path)
    env = {k: v for k, v in os.environ.items() if k not in ("JAVA_HOME", "PYTHONPATH")}
    env["PATH"] = str(bin_dir)
    return env


# -- the build -------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def built(pyspark_jars, tmp_path_factory):
    """The package as a wheel lays it out: build_py and build_jar's output, and the core."""
    from aeronio.spark import jar

    if jar.javac() is None:
        pytest.skip("building the jar needs javac (a JDK 17+): apt-get install openjdk-17-jdk")
    lib = tmp_path_factory.mktemp("wheel")
    done = setup_py(lib)
    assert done.returncode == 0, done.stderr
    assert "aeronio: built" in done.stderr
    import aeronio._core

    shutil.copy(aeronio._core.__file__, lib / "aeronio")
    return lib


@pytest.mark.slow
def test_the_build_puts_a_jar_for_its_spark_into_the_package(built, pyspark_jars):
    import pyspark

    from aeronio.spark import jar

    shipped = built / "aeronio" / "spark" / "aeronio-spark.jar"
    assert jar.manifest(shipped) == {
        "Manifest-Version": "1.0",
        "Spark-Version": pyspark.__version__,
        "Aeronio-Source-SHA256": jar.source_digest(),
    }
    with zipfile.ZipFile(shipped) as z:
        names = set(z.namelist())
    sources = {p.stem for p in (ROOT / "aeronio" / "spark" / "java").glob("*.java")}
    assert {f"io/aeronio/spark/{s}.class" for s in sources} <= names
    assert (built / "aeronio" / "spark" / "java" / "FixedScan.java").exists()  # the fallback's


@pytest.mark.slow
def test_without_javac_the_build_goes_on_and_says_so(pyspark_jars, tmp_path):
    done = setup_py(tmp_path / "lib", without_javac(tmp_path))
    assert done.returncode == 0, done.stderr
    assert "aeronio: the Spark jar is not built (compiling the JVM reader needs javac" in (
        done.stderr
    )
    assert (tmp_path / "lib" / "aeronio" / "spark" / "jvm.py").exists()
    assert not list((tmp_path / "lib").rglob("*.jar"))


@pytest.mark.slow
def test_the_documented_command_rebuilds_the_jar_in_place(built, tmp_path):
    lib = shutil.copytree(built, tmp_path / "lib")
    shipped = lib / "aeronio" / "spark" / "aeronio-spark.jar"
    shipped.unlink()
    command = [sys.executable, "-m", "aeronio.spark.build_jar"]
    env = {**os.environ, "PYTHONPATH": str(lib)}
    done = subprocess.run(command, cwd=tmp_path, env=env, capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith(f"built {shipped} against Spark ")
    from aeronio.spark import jar

    made = built / "aeronio" / "spark" / "aeronio-spark.jar"
    assert jar.manifest(shipped) == jar.manifest(made)
    shipped.unlink()
    env = without_javac(tmp_path) | {"PYTHONPATH": str(lib)}
    done = subprocess.run(command, cwd=tmp_path, env=env, capture_output=True, text=True)
    assert done.returncode == 1 and not shipped.exists()
    assert "aeronio.spark.build_jar: compiling the JVM reader needs javac" in done.stderr


def test_the_build_asks_for_pyspark_only_where_javac_is(pyspark_jars, tmp_path, monkeypatch):
    monkeypatch.chdir(ROOT)
    backend = runpy.run_path(str(ROOT / "build_support" / "backend.py"))
    for hook in ("get_requires_for_build_wheel", "get_requires_for_build_editable"):
        assert "pyspark>=4.3,<5" in backend[hook]()
    env = without_javac(tmp_path)
    monkeypatch.setenv("PATH", env["PATH"])
    monkeypatch.delenv("JAVA_HOME", raising=False)
    for hook in ("get_requires_for_build_wheel", "get_requires_for_build_editable"):
        assert not [r for r in backend[hook]() if "pyspark" in r]
