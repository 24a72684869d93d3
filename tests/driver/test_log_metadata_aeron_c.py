"""The log metadata aeronio's driver writes, byte for byte against the pages Aeron's C driver
(1.53) wrote for the same parameters (tests/data/aeron_c/capture_logmeta.py made them): an IPC
publication, an exclusive UDP publication with its position, session, linger, tags and socket
buffer pinned, and the image of it. Only the fields in MUST_DIFFER may differ, each checked for
the value aeronio's driver must have put there."""

import json
import re
import socket
import struct
from pathlib import Path

import aeronio
from aeronio.logbuffer import descriptor as d
from aeronio.logbuffer.log_buffers import LogBuffers
from tests.support.ports import free_port
from tests.support.procs import await_until

DATA = Path(__file__).parents[1] / "data" / "aeron_c"
SPEC = json.loads((DATA / "logmeta.json").read_text())
HEADER = d.LOG_DEFAULT_FRAME_HEADER_OFFSET

# (offset, length) of the fields no two drivers write alike for the same parameters.
CORRELATION_ID = (d.LOG_CORRELATION_ID_OFFSET, 8)  # each driver's registration ids
OS_DEFAULT_SOCKET_BUFFERS = (  # what this machine's OS gives a UDP socket, as probed
    (d.LOG_OS_DEFAULT_SOCKET_SNDBUF_LENGTH_OFFSET, 4),
    (d.LOG_OS_DEFAULT_SOCKET_RCVBUF_LENGTH_OFFSET, 4),
)
AERONIO_PADDING = (  # the wake fields, in Aeron's pad2
    d.LOG_LIMIT_WANTED_OFFSET,
    d.LOG_WAKE_SLOTS_OFFSET + 8 * d.LOG_WAKE_SLOT_COUNT - d.LOG_LIMIT_WANTED_OFFSET,
)
RANDOM_START = (  # a random initial term id and session id (the IPC publication's)
    (d.TERM_TAIL_COUNTERS_OFFSET, 8 * d.PARTITION_COUNT),
    (d.LOG_INITIAL_TERM_ID_OFFSET, 4),
    (HEADER + 12, 4),  # default header: session id
    (HEADER + 20, 4),  # default header: term id (the initial one)
)
# Aeron's images leave the tails alone (0); aeronio's keep the position the image joined at.
IMAGE_TAILS = ((d.TERM_TAIL_COUNTERS_OFFSET, 8 * d.PARTITION_COUNT + 4),)
COMMON = (CORRELATION_ID, *OS_DEFAULT_SOCKET_BUFFERS, AERONIO_PADDING)
MUST_DIFFER = {
    "ipc_publication": (*COMMON, *RANDOM_START),
    "exclusive_udp_publication": COMMON,
    "image": (*COMMON, *IMAGE_TAILS),
}


def os_default_socket_buffers() -> tuple[int, int]:
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
        return (
            s.getsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF),
            s.getsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF),
        )


def page(log_file: str) -> bytes:
    log = LogBuffers.open(log_file)
    try:
        return bytes(log.array[-d.LOG_META_DATA_LENGTH :])
    finally:
        log.close()


def differing(ours: bytes, theirs: bytes, allowed) -> list[str]:
    """The byte ranges where `ours` differs from `theirs` outside the `allowed` fields."""
    mask = bytearray(len(ours))
    for offset, length in allowed:
        mask[offset : offset + length] = b"\x01" * length
    return [
        f"@{i}: ours {ours[i]:#04x}, Aeron C's {theirs[i]:#04x}"
        for i in range(len(ours))
        if ours[i] != theirs[i] and not mask[i]
    ]


def i32(buffer: bytes, offset: int) -> int:
    return struct.unpack_from("<i", buffer, offset)[0]


def i64(buffer: bytes, offset: int) -> int:
    return struct.unpack_from("<q", buffer, offset)[0]


def check_must_differ(ours: bytes, registration_id: int) -> None:
    """The fields of MUST_DIFFER hold what aeronio's driver must write there."""
    assert i64(ours, d.LOG_CORRELATION_ID_OFFSET) == registration_id
    sndbuf, rcvbuf = os_default_socket_buffers()
    assert i32(ours, d.LOG_OS_DEFAULT_SOCKET_SNDBUF_LENGTH_OFFSET) == sndbuf
    assert i32(ours, d.LOG_OS_DEFAULT_SOCKET_RCVBUF_LENGTH_OFFSET) == rcvbuf
    assert i64(ours, d.LOG_CONDUCTOR_WAKE_ID_OFFSET) != 0  # the driver's, for wake-ups


