"""The JVM side of the Spark source: its jar, and `read_fixed(spark, schema, archive=DIR, ...)`.

A Python data source hands Spark Arrow batches through a Python worker, and that hand-over
alone costs more than Spark's whole Parquet scan (docs/benchmarks.md). So batch reads of an
archive directory run in the JVM (`java/*.java`): `spark.read.format("aeronio")` is the
DataSource V2 `io.aeronio.spark.AeronioSource` (registered by the jar's
META-INF/services), which plans from the options alone and reads each partition's segment file
into columnar batches, in batch and as a stream; what it does not read (writes, remote
archives, msgpack) it hands to the Python source, registered as `PYTHON_NAME`. `read_fixed`
is that source's fixed-layout read, its options and schema checked when it is called.

The reader's jar is the package's own (aeronio.spark.jar: built with the package, checked here
against the running Spark), else compiled from the package's Java source against the running
Spark's jars on first use (`jar`: it needs javac, a JDK 17+) and cached under `cache_dir()`; it
is added to the session and so shipped to its executors (`enable`).
"""

from __future__ import annotations

import hashlib
import os
from pathlib import Path
from typing import TYPE_CHECKING

from pyspark.sql.types import StructType

from aeronio.spark import captured
from aeronio.spark import jar as built
from aeronio.spark.decode import Decoder
from aeronio.spark.options import read_options
from aeronio.spark.recordings import SourceError
from aeronio.spark.source import PYTHON_NAME

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession

CLASS = "io.aeronio.spark.AeronioSource"
SOURCES = built.SOURCES
SHIPPED = built.SHIPPED
_ENABLED = "spark.aeronio.jar"  # a session's setting: the jar it has added


def cache_dir() -> Path:
    """Where readers compiled on first use are kept: $AERONIO_CACHE, else
    $XDG_CACHE_HOME/aeronio or ~/.cache/aeronio."""
    root = os.environ.get("AERONIO_CACHE")
    if root:
        return Path(root)
    return Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "aeronio"


def jar(spark_version: str) -> Path:
    """The reader's jar for Spark `spark_version` (the session's): the package's (`SHIPPED`,
    built with it) if it was compiled from this source against the same Spark major.minor,
    else one compiled against the jars of SPARK_HOME or of the pyspark package on first use
    (needs javac) and cached."""
    digest = built.source_digest(SOURCES)
    unfit = _unfit(spark_version, digest)
    if unfit is None:
        return SHIPPED
    key = hashlib.sha256(f"{spark_version}\0{digest}".encode()).hexdigest()[:16]
    target = cache_dir() / "spark" / f"aeronio-spark-{key}.jar"
    if target.exists():
        return target
    if built.javac() is None:
        raise SourceError(
            f'the JVM reader (format("aeronio"), read_fixed): {unfit}; compiling it for '
            "this Spark needs javac (a JDK 17+, such as Debian's openjdk-17-jdk-headless) on "
            f'PATH or in $JAVA_HOME/bin; format("{PYTHON_NAME}") needs no JDK'
        )
    try:
        return built.build(target, built.spark_jars(), spark_version, SOURCES)
    except built.JarError as e:
        raise SourceError(f"the JVM reader: {e}") from e


def _unfit(spark_version: str, digest: str) -> str | None:
    """Why the package's jar cannot serve Spark `spark_version`; None if it can."""
    if not SHIPPED.exists():
        return f"the package has no {SHIPPED.name} (built with it where javac is at hand)"
    attributes = built.manifest(SHIPPED)
    if attributes.get(built.SOURCE_DIGEST) != digest:
        return (
            f"the package's {SHIPPED.name} was compiled from other Java source than the "
            "package's (rebuild it: python -m aeronio.spark.build_jar)"
        )
    version = attributes.get(built.SPARK_VERSION, "unknown")
    if version.split(".")[:2] != spark_version.split(".")[:2]:
        return (
            f"the package's {SHIPPED.name} was compiled against Spark {version}, this session "
            f"runs Spark {spark_version}"
        )
    return None


def enable(spark: SparkSession) -> None:
    """Add the reader's jar (`jar`) to the session once (`ADD JAR`: the driver's class loader,
    and SparkContext.addJar, which ships it to the executors), and let every JVM thread that
    serves Python find it: Spark looks data sources up in a thread's context class loader, and
    PySpark gives each Python thread a JVM thread of its own (`_serve_python_with`)."""
    path = str(jar(spark.version))
    session = spark._jsparkSession
    loader = session.sharedState().jarClassLoader()
    if spark.conf.get(_ENABLED, None) != path:
        session.sessionState().resourceLoader().addJar(path)
        spark.conf.set(_ENABLED, path)
        _serve_python_with(spark, loader)
    # PySpark types _jvm Optional; a classic session (the one this runs in) always has it.
    thread = spark._jvm.java.lang.Thread.currentThread()  # type: ignore[union-attr]
    thread.setContextClassLoader(loader)


def _serve_python_with(spark: SparkSession, loader: object) -> None:
    """Make `loader` the context class loader of Py4J's threads in the JVM: the server's, which
    starts a thread for each Python thread that connects (or reconnects after a reset), the new
    thread taking its creator's loader, and those started already. Without it a query from a
    thread other than the one that registered fails with DATA_SOURCE_NOT_FOUND."""
    threads = spark._jvm.java.lang.Thread  # type: ignore[union-attr]
    for thread in threads.getAllStackTraces().keySet():
        stack = thread.getStackTrace()
        depth = len(stack)  # the frame above Thread.run: the thread's own run()
        if depth >= 2 and stack[depth - 2].getClassName().startswith("py4j."):
            thread.setContextClassLoader(loader)


def _text(value: object) -> str:
    """An option's value as the source takes it (a list or tuple: comma-separated)."""
    if isinstance(value, (list, tuple)):
        return ",".join(str(v) for v in value)
    return str(value)


def read_fixed(
    spark: SparkSession,
    schema: StructType | str,
    archive: str | os.PathLike[str] | None = None,
    **options: object,
) -> DataFrame:
    """A DataFrame of the fixed-layout records of an archive's recordings, read in the JVM:
    `spark.read.format("aeronio").option("layout", "fixed").schema(schema)` with the batch
    options given here (archive or path, recording_ids (or a list), channel, stream_id,
    metadata_columns, driver_dir, start_position, end_position, max_partition_bytes,
    fail_on_data_loss, push_down_aggregates), the options and the schema checked at this call.
    It needs no `register`: the reader is the package's jar, or compiled on first use (`jar`)."""
    struct = StructType.fromDDL(schema) if isinstance(schema, str) else schema
    if not isinstance(struct, StructType):
        raise SourceError(f"schema {schema!r} is not a struct of columns")
    given = {k.lower(): _text(v) for k, v in options.items() if v is not None}
    given.setdefault("layout", "fixed")
    if archive is not None:
        given["archive"] = str(archive)
    opts = read_options(given, streaming=False)
    if opts.layout != "fixed":
        raise SourceError(f"read_fixed reads the fixed layout, not option layout {opts.layout!r}")
    if opts.remote is not None:
        raise SourceError(
            "read_fixed reads an archive directory; a remote archive (option archive_control) "
            'is read by spark.read.format("aeronio")'
        )
    Decoder(struct, "fixed", opts.metadata_columns)  # the schema's errors, here
    enable(spark)
    captured.install()  # the read's own errors as SourceError / DataLossError
    return spark.read.format(CLASS).schema(struct).options(**given).load()
