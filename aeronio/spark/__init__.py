"""Spark for aeronio: an archive's recordings as a batch and streaming source (format
"aeronio"), and a sink that publishes rows. See docs/spark.md.

    import aeronio.spark
    aeronio.spark.register(spark)
    df = spark.read.format("aeronio").option("archive", "rec").load()

Needs the `spark` extra: `pip install "aeronio[spark]"` (PySpark 4.3+, pyarrow, pandas).
"""

from __future__ import annotations

import os
import sys
from typing import TYPE_CHECKING

try:
    import pyarrow  # noqa: F401
    from pyspark.sql.datasource import DataSource  # noqa: F401
except ImportError as e:  # pragma: no cover - depends on the environment
    raise ImportError(
        f'aeronio.spark needs PySpark 4.3+ and pyarrow: pip install "aeronio[spark]" ({e})'
    ) from e

from aeronio.spark import captured
from aeronio.spark.decode import raw_schema
from aeronio.spark.jvm import enable, read_fixed
from aeronio.spark.recordings import DataLossError, SourceError
from aeronio.spark.source import AeronioDataSource

if TYPE_CHECKING:
    from pyspark.sql import SparkSession


def register(spark: SparkSession) -> None:
    """Register the "aeronio" format with the session: the JVM source's jar (`jvm.enable`),
    and the Python source it hands writes, remote archives and the msgpack layout to (as
    "aeronio_python"). Its options choose what is read (recordings, positions); Spark
    applies a query's filters to the rows read. Both sources' errors then raise as
    `SourceError` / `DataLossError` (`captured`)."""
    spark.dataSource.register(AeronioDataSource)
    enable(spark)
    captured.install()


# What Spark needs to run on one host, whatever the host's name resolves to: the driver on the
# loopback address, no web UI, a small shuffle; and, for a busy host, Python workers' socket
# timeout (connecting, authenticating and a planning worker's reads: 15 s by default) raised.
# (A new Python worker must still connect back within 10 s: PySpark 4.3 fixes that wait.)
LOCAL_CONF = {
    "spark.driver.host": "127.0.0.1",
    "spark.driver.bindAddress": "127.0.0.1",
    "spark.ui.enabled": "false",
    "spark.ui.showConsoleProgress": "false",
    "spark.sql.shuffle.partitions": "2",
    "spark.python.authenticate.socketTimeout": "120s",
}


def local_session(
    master: str = "local[2]",
    app_name: str = "aeronio",
    *,
    conf: dict[str, str] | None = None,
    log_level: str = "ERROR",
) -> SparkSession:
    """A SparkSession on this host with the "aeronio" format registered (`register`): the
    driver on 127.0.0.1 (SPARK_LOCAL_IP too), Spark's Python workers on this interpreter
    (PYSPARK_PYTHON, so that they import the same aeronio), `LOCAL_CONF` and then `conf`
    (Spark settings that add to or override it). Environment variables already set are kept."""
    os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    os.environ.setdefault("PYSPARK_DRIVER_PYTHON", sys.executable)
    from pyspark.sql import SparkSession

    builder = SparkSession.builder.master(master).appName(app_name)
    for key, value in (LOCAL_CONF | (conf or {})).items():
        builder = builder.config(key, value)
    session = builder.getOrCreate()
    session.sparkContext.setLogLevel(log_level)
    register(session)
    return session


__all__ = [
    "LOCAL_CONF",
    "AeronioDataSource",
    "DataLossError",
    "SourceError",
    "local_session",
    "raw_schema",
    "read_fixed",
    "register",
]
