"""The `rec-pos` counter's key and label (Aeron 1.15.1's RecordingPos), and finding recordings'
positions in the counters through it."""

from aeronio.archive.recording_pos import RECORDING_POSITION_TYPE_ID, RecordingPos
from aeronio.counters import CountersManager, CountersReader

IDENTITY = "127.0.0.1:40123"


def test_the_key_is_aerons_layout_byte_for_byte():
    assert RecordingPos.key(7, -3, IDENTITY) == (
        bytes.fromhex("0700000000000000fdffffff0f000000") + IDENTITY.encode()
    )
    long = "h" * 120  # the key holds 96 bytes of it, its length word the whole length
    assert RecordingPos.key(1, 2, long) == (
        bytes.fromhex("01000000000000000200000078000000") + b"h" * 96
    )
    assert RecordingPos.label(7, -3, 1001, "aeron:ipc") == "rec-pos: 7 -3 1001 aeron:ipc"


def test_positions_are_found_by_type_and_decoded_from_the_key():
    values = bytearray(128 * 8)
    metadata = bytearray(len(values) * 4)
    manager = CountersManager(memoryview(metadata), memoryview(values))
    for recording_id, position in ((5, 4096), (2**40, 96)):
        key = RecordingPos.key(recording_id, 11, IDENTITY)
        counter_id = manager.allocate("rec-pos", RECORDING_POSITION_TYPE_ID, key)
        manager.counter(counter_id).set(position)
    other = manager.allocate(
        "not rec-pos", RECORDING_POSITION_TYPE_ID + 1, RecordingPos.key(9, 0, "")
    )
    manager.counter(other).set(1)
    with CountersReader(memoryview(metadata), memoryview(values)) as reader:
        assert RecordingPos.positions(reader) == {5: 4096, 2**40: 96}
    manager.close()
