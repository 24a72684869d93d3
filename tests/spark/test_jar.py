"""The JVM reader's jar (aeronio/spark/jar.py): built into the package by the project's build
(setup.py's build_jar, and without javac the build goes on saying so), checked against the
running Spark (its version and the package's Java source) with the first-use compile as the
fallback, and read through with a JRE alone (no javac) by executors in JVMs of their own."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import venv
import zipfile
from pathlib import Path

import numpy as np
import pytest

from tests.spark.conftest import SEGMENT, TEST_CONF, _spark_or_skip

ROOT = Path(__file__).parents[2]
RECORD = np.dtype([("ts", "<i8"), ("price", "<f8")])


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


def a_jar(path: Path, attributes: dict[str, str]) -> Path:
    """A jar of nothing but a manifest of `attributes`."""
    text = "".join(f"{k}: {v}\r\n" for k, v in {"Manifest-Version": "1.0", **attributes}.items())
    with zipfile.ZipFile(path, "w") as z:
        z.writestr("META-INF/MANIFEST.MF", text)
    return path


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
    assert (built / "aeronio" / "spark" / "java" / "AeronioSource.java").exists()  # the fallback's


@pytest.mark.slow
def test_the_jar_carries_the_sources_resources(pyspark_jars, tmp_path):
    from aeronio.spark import jar

    if jar.javac() is None:
        pytest.skip("building the jar needs javac (a JDK 17+)")
    sources = tmp_path / "java"
    (sources / "META-INF" / "services").mkdir(parents=True)
    (sources / "Hello.java").write_text("package io.aeronio.spark; public class Hello {}\n")
    service = "META-INF/services/org.apache.spark.sql.sources.DataSourceRegister"
    (sources / service).write_text("io.aeronio.spark.Hello\n")
    digest = jar.source_digest(sources)
    made = jar.build(tmp_path / "made.jar", pyspark_jars, "4.3.0", sources)
    with zipfile.ZipFile(made) as z:
        names = sorted(z.namelist())
        assert names == ["META-INF/MANIFEST.MF", service, "io/aeronio/spark/Hello.class"]
        assert z.read(service) == b"io.aeronio.spark.Hello\n"
    assert jar.manifest(made)["Aeronio-Source-SHA256"] == digest
    (sources / service).write_text("io.aeronio.spark.Other\n")
    assert jar.source_digest(sources) != digest  # a jar built before is not this source's


@pytest.mark.slow
def test_without_javac_the_build_goes_on_and_says_so(pyspark_jars, tmp_path):
    # as in pip's build environment without javac: no PySpark either (none asked for)
    env = without_javac(tmp_path) | {"SPARK_HOME": str(tmp_path / "no-spark")}
    done = setup_py(tmp_path / "lib", env)
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


def build_requires(answer: Path, env: dict[str, str] | None = None) -> dict[str, list[str]]:
    """The build backend's requirements for a wheel and an editable install, asked in a process
    of its own as a build frontend asks (setuptools configures the root logger as it goes)."""
    hooks = ("get_requires_for_build_wheel", "get_requires_for_build_editable")
    script = (
        "import json, runpy, sys; backend = runpy.run_path('build_support/backend.py'); "
        f"open(sys.argv[1], 'w').write(json.dumps({{h: backend[h]() for h in {hooks!r}}}))"
    )
    done = subprocess.run(
        [sys.executable, "-c", script, str(answer)],
        cwd=ROOT, env=env, capture_output=True, text=True, timeout=120, check=False,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    return json.loads(answer.read_text())


@pytest.mark.slow
def test_the_build_asks_for_pyspark_only_where_javac_is(pyspark_jars, tmp_path):
    """And only where the jar is wanted (not AERONIO_SPARK_JAR=0) and $SPARK_HOME has no jars
    to compile it against."""
    plain = {k: v for k, v in os.environ.items() if k not in ("SPARK_HOME", "AERONIO_SPARK_JAR")}
    with_javac = build_requires(tmp_path / "with.json", plain)
    assert all("pyspark>=4.3,<5" in requires for requires in with_javac.values()), with_javac
    for name, env in {
        "without": without_javac(tmp_path),
        "opted-out": plain | {"AERONIO_SPARK_JAR": "0"},
        "spark-home": plain | {"SPARK_HOME": str(pyspark_jars.parent)},
    }.items():
        asked = build_requires(tmp_path / f"{name}.json", env)
        assert len(asked) == 2 and not [r for rs in asked.values() for r in rs if "pyspark" in r]


@pytest.mark.slow
def test_the_build_leaves_the_jar_out_when_told(tmp_path):
    env = {**os.environ, "AERONIO_SPARK_JAR": "0"}
    done = setup_py(tmp_path / "lib", env)
    assert done.returncode == 0, done.stderr
    assert "aeronio: the Spark jar is not built (AERONIO_SPARK_JAR=0)" in done.stderr
    assert (tmp_path / "lib" / "aeronio" / "spark" / "jvm.py").exists()
    assert not list((tmp_path / "lib").rglob("*.jar"))


# -- the check at use ------------------------------------------------------------------------


@pytest.fixture
def reader(pyspark_jars, tmp_path, monkeypatch):
    """aeronio.spark.jvm with its package jar at tmp_path/aeronio-spark.jar (none yet) and
    its cache in tmp_path/cache."""
    from aeronio.spark import jvm

    monkeypatch.setattr(jvm, "SHIPPED", tmp_path / "aeronio-spark.jar")
    monkeypatch.setenv("AERONIO_CACHE", str(tmp_path / "cache"))
    return jvm


def test_the_packages_jar_serves_the_same_spark_major_minor(reader, tmp_path):
    from aeronio.spark import jar

    a_jar(reader.SHIPPED, {"Spark-Version": "4.3.0", "Aeronio-Source-SHA256": jar.source_digest()})
    assert reader.jar("4.3.0") == reader.SHIPPED
    assert reader.jar("4.3.2") == reader.SHIPPED
    assert not (tmp_path / "cache").exists()


def test_another_spark_without_javac_is_an_error_naming_both(reader, tmp_path, monkeypatch):
    from aeronio.spark import SourceError, jar

    a_jar(reader.SHIPPED, {"Spark-Version": "4.3.0", "Aeronio-Source-SHA256": jar.source_digest()})
    monkeypatch.setenv("PATH", without_javac(tmp_path)["PATH"])
    monkeypatch.delenv("JAVA_HOME", raising=False)
    with pytest.raises(
        SourceError,
        match=r"aeronio-spark.jar was compiled against Spark 4\.3\.0, this session runs Spark "
        r"4\.4\.0; compiling it for this Spark needs javac",
    ):
        reader.jar("4.4.0")
    with pytest.raises(SourceError, match=r"against Spark 4\.3\.0, this session runs Spark 5\.0"):
        reader.jar("5.0.0")
    reader.SHIPPED.unlink()
    with pytest.raises(SourceError, match="the package has no aeronio-spark.jar .*needs javac"):
        reader.jar("4.3.0")
    assert not (tmp_path / "cache").exists()


@pytest.mark.slow
def test_another_spark_or_source_falls_back_to_the_first_use_compile(reader, tmp_path):
    from aeronio.spark import jar

    if jar.javac() is None:
        pytest.skip("the first-use compile needs javac (a JDK 17+)")
    digest = jar.source_digest()
    a_jar(reader.SHIPPED, {"Spark-Version": "4.3.0", "Aeronio-Source-SHA256": digest})
    compiled = reader.jar("5.0.0")
    assert compiled.is_relative_to(tmp_path / "cache")
    assert jar.manifest(compiled)["Spark-Version"] == "5.0.0"
    a_jar(reader.SHIPPED, {"Spark-Version": "5.0.0", "Aeronio-Source-SHA256": "0" * 64})
    assert reader.jar("5.0.0") == compiled  # other source: not the package's, the compiled one


# -- a JRE alone, executors in JVMs of their own --------------------------------------------

CHILD = """
import json, sys, time
import numpy as np
import aeronio, aeronio.spark
from aeronio.spark import jar, jvm

