"""Every limit has one validator (aeronio.protocol.limits) and every entry point uses it:
the same bad value is refused with the same message, in the exception type of its kind of
input (ConfigurationError for options and arguments, ChannelUriError for a channel URI,
MalformedFrameError for a frame off the wire). The layout itself is defined once, in the
compiled core, and the Python modules re-export it."""

import ast
import operator
import re
from pathlib import Path

import pytest

import aeronio
from aeronio import _core
from aeronio.archive.context import ArchiveContext
from aeronio.driver.context import DriverContext
from aeronio.errors import ChannelUriError, ConfigurationError
from aeronio.logbuffer import descriptor as d
from aeronio.protocol import frames, limits
from aeronio.protocol.channel import ChannelUri
from tests.support.python_source import parse

TERM_RULE = "must be a power of two between 65536 and 1073741824"
MTU_RULE = "must be a multiple of 32 between 64 and 65504"


def test_the_layout_is_the_compiled_cores():
    for name in (
        "LOG_META_DATA_LENGTH",
        "LOG_WAKE_SLOTS_OFFSET",
        "LOG_WAKE_SLOT_COUNT",
        "LOG_WAKE_SPACE_BIT",
        "PARTITION_COUNT",
        "FRAME_ALIGNMENT",
        "HEADER_LENGTH",
    ):
        assert getattr(d, name) is getattr(_core, name), name  # fmt: skip
    for name in ("HDR_TYPE_DATA", "HDR_TYPE_PAD", "UNFRAGMENTED", "EOS_FLAG", "BEGIN_FRAG_FLAG"):
        assert getattr(frames, name) is getattr(_core, name), name
    assert frames.DATA_HEADER_LENGTH == _core.HEADER_LENGTH


@pytest.mark.parametrize("value", [1000, 32 * 1024, 3 * 65536])
def test_a_bad_term_length_is_refused_alike_everywhere(value):
    with pytest.raises(ConfigurationError, match=f"option: ipc_term_length {value} {TERM_RULE}"):
        DriverContext.from_options(ipc_term_length=value)
    with pytest.raises(ChannelUriError, match=f"term-length {value} {TERM_RULE}"):
        ChannelUri.parse(f"aeron:ipc?term-length={value}")
    setup = frames.setup_frame(
        session_id=1, stream_id=2, initial_term_id=3, term_length=value, mtu=1408
    ).encode()
    with pytest.raises(frames.MalformedFrameError, match=f"SETUP term_length {value} {TERM_RULE}"):
        list(frames.iter_frames(setup))


@pytest.mark.parametrize("value", [32, 100, 65536])
def test_a_bad_mtu_is_refused_alike_everywhere(value):
    with pytest.raises(ConfigurationError, match=f"option: mtu_length {value} {MTU_RULE}"):
        DriverContext.from_options(mtu_length=value)
    with pytest.raises(ChannelUriError, match=f"mtu {value} {MTU_RULE}"):
        ChannelUri.parse(f"aeron:udp?endpoint=127.0.0.1:40123|mtu={value}")
    setup = frames.setup_frame(
        session_id=1, stream_id=2, initial_term_id=3, term_length=65536, mtu=value
    ).encode()
    with pytest.raises(frames.MalformedFrameError, match=f"SETUP mtu {value} {MTU_RULE}"):
        list(frames.iter_frames(setup))


@pytest.mark.parametrize("value", [True, 2**31, -(2**31) - 1, 1.0, "1"])
def test_a_bad_int32_is_refused_naming_it(value):
    with pytest.raises(ConfigurationError, match=f"stream_id {value!r} must be a signed 32-bit"):
        limits.check_int32(value, "stream_id")


def test_the_term_and_message_limits_are_the_compiled_cores():
    for name in ("TERM_MIN_LENGTH", "TERM_MAX_LENGTH", "MAX_MESSAGE_LENGTH"):
        assert getattr(limits, name) is getattr(_core, name), name
    assert (limits.TERM_MIN_LENGTH, limits.TERM_MAX_LENGTH) == (64 * 1024, 1 << 30)
    assert limits.max_message_length(1 << 30) == limits.MAX_MESSAGE_LENGTH == 16 * 1024 * 1024


