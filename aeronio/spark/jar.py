"""The JVM reader's jar: the package's Java source (`java/*.java`) compiled against Spark's jars,
its manifest naming the Spark version it was compiled against (`Spark-Version`) and the digest
of the source (`Aeronio-Source-SHA256`).

The project's build (setup.py's `build_jar`, run by every wheel and editable build) puts it into
the package as `aeronio-spark.jar` (`SHIPPED`) where javac and PySpark are at hand, so that a
JRE is all a user's Spark needs (aeronio.spark.jvm checks it against the running Spark and
falls back to compiling on first use); `python -m aeronio.spark.build_jar` rebuilds it in place.
AERONIO_SPARK_JAR=0 in the build's environment leaves it out (and PySpark out of the build's
requirements: an install offline, or without 457 MB of PySpark, where a JDK is).
Only the standard library is used here: setup.py loads this file on its own, before the package
is built.
"""

from __future__ import annotations

import hashlib
import os
import re
import shutil
import subprocess
import tempfile
import zipfile
from pathlib import Path

SOURCES = Path(__file__).with_name("java")
SHIPPED = Path(__file__).with_name("aeronio-spark.jar")
SPARK_VERSION = "Spark-Version"
SOURCE_DIGEST = "Aeronio-Source-SHA256"
NO_JAVAC = (
    "compiling the JVM reader needs javac (a JDK 17+, such as Debian's openjdk-17-jdk-headless) "
    "on PATH or in $JAVA_HOME/bin"
)
_CORE = re.compile(r"spark-core_[0-9.]+-(.+)\.jar")


OPT_OUT = "AERONIO_SPARK_JAR"  # 0: the package's build leaves the jar out


def build_wanted() -> bool:
    """Whether the package's build (setup.py) compiles the jar: not with AERONIO_SPARK_JAR=0
    (`python -m aeronio.spark.build_jar` builds it regardless)."""
    return os.environ.get(OPT_OUT, "").strip() != "0"


def pyspark_needed() -> bool:
    """Whether the package's build needs PySpark for Spark's jars: it builds the jar, javac is
    at hand and $SPARK_HOME has no jars to compile against."""
    home = os.environ.get("SPARK_HOME")
    spark_home_jars = Path(home, "jars").is_dir() if home else False
    return build_wanted() and javac() is not None and not spark_home_jars


class JarError(Exception):
    """The jar cannot be built (no javac, no Spark jars, the source does not compile)."""


def source_files(sources: Path = SOURCES) -> dict[str, Path]:
    """The files of `sources` by their path in it: the .java files, compiled, and the rest
    (such as META-INF/services/...), resources put into the jar as they are."""
    files = (p for p in sources.rglob("*") if p.is_file() and p.suffix not in (".class", ".jar"))
    return {p.relative_to(sources).as_posix(): p for p in sorted(files)}


def source_digest(sources: Path = SOURCES) -> str:
    """The SHA-256 of `source_files` (paths and contents, in path order)."""
    digest = hashlib.sha256()
    for name, path in source_files(sources).items():
        digest.update(name.encode() + b"\0" + path.read_bytes() + b"\0")
    return digest.hexdigest()


def javac() -> str | None:
    """The JDK's compiler: $JAVA_HOME/bin/javac, else javac on PATH; None without a JDK."""
    home = os.environ.get("JAVA_HOME")
    if home and Path(home, "bin", "javac").exists():
        return str(Path(home, "bin", "javac"))
    return shutil.which("javac")


def spark_jars() -> Path:
    """The jars of $SPARK_HOME, else of the importable pyspark package."""
    home = os.environ.get("SPARK_HOME")
    if not home:
        try:
            import pyspark
        except ImportError as e:
            raise JarError("no Spark jars: neither $SPARK_HOME nor pyspark") from e
        home = os.path.dirname(pyspark.__file__)
    jars = Path(home, "jars")
    if not jars.is_dir():
        raise JarError(f"no Spark jars: no {jars}")
    return jars


def jars_version(jars: Path) -> str:
    """The Spark version of a jars directory (its spark-core jar's)."""
    for path in jars.glob("spark-core_*.jar"):
        found = _CORE.fullmatch(path.name)
        if found:
            return found[1]
    raise JarError(f"no spark-core jar in {jars}")


def manifest(path: Path) -> dict[str, str]:
    """The main attributes of a jar's manifest."""
    with zipfile.ZipFile(path) as z:
        text = z.read("META-INF/MANIFEST.MF").decode()
    return dict(
        line.split(": ", 1) for line in text.replace("\r\n ", "").splitlines() if ": " in line
    )


def _manifest_line(name: str, value: str) -> str:
    """A manifest's line, wrapped at 72 bytes as the jar specification says."""
    text = f"{name}: {value}"
    lines = [text[:72]] + [" " + text[i : i + 71] for i in range(72, len(text), 71)]
    return "".join(line + "\r\n" for line in lines)


def build(target: Path, jars: Path, spark_version: str, sources: Path = SOURCES) -> Path:
    """Compile `sources`' Java files against `jars` (Spark `spark_version`) into the jar
    `target`, replaced whole (whoever builds it at the same time)."""
    compiler = javac()
    if compiler is None:
        raise JarError(NO_JAVAC)
    files = source_files(sources)
    target.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(dir=target.parent) as work:
        classes = Path(work, "classes")
        done = subprocess.run(
            [compiler, "--release", "17", "-nowarn", "-d", str(classes), "-cp", f"{jars}/*"]
            + [str(p) for p in files.values() if p.suffix == ".java"],
            capture_output=True,
            text=True,
        )
        if done.returncode:
            raise JarError(
                f"compiling the JVM reader against {jars} failed:\n{done.stderr.strip()}"
            )
        attributes = {
            "Manifest-Version": "1.0",
            SPARK_VERSION: spark_version,
            SOURCE_DIGEST: source_digest(sources),
        }
        built = Path(work, target.name)
        with zipfile.ZipFile(built, "w", zipfile.ZIP_DEFLATED) as z:
            z.writestr(
                "META-INF/MANIFEST.MF", "".join(_manifest_line(*a) for a in attributes.items())
            )
            for path in sorted(classes.rglob("*.class")):
                z.write(path, path.relative_to(classes).as_posix())
            for name, path in files.items():
                if path.suffix != ".java":  # such as META-INF/services: the source's short name
                    z.write(path, name)
        os.replace(built, target)
    return target


def build_shipped(target: Path = SHIPPED) -> str:
    """Build the package's jar at `target` against the Spark jars found (`spark_jars`); what
    was built."""
    if javac() is None:  # the first reason, before Spark's jars (fetched only with javac)
        raise JarError(NO_JAVAC)
    jars = spark_jars()
    version = jars_version(jars)
    build(target, jars, version)
    return f"built {target} against Spark {version} ({jars})"
