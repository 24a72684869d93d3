"""Capture pieces of the cnc.dat Aeron's C media driver (1.53, through pyaeron) writes, for
tests/unit/test_cnc_aeron_c.py. Run once with a Python that has pyaeron:

    /work/venv312/bin/python tests/data/aeron_c/capture_cnc.py

It starts pyaeron.MediaDriver in a temp dir (removed after) with its default buffer lengths, has
a pyaeron client add a publication and a subscription on aeron:ipc (an image comes) and try an
invalid channel twice (the driver records one distinct error, observed twice), then copies:

- cnc_header.bin: the 128-byte header;
- cnc_to_driver_trailer.bin: the to-driver ring buffer's 768-byte trailer (its tail, head,
  correlation counter and consumer heartbeat);
- cnc_counters_metadata.bin, cnc_counters_values.bin: the first COUNTERS counters' records
  (512 and 128 bytes each);
- cnc_error_log.bin: the error log's records, up to the first zero length.
"""

import os
import shutil
import struct
import tempfile

import pyaeron
from capture_support import wait

HERE = os.path.dirname(os.path.abspath(__file__))
HEADER_LENGTH = 128
RB_TRAILER_LENGTH = 768
COUNTERS = 64


def save(name: str, data: bytes) -> None:
    with open(os.path.join(HERE, name), "wb") as f:
        f.write(data)


def error_records(log: bytes) -> bytes:
    end = 0
    while end + 24 <= len(log):
        (length,) = struct.unpack_from("<i", log, end)
        if length <= 0:
            break
        end += (length + 7) & ~7
    return log[:end]


def main() -> None:
    base = tempfile.mkdtemp(prefix="aeron-c-cnc-")
    try:
        driver = pyaeron.MediaDriver(dir=os.path.join(base, "aeron"), threading="shared")
        try:
            aeron = pyaeron.Aeron(dir=driver.dir)
            pub = aeron.add_publication("aeron:ipc", 1001)
            sub = aeron.add_subscription("aeron:ipc", 1001)
            wait(lambda: pub.is_connected and sub.is_connected, "the IPC image")
            for _ in range(2):
                try:
                    aeron.add_publication("aeron:udp?endpoint=", 1002)
                except pyaeron.AeronError:
                    pass
                else:
                    raise AssertionError("the invalid channel was accepted")
            path = os.path.join(driver.dir, "cnc.dat")
            with open(path, "rb") as f:
                raw = f.read()
            lengths = struct.unpack_from("<5i", raw, 4)
            starts = [HEADER_LENGTH]
            for length in lengths:
                starts.append(starts[-1] + length)
            to_driver, _, metadata, values, errors = starts[:5]
            wait(
                lambda: error_records(open(path, "rb").read()[errors:]) != b"",
                "the error in the error log",
            )
            with open(path, "rb") as f:
                raw = f.read()
            save("cnc_header.bin", raw[:HEADER_LENGTH])
            trailer = to_driver + lengths[0] - RB_TRAILER_LENGTH
            save("cnc_to_driver_trailer.bin", raw[trailer : trailer + RB_TRAILER_LENGTH])
            save("cnc_counters_metadata.bin", raw[metadata : metadata + COUNTERS * 512])
            save("cnc_counters_values.bin", raw[values : values + COUNTERS * 128])
            save("cnc_error_log.bin", error_records(raw[errors : errors + lengths[4]]))
            aeron.close()
        finally:
            driver.close()
    finally:
        shutil.rmtree(base, ignore_errors=True)


if __name__ == "__main__":
    main()