def compare(name: str, ours: bytes) -> None:
    theirs = (DATA / f"logmeta_{name}.bin").read_bytes()
    assert len(ours) == len(theirs) == d.LOG_META_DATA_LENGTH
    assert differing(ours, theirs, MUST_DIFFER[name]) == []


def on_port(channel: str, port: int) -> str:
    return re.sub(r"endpoint=127\.0\.0\.1:[0-9]+", f"endpoint=127.0.0.1:{port}", channel)


async def test_log_metadata_pages_are_aeron_c_drivers_but_for_the_listed_fields():
    settings = SPEC["settings"]
    pages = SPEC["pages"]
    port = free_port()
    options = dict(
        term_length=settings["term_length"],
        ipc_term_length=settings["ipc_term_length"],
        mtu_length=settings["mtu_length"],
        ipc_mtu=settings["mtu_length"],
        term_buffer_sparse_file=settings["term_buffer_sparse_file"],
    )
    async with aeronio.connect(**options) as aeron:
        ipc = await aeron.add_publication(pages["ipc_publication"]["channel"], 1001)
        spec = pages["exclusive_udp_publication"]
        udp = await aeron.add_exclusive_publication(on_port(spec["channel"], port), 1002)
        sub = await aeron.add_subscription(on_port(pages["image"]["channel"], port), 1002)
        await await_until(lambda: udp.is_connected and sub.images, 30, "UDP connected")
        assert not ipc.is_connected

        ours = page(ipc.log_file)
        compare("ipc_publication", ours)
        check_must_differ(ours, ipc.registration_id)
        assert i32(ours, d.LOG_INITIAL_TERM_ID_OFFSET) == i32(ours, HEADER + 20)
        assert i32(ours, HEADER + 12) == ipc.session_id
        initial = i32(ours, d.LOG_INITIAL_TERM_ID_OFFSET)
        assert [i64(ours, 8 * i) >> 32 for i in range(3)] == [initial, initial - 2, initial - 1]

        ours = page(udp.log_file)
        compare("exclusive_udp_publication", ours)
        check_must_differ(ours, udp.registration_id)

        image = sub.images[0]
        # as the C driver's page was captured: once its driver counted its sender
        await await_until(lambda: image.active_transport_count == 1, 30, "transport counted")
        ours = page(image.log_file)
        compare("image", ours)
        check_must_differ(ours, image.correlation_id)
        # joined at term 1002 (2 terms after 1000), offset 4096
        assert i32(ours, d.LOG_ACTIVE_TERM_COUNT_OFFSET) == 2
        assert i64(ours, 8 * 2) == d.pack_tail(1002, 4096)


def test_log_params_read_back_as_written():
    params = d.LogParams(
        type=d.LOG_TYPE_PUBLICATION_IMAGE,
        publication_window_length=2**31 - 1,
        receiver_window_length=-1,
        socket_sndbuf_length=1,
        os_default_socket_sndbuf_length=2,
        os_max_socket_sndbuf_length=3,
        socket_rcvbuf_length=4,
        os_default_socket_rcvbuf_length=5,
        os_max_socket_rcvbuf_length=6,
        max_resend=7,
        entity_tag=-(2**63),
        response_correlation_id=2**63 - 1,
        linger_timeout_ns=8,
        untethered_window_limit_timeout_ns=9,
        untethered_resting_timeout_ns=10,
        untethered_linger_timeout_ns=11,
        group=True,
        is_response=True,
        rejoin=True,
        reliable=True,
        sparse=True,
        signal_eos=True,
        spies_simulate_connection=True,
        tether=True,
    )
    meta = bytearray(d.LOG_META_DATA_LENGTH)
    d.write_log_params(meta, params)
    assert d.read_log_params(meta) == params


def test_log_params_are_written_where_aeron_has_them_and_nowhere_else():
    meta = bytearray(b"\xaa" * d.LOG_META_DATA_LENGTH)
    d.write_log_params(meta, d.LogParams())  # every field 0
    written = [i for i in range(len(meta)) if meta[i] == 0]
    # 284..320 (windows, socket buffers, max resend), 448..496 (entity tag .. tether), the type,
    # 500..508 (untethered linger); not the revoked flag (the driver's at run time) nor padding
    assert written == [*range(284, 320), *range(448, 496), 497, *range(500, 508)]
