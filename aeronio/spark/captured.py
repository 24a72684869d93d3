"""The sources' errors as aeronio's own: `SourceError` and `DataLossError`, whichever source
failed (the JVM one, "aeronio", or the Python one, "aeronio_python") and wherever (planning, a
task, a streaming query).

Spark reports them in its own wrappers, and PySpark raises what it makes of those: the JVM
source's Java exception (its message "aeronio SourceError: ..."; in a task, wrapped in a
SparkException PySpark leaves as Py4JJavaError), the Python source's traceback in an
AnalysisException (planning), PythonException (a task) or StreamingQueryException. `install`
(called by `register`) adds a step under PySpark's own conversion of Java exceptions (its
`install_exception_handler`): a Java exception whose message, or a cause's, has a line naming
one of the two errors raises that error with that line's message, the exception PySpark makes
of it as the cause. Nothing else changes: other errors are raised as PySpark raises them.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Any

import py4j.protocol  # type: ignore[import-untyped]
from py4j.protocol import Py4JJavaError
from pyspark.errors.exceptions.captured import convert_exception, install_exception_handler

from aeronio.spark.recordings import DataLossError, SourceError

KINDS: dict[str, type[SourceError]] = {"SourceError": SourceError, "DataLossError": DataLossError}
# The JVM source's message ("aeronio SourceError: ...", Archive.error) or the Python source's
# traceback's last line ("aeronio.spark.recordings.SourceError: ...").
_LINE = re.compile(
    rf"^(?:aeronio |{re.escape(SourceError.__module__)}\.)({'|'.join(KINDS)}): (.*)$", re.MULTILINE
)
_CAUSES = 16  # how deep a cause is looked for


def translate(java_exception: Any) -> SourceError | None:
    """The aeronio error a Java exception (py4j's proxy of one) reports: the last line naming
    one, in the deepest of its causes that has one; None if none does."""
    found = None
    error = java_exception
    for _ in range(_CAUSES):
        if error is None:
            break
        for match in _LINE.finditer(error.getMessage() or ""):
            found = match
        error = error.getCause()
    if found is None:
        return None
    return KINDS[found.group(1)](found.group(2))


def _translating(original: Callable[..., Any]) -> Callable[..., Any]:
    """py4j's get_return_value `original`, raising the sources' errors as aeronio's."""

    def get_return_value(
        answer: str, gateway_client: object, target_id: str | None = None, name: str | None = None
    ) -> Any:
        try:
            return original(answer, gateway_client, target_id, name)
        except Py4JJavaError as e:
            error = translate(e.java_exception)
            if error is None:
                raise
            raise error from convert_exception(e.java_exception)

    get_return_value.aeronio = True  # type: ignore[attr-defined]
    return get_return_value


def install() -> None:
    """Raise the sources' errors as `SourceError` / `DataLossError` from every call into the
    JVM (idempotent): py4j's `get_return_value` translated, under PySpark's handler, which
    every new SparkSession installs again over whatever py4j's is."""
    if not getattr(py4j.protocol.get_return_value, "aeronio", False):
        py4j.protocol.get_return_value = _translating(py4j.protocol.get_return_value)
    install_exception_handler()  # py4j.java_gateway's: PySpark's handler over ours
