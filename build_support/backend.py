"""The project's build backend: setuptools', asking also for PySpark (as the spark extra names
it) where javac is at hand, so that wheel and editable builds compile the JVM reader's jar
(setup.py's `build_jar`) against Spark's jars. Without javac, with $SPARK_HOME's jars, or with
AERONIO_SPARK_JAR=0 PySpark is not fetched; without javac or with AERONIO_SPARK_JAR=0 the build
goes on without the jar (the reader is then compiled on first use where a JDK is)."""

from __future__ import annotations

import runpy
import tomllib
from pathlib import Path

from setuptools import build_meta
from setuptools.build_meta import *  # noqa: F403 (the hooks this backend does not change)


def _pyspark() -> list[str]:
    """PySpark's requirement (the spark extra's) where the jar is built against it (javac at
    hand, no $SPARK_HOME jars, no AERONIO_SPARK_JAR=0: aeronio/spark/jar.py); else none."""
    if not runpy.run_path("aeronio/spark/jar.py")["pyspark_needed"]():
        return []
    extras = tomllib.loads(Path("pyproject.toml").read_text())["project"]["optional-dependencies"]
    return [r for r in extras["spark"] if r.startswith("pyspark")]


def get_requires_for_build_wheel(config_settings: dict | None = None) -> list[str]:
    return build_meta.get_requires_for_build_wheel(config_settings) + _pyspark()


def get_requires_for_build_editable(config_settings: dict | None = None) -> list[str]:
    return build_meta.get_requires_for_build_editable(config_settings) + _pyspark()
