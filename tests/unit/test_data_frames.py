"""DATA, PAD and heartbeat frames captured from the reference Aeron 1.15.1: the codec decodes
them to the documented fields, and the appender writes byte-identical frames for the same
messages at the same place in the term."""

import json
from pathlib import Path

import numpy as np
import pytest

from aeronio import _core
from aeronio.logbuffer.log_buffers import LogBuffers
from aeronio.protocol.frames import HDR_TYPE_PAD, DataHeader, data_header
from tests.support.wire import DATA_HEADER_DTYPE

VECTORS = Path(__file__).parents[1] / "data" / "wire-vectors"
INDEX = {
    v["file"]: v
    for v in json.loads((VECTORS / "index.json").read_text())
    if isinstance(v["decoded"], dict)
}
FIELDS = DataHeader._fields
FRAME_FILES = sorted(
    f for f, v in INDEX.items() if v["decoded"]["type"] in (0, 1) and (VECTORS / f).exists()
)


def vector(name: str) -> bytes:
    return (VECTORS / name).read_bytes()


@pytest.mark.parametrize("name", FRAME_FILES)
def test_decode_matches_documented_fields(name):
    decoded = INDEX[name]["decoded"]
    header = DataHeader.decode(vector(name))
    assert header._asdict() == {k: decoded[k] for k in FIELDS}
    core = _core.Header.decode(vector(name))
    assert [getattr(core, k) for k in FIELDS] == list(header)


@pytest.mark.parametrize("name", FRAME_FILES)
def test_encode_is_byte_identical(name):
    decoded = INDEX[name]["decoded"]
    encoded = data_header(**{k: decoded[k] for k in FIELDS if k != "version"}).encode()
    assert encoded == vector(name)[:32]
    array = np.frombuffer(vector(name)[:32], dtype=DATA_HEADER_DTYPE)
    assert {k: int(array[k][0]) for k in FIELDS} == {k: decoded[k] for k in FIELDS}


def _log_at(tmp_path, decoded, term_length, initial_term_id=None):
    return LogBuffers.create(
        tmp_path / "log",
        term_length=term_length,
        initial_term_id=decoded["term_id"] if initial_term_id is None else initial_term_id,
        session_id=decoded["session_id"],
        stream_id=decoded["stream_id"],
        mtu=1408,
        term_id=decoded["term_id"],
        term_offset=decoded["term_offset"],
    )


def _appender(log):
    limit = np.zeros(8, dtype=np.uint8)
    _core.AtomicBuffer(limit).put_int64_ordered(0, 2**62)
    return _core.LogAppender(log.mapped, limit, 0, False)


def _term_bytes(log, offset, length):
    return bytes(log.term(0)[offset : offset + length])  # the log starts at term count 0


UNFRAGMENTED_DATA = [f for f in FRAME_FILES if INDEX[f]["decoded"]["kind"] == "DATA-unfragmented"]


@pytest.mark.parametrize("name", UNFRAGMENTED_DATA)
def test_appender_writes_the_captured_data_frame(tmp_path, name):
    raw = vector(name)
    decoded = INDEX[name]["decoded"]
    log = _log_at(tmp_path, decoded, 16 * 1024 * 1024 if decoded["term_offset"] > 2048 else 65536)
    assert _appender(log).try_offer(raw[32 : decoded["frame_length"]]) > 0
    assert _term_bytes(log, decoded["term_offset"], len(raw)) == raw


def test_appender_writes_the_captured_fragments(tmp_path):
    frames = [vector(f"data-{i}.bin") for i in (2, 3, 4)]
    first = INDEX["data-2.bin"]["decoded"]
    lengths = [INDEX[f"data-{i}.bin"]["decoded"]["frame_length"] for i in (2, 3, 4)]
    message = b"".join(f[32:n] for f, n in zip(frames, lengths, strict=True))
    assert len(message) == 3000
    log = _log_at(tmp_path, first, 16 * 1024 * 1024)
    assert _appender(log).try_offer(message) > 0
    assert _term_bytes(log, first["term_offset"], sum(map(len, frames))) == b"".join(frames)


@pytest.mark.parametrize("name", [f for f in FRAME_FILES if f.startswith("pad-")])
def test_appender_pads_the_term_end_like_the_reference(tmp_path, name):
    decoded = INDEX[name]["decoded"]
    assert decoded["type"] == HDR_TYPE_PAD
    log = _log_at(tmp_path, decoded, 65536)
    appender = _appender(log)
    too_big = decoded["frame_length"]  # payload + 32 header > what is left in the term
    assert appender.try_offer(bytes(too_big)) == _core.ADMIN_ACTION
    assert _term_bytes(log, decoded["term_offset"], 32) == vector(name)
