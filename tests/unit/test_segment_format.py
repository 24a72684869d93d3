"""One owner of the recorded segment/frame format: aeronio/archive/segments.py (its constants
aeronio._core's, its header struct protocol.frames'). Spark's Python reader takes the format
from it and defines none of its own; the Java reader's constants (Java cannot import them) are
compared with it, so that a change on one side fails here."""

from __future__ import annotations

import ast
import re
from pathlib import Path

from aeronio import _core
from aeronio.archive import segments
from aeronio.protocol.frames import DataHeader
from tests.support.python_source import parse

PACKAGE = Path(__file__).parents[2] / "aeronio"
SPARK = PACKAGE / "spark"
PART_READER = SPARK / "java" / "PartReader.java"
FORMAT = set(segments.__all__)


def test_the_format_is_the_cores_and_the_protocols():
    for name in FORMAT - {"FRAME_HEADER"}:
        assert getattr(segments, name) == getattr(_core, name), name
    assert segments.FRAME_HEADER is DataHeader.STRUCT
    assert segments.align_frame(33) == 64 and segments.align_frame(64) == 64


def format_definitions(source: str, name: str) -> list[str]:
    """Where a module defines the frame format, or reads segment files, itself: a struct or a
    mapping of its own, a file opened, an int constant named like a frame fact, an alignment by
    hand (`& 31`, `+ 31`, `& ~31`), or a format name imported from elsewhere than segments."""
    found = []
    for node in ast.walk(parse(source, name)):
        where = f"{name}:{getattr(node, 'lineno', 0)}"
        if isinstance(node, ast.Import | ast.ImportFrom):
            modules = [a.name for a in node.names] if isinstance(node, ast.Import) else []
            for own in ("struct", "mmap"):  # a header read, a segment file mapped, by hand
                if own in modules or getattr(node, "module", None) == own:
                    found.append(f"{where}: imports {own}")
            if isinstance(node, ast.ImportFrom) and node.module != "aeronio.archive.segments":
                found += [
                    f"{where}: {a.name} from {node.module}" for a in node.names if a.name in FORMAT
                ]
        elif isinstance(node, ast.Assign) and isinstance(node.value, ast.Constant | ast.Tuple):
            names = [n.id for t in node.targets for n in ast.walk(t) if isinstance(n, ast.Name)]
            for target in names:
                if re.search(r"HEADER|FLAG|TYPE_|ALIGN|FRAME", target):
                    found.append(f"{where}: defines {target}")
        elif isinstance(node, ast.Call) and getattr(node.func, "id", None) == "open":
            found.append(f"{where}: opens a file (segment files are read through segments)")
        elif isinstance(node, ast.BinOp) and isinstance(node.op, ast.BitAnd | ast.Add):
            for side in (node.left, node.right):
                if isinstance(side, ast.UnaryOp) and isinstance(side.op, ast.Invert):
                    side = side.operand
                if isinstance(side, ast.Constant) and side.value == 31:
                    found.append(f"{where}: aligns by hand")
    return sorted(found, key=lambda f: int(f.split(":")[1]))  # by line


def test_spark_defines_no_frame_format_of_its_own():
    modules = sorted(SPARK.glob("*.py"))
    assert modules
    found = [
        f
        for path in modules
        for f in format_definitions(path.read_text(), str(path.relative_to(PACKAGE.parent)))
    ]
    assert found == []


def test_the_check_finds_a_format_defined_elsewhere():
    source = (
        "import struct\n"
        "from aeronio._core import HEADER_LENGTH\n"
        "BEGIN_FLAG, END_FLAG = 0x80, 0x40\n"
        "def aligned(n):\n    return (n + 31) & ~31\n"
        "import mmap\n"
        "f = open('0-0.rec', 'rb')\n"
    )
    found = format_definitions(source, "aeronio/spark/frames.py")
    assert found == [
        "aeronio/spark/frames.py:1: imports struct",
        "aeronio/spark/frames.py:2: HEADER_LENGTH from aeronio._core",
        "aeronio/spark/frames.py:3: defines BEGIN_FLAG",
        "aeronio/spark/frames.py:3: defines END_FLAG",
        "aeronio/spark/frames.py:5: aligns by hand",
        "aeronio/spark/frames.py:5: aligns by hand",
        "aeronio/spark/frames.py:6: imports mmap",
        "aeronio/spark/frames.py:7: opens a file (segment files are read through segments)",
    ]


def java_constants(source: str) -> dict[str, int]:
    """The `static final int NAME = value` constants of a Java source (several per line too)."""
    found = {}
    for declaration in re.findall(r"static\s+final\s+int\s+([^;]+);", source):
        for name, value in re.findall(r"(\w+)\s*=\s*(0x[0-9a-fA-F]+|\d+)", declaration):
            found[name] = int(value, 0)
    return found


def test_the_java_readers_constants_are_the_python_owners():
    constants = java_constants(PART_READER.read_text())
    assert set(constants) == FORMAT - {
        "FRAME_HEADER",
        "FRAME_LENGTH_FIELD_OFFSET",  # 0: the Java reader reads the length at the frame's offset
    }
    assert {name: getattr(segments, name) for name in constants} == constants


def test_java_constants_are_parsed():
    source = "private static final int A = 32;\n  static final int B = 0x80, C = 0x40;\nint D = 1;"
    assert java_constants(source) == {"A": 32, "B": 0x80, "C": 0x40}
