"""Every limit has one validator (aeronio.protocol.limits) and every entry point uses it:
the same bad value is refused with the same message, in the exception type of its kind of
input (ConfigurationError for options and arguments, ChannelUriError for a channel URI,
MalformedFrameError for a frame off the wire). The layout itself is defined once, in the
compiled core, and the Python modules re-export it."""

import pytest

from aeronio import _core
from aeronio.driver.context import DriverContext
from aeronio.errors import ChannelUriError, ConfigurationError
from aeronio.logbuffer import descriptor as d
from aeronio.protocol import frames, limits
from aeronio.protocol.channel import ChannelUri

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
