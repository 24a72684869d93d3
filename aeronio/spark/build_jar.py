"""`python -m aeronio.spark.build_jar`: (re)build the package's aeronio-spark.jar in place, from
its Java source, against the jars of $SPARK_HOME, else of the pyspark package (needs javac, a
JDK 17+); aeronio.spark.jar says what it holds."""

import sys

from aeronio.spark.jar import JarError, build_shipped

if __name__ == "__main__":
    try:
        print(build_shipped())
    except JarError as e:
        sys.exit(f"aeronio.spark.build_jar: {e}")
