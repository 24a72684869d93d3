"""The control protocol's frames: what the driver reads of a command it refuses."""

from aeronio.protocol import control as p


def test_head_fields_reads_type_and_correlation_id_of_a_bad_or_cut_command():
    bad = p.pack(p.AddCounter(-5, 2**62, 2**40, b"", None))
    assert p.head_fields(bad) == {
        "type": "AddCounter",
        "correlation_id": -5,
        "client_id": 2**62,
        "type_id": 2**40,
    }  # stops at the key (bytes), as at anything but a string or an integer
    assert p.head_fields(bad[:40]) == {"type": "AddCounter", "correlation_id": -5}
    assert p.head_fields(bad[:32]) == {"type": "AddCounter"}  # correlation_id cut short
    for garbage in (b"", b"\xc1" * 8, b"\x93\x01\x02\x03", b"\x81\xa4typ"):
        assert p.head_fields(garbage) == {}