archive, stream_id, out, local, conf = sys.argv[1:]
spark = aeronio.spark.local_session(
    "local-cluster[2,1,1024]", "aeronio-jar-tests",
    conf=json.loads(conf) | {"spark.local.dir": local},
)
try:
    context = spark.sparkContext
    deadline = time.monotonic() + 180  # two JVMs to start, on a busy host
    while context._jsc.sc().getExecutorMemoryStatus().size() < 3:  # the driver, 2 executors
        assert time.monotonic() < deadline, "the executors did not register within 180 s"
        time.sleep(0.1)
    def write_rows(df, path):
        pdf = df.toPandas().sort_values("position")
        rows = np.zeros(len(pdf), [("ts", "<i8"), ("price", "<f8")])
        rows["ts"], rows["price"] = pdf["ts"].to_numpy(), pdf["price"].to_numpy()
        open(path, "wb").write(rows.tobytes())

    df = aeronio.spark.read_fixed(
        spark, "position long, ts long, price double", archive, stream_id=int(stream_id),
        metadata_columns="position",
    )
    write_rows(df, out)
    aeronio.spark.register(spark)
    source = (
        spark.read.format("aeronio").schema("position long, ts long, price double")
        .option("archive", archive).option("layout", "fixed").option("stream_id", stream_id)
        .option("metadata_columns", "position").load()
        .select("position", "ts", "price")
    )
    write_rows(source, out + ".format")
    print(json.dumps({
        "javac": jar.javac(), "jar": str(jvm.jar(spark.version)), "package": aeronio.__file__,
        "partitions": df.rdd.getNumPartitions(),
        "format_partitions": source.rdd.getNumPartitions(),
        "format_plan": "BatchScan aeronio[" in source._jdf.queryExecution().executedPlan()
        .toString(),
        "executors": context._jsc.sc().getExecutorMemoryStatus().size() - 1,
    }))
finally:
    spark.stop()