def test_a_mtu_too_large_for_its_term_is_refused_naming_it():
    limits.check_mtu_for_term_length(8192 + 32, 65536)  # a whole max message in one frame
    with pytest.raises(
        ConfigurationError, match="^mtu 8256 is too large for the term length 65536$"
    ):
        limits.check_mtu_for_term_length(8256, 65536)
    for mtu, term in (("ipc_mtu", "ipc_term_length"), ("mtu_length", "term_length")):
        with pytest.raises(ConfigurationError, match=f"option: {mtu} 16384 is too large for the"):
            DriverContext.from_options(**{term: 65536, mtu: 16384})


@pytest.mark.parametrize("value", [0, -4096, 3 * 65536, 2**31])
def test_a_bad_segment_length_is_refused_naming_it(value):
    with pytest.raises(
        ConfigurationError,
        match=f"^segment_file_length {value} must be a power of two between 1 and 1073741824$",
    ):
        ArchiveContext(archive_dir="unused", segment_file_length=value)
    with pytest.raises(ChannelUriError, match=f"^segment {value} must be a power of two between "):
        limits.check_segment_length(value, 65536, "segment", ChannelUriError)


def test_a_segment_shorter_than_its_term_is_refused():
    limits.check_segment_length(65536, 65536)
    with pytest.raises(ConfigurationError, match="^segment_length 65536 must be a power of two "):
        limits.check_segment_length(65536, 131072)


SOURCE = Path(aeronio.__file__).parent
CORE = SOURCE.parent / "cython_core"


def _python_modules():
    for path in sorted(SOURCE.rglob("*.py")):
        yield path.relative_to(SOURCE.parent).as_posix(), parse(path)


def test_each_limit_has_its_one_validator_in_limits():
    validators = {name for name in dir(limits) if name.startswith("check_")}
    elsewhere = [
        f"{where}:{node.lineno} {node.name}"
        for where, tree in _python_modules()
        if where != "aeronio/protocol/limits.py"
        for node in ast.walk(tree)
        if isinstance(node, ast.FunctionDef) and node.name in validators
    ]
    assert elsewhere == []


_FOLD = {ast.Add: operator.add, ast.Sub: operator.sub, ast.Mult: operator.mul}
_FOLD |= {ast.LShift: operator.lshift, ast.Pow: operator.pow}


def _folded(node: ast.AST) -> int | None:
    """The value of an expression of int literals (`1 << 30`, `64 * 1024`), else None."""
    if isinstance(node, ast.Constant) and type(node.value) is int:
        return node.value
    if isinstance(node, ast.BinOp) and type(node.op) in _FOLD:
        left, right = _folded(node.left), _folded(node.right)
        if left is not None and right is not None:
            return _FOLD[type(node.op)](left, right)
    return None


def _named_mtu(node: ast.AST) -> bool:
    name = node.id if isinstance(node, ast.Name) else getattr(node, "attr", "")
    return "mtu" in name


def test_no_magic_limit_in_python():
    """No value is compared with the longest term (1 GiB) written out (limits names it), and an
    MTU's payload is `mtu - HEADER_LENGTH`, not `mtu - 32`."""
    found = []
    for where, tree in _python_modules():
        for node in ast.walk(tree):
            if (
                isinstance(node, ast.Compare)
                and where != "aeronio/protocol/limits.py"
                and limits.TERM_MAX_LENGTH in map(_folded, [node.left, *node.comparators])
            ):
                found.append(f"{where}:{node.lineno} {ast.unparse(node)}")
            if (
                isinstance(node, ast.BinOp)
                and isinstance(node.op, ast.Sub)
                and _named_mtu(node.left)
                and _folded(node.right) == _core.HEADER_LENGTH
            ):
                found.append(f"{where}:{node.lineno} {ast.unparse(node)}")
    assert found == []


CORE_MAGIC = re.compile(
    r"1\s*<<\s*30|1024\s*\*\s*1024\s*\*\s*1024|1073741824|16\s*\*\s*1024\s*\*\s*1024"
    r"|term_length\s*[<>]=?\s*\d|\d\s*\*\s*65536"
)


def test_no_magic_limit_in_the_core():
    """The core's term and message limits are frame.pxi's named constants."""
    found = [
        f"{path.name}:{number} {line.strip()}"
        for path in sorted(CORE.glob("*.p*"))
        if path.name != "frame.pxi"
        for number, line in enumerate(path.read_text().splitlines(), 1)
        if CORE_MAGIC.search(line.split("#")[0])
    ]
    assert found == []
