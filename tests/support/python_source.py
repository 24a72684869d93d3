"""Python source parsed for the tests that read the code, safe from CPython 3.11's re-entrant
AST constructor.

## Why the collector is paused

CPython 3.11 keeps the AST constructor's recursion depth in the interpreter's state, so a parse
that runs inside another fails the outer one with `SystemError: AST constructor recursion depth
mismatch` (3.12 keeps it per call). A garbage collection during the outer parse does that when a
finaliser formats a traceback: 3.11's traceback parses the source line for its carets. Py4J's
finalisers do, once a Spark test module has left Java objects behind and the JVM has reset a
connection (Py4J logs the reset with its traceback, then retries). The parse here runs with the
collector paused.
"""

from __future__ import annotations

import ast
import gc
from pathlib import Path


def parse(source: str | Path, filename: str = "<unknown>") -> ast.Module:
    """`ast.parse` of `source` (a file's path, or its text named `filename`), no collection
    running meanwhile."""
    if isinstance(source, Path):
        source, filename = source.read_text(), str(source)
    enabled = gc.isenabled()
    gc.disable()
    try:
        return ast.parse(source, filename)
    finally:
        if enabled:
            gc.enable()
