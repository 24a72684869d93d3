"""Spark for aeronio: an archive's recordings as a batch and streaming source (format
"aeronio"), and a sink that publishes rows. See docs/spark.md.

    import aeronio.spark
    aeronio.spark.register(spark)
    df = spark.read.format("aeronio").option("archive", "rec").load()

Needs the `spark` extra: `pip install "aeronio[spark]"` (PySpark 4.3+, pyarrow, pandas).
"""

from __future__ import annotations

try:
    import pyarrow  # noqa: F401
    from pyspark.sql.datasource import DataSource  # noqa: F401
except ImportError as e:  # pragma: no cover - depends on the environment
    raise ImportError(
        f'aeronio.spark needs PySpark 4.3+ and pyarrow: pip install "aeronio[spark]" ({e})'
    ) from e

from aeronio.spark.decode import raw_schema
from aeronio.spark.recordings import DataLossError, SourceError
from aeronio.spark.source import AeronioDataSource, AeronioDataSourceNoPushdown

FILTER_PUSHDOWN_CONF = "spark.sql.python.filterPushdown.enabled"


def register(spark, *, filter_pushdown: bool = True) -> None:
    """Register the "aeronio" format with the session. With `filter_pushdown` (the default)
    this turns on the session's spark.sql.python.filterPushdown.enabled, so that filters on
    recording_id, session_id, stream_id, channel and position choose what is read; without it
    the session's setting is left alone and Spark filters the rows read."""
    if filter_pushdown:
        spark.conf.set(FILTER_PUSHDOWN_CONF, "true")
        spark.dataSource.register(AeronioDataSource)
    else:
        spark.dataSource.register(AeronioDataSourceNoPushdown)


__all__ = [
    "FILTER_PUSHDOWN_CONF",
    "AeronioDataSource",
    "AeronioDataSourceNoPushdown",
    "DataLossError",
    "SourceError",
    "raw_schema",
    "register",
]