"""


@pytest.mark.slow
def test_a_jre_alone_reads_through_the_packages_jar_on_executors(built, host, tmp_path):
    """A fresh venv holding the package as built (and the dependencies of this one), no javac
    on PATH nor JAVA_HOME, a local-cluster: the executors, JVMs of their own, read the
    records through the package's jar, shipped to them by the driver, with read_fixed and with
    spark.read.format("aeronio")."""
    rng = np.random.default_rng(7)
    published = np.zeros(6000, RECORD)
    published["ts"] = np.arange(len(published)) + 1_700_000_000_000
    published["price"] = rng.random(len(published))
    recorded = host.run(
        host.record("aeron:ipc?term-length=65536|alias=jre", 301, [r.tobytes() for r in published])
    )
    assert recorded.end > 2 * SEGMENT  # partitions on both executors
    env_dir = tmp_path / "venv"
    venv.create(env_dir, with_pip=False)
    (site,) = env_dir.glob("lib/python*/site-packages")
    deps = [p for p in sys.path if p.endswith("site-packages")]
    (site / "aeronio-test.pth").write_text("\n".join([str(built), *deps]) + "\n")
    python = env_dir / "bin" / "python"
    spark_home = tmp_path / "spark"  # pyspark's, but for the workers' directory (work/)
    spark_home.mkdir()
    import pyspark

    for entry in Path(pyspark.__file__).parent.iterdir():
        if entry.name != "work":
            (spark_home / entry.name).symlink_to(entry)
    env = without_javac(tmp_path) | {
        "AERONIO_CACHE": str(tmp_path / "cache"),
        "SPARK_HOME": str(spark_home),
        "PYSPARK_PYTHON": str(python),
        "PYSPARK_DRIVER_PYTHON": str(python),
    }
    out = tmp_path / "rows"
    args = [str(host.archive_dir), "301", str(out), str(tmp_path / "local"), json.dumps(TEST_CONF)]
    done = subprocess.run(
        [str(python), "-c", CHILD, *args], cwd=tmp_path, env=env, capture_output=True,
        text=True, timeout=600, check=False,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr[-5000:]
    seen = json.loads(done.stdout.strip().splitlines()[-1])
    assert seen == {
        "javac": None,
        "jar": str(built / "aeronio" / "spark" / "aeronio-spark.jar"),
        "package": str(built / "aeronio" / "__init__.py"),
        "partitions": -(-recorded.end // SEGMENT),
        "format_partitions": -(-recorded.end // SEGMENT),
        "format_plan": True,  # format("aeronio") read in the JVM, not through Python
        "executors": 2,
    }
    assert out.read_bytes() == published.tobytes()
    assert Path(f"{out}.format").read_bytes() == published.tobytes()
    assert not (tmp_path / "cache").exists()  # nothing compiled


SPARK_JARS_CHILD = """
import json, sys
from pyspark.sql import SparkSession

archive, stream_id, conf, jar = sys.argv[1:]
builder = SparkSession.builder.master("local[1]").appName("aeronio-spark-jars")
for key, value in (json.loads(conf) | {"spark.jars": jar}).items():
    builder = builder.config(key, value)
spark = builder.getOrCreate()
try:
    def read(layout, schema):
        return (
            spark.read.format("aeronio").option("archive", archive).option("layout", layout)
            .option("stream_id", stream_id).schema(schema).load()
        )
    fixed = read("fixed", "ts long, price double")
    try:
        read("msgpack", "ts long").collect()
        error = None
    except Exception as e:
        error = str(e)
    print(json.dumps({
        "rows": sorted(tuple(r) for r in fixed.collect()),
        "jvm": "BatchScan aeronio[" in fixed._jdf.queryExecution().executedPlan().toString(),
        "msgpack": error,
    }))
finally:
    spark.stop()
"""


@pytest.mark.slow
def test_the_jar_on_spark_jars_reads_without_register(built, host, tmp_path):
    """With the package's jar on spark.jars and no register(): format("aeronio") reads an
    archive directory in the JVM, and what it would hand to the Python source fails naming
    register (docs/spark.md)."""
    published = np.zeros(50, RECORD)
    published["ts"] = np.arange(50) + 1_700_000_000_000
    published["price"] = np.arange(50) / 4
    host.run(
        host.record("aeron:ipc?term-length=65536|alias=jars", 302, [r.tobytes() for r in published])
    )
    env = os.environ | {"PYSPARK_PYTHON": sys.executable, "SPARK_LOCAL_IP": "127.0.0.1"}
    jar = built / "aeronio" / "spark" / "aeronio-spark.jar"  # the package's, as built
    args = [str(host.archive_dir), "302", json.dumps(TEST_CONF), str(jar)]
    done = subprocess.run(
        [sys.executable, "-c", SPARK_JARS_CHILD, *args], cwd=tmp_path, env=env,
        capture_output=True, text=True, timeout=300, check=False,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr[-5000:]
    seen = json.loads(done.stdout.strip().splitlines()[-1])
    assert seen["rows"] == [[int(r["ts"]), float(r["price"])] for r in published]
    assert seen["jvm"] is True
    assert "go through the Python source: call aeronio.spark.register(spark)" in seen["msgpack"]
