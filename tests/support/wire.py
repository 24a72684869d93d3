"""Aeron's frame headers as numpy structured dtypes, written out from the specification apart
from aeronio.protocol.frames (whose codecs are made from its own tables), so that the wire tests
check the codecs against an independent description of the same bytes."""

import numpy as np

_COMMON_FIELDS = [
    ("frame_length", "<i4"),
    ("version", "u1"),
    ("flags", "u1"),
    ("type", "<u2"),
]

DATA_HEADER_DTYPE = np.dtype(
    [
        *_COMMON_FIELDS,
        ("term_offset", "<i4"),
        ("session_id", "<i4"),
        ("stream_id", "<i4"),
        ("term_id", "<i4"),
        ("reserved_value", "<i8"),
    ]
)
SETUP_HEADER_DTYPE = np.dtype(
    [
        *_COMMON_FIELDS,
        ("term_offset", "<i4"),
        ("session_id", "<i4"),
        ("stream_id", "<i4"),
        ("initial_term_id", "<i4"),
        ("active_term_id", "<i4"),
        ("term_length", "<i4"),
        ("mtu", "<i4"),
        ("ttl", "<i4"),
    ]
)
# The fixed 36 bytes of a Status Message; application-specific feedback (if any) follows.
STATUS_MESSAGE_DTYPE = np.dtype(
    [
        *_COMMON_FIELDS,
        ("session_id", "<i4"),
        ("stream_id", "<i4"),
        ("consumption_term_id", "<i4"),
        ("consumption_term_offset", "<i4"),
        ("receiver_window", "<i4"),
        ("receiver_id", "<i8"),
    ]
)
NAK_HEADER_DTYPE = np.dtype(
    [
        *_COMMON_FIELDS,
        ("session_id", "<i4"),
        ("stream_id", "<i4"),
        ("term_id", "<i4"),
        ("term_offset", "<i4"),
        ("length", "<i4"),
    ]
)
RTTM_HEADER_DTYPE = np.dtype(
    [
        *_COMMON_FIELDS,
        ("session_id", "<i4"),
        ("stream_id", "<i4"),
        ("echo_timestamp", "<i8"),
        ("reception_delta", "<i8"),
        ("receiver_id", "<i8"),
    ]
)
