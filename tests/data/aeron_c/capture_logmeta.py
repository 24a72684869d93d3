"""Capture the log buffer metadata pages Aeron's C media driver (1.53, through pyaeron) writes,
for tests/driver/test_log_metadata_aeron_c.py. Run once with a Python that has pyaeron:

    /work/venv312/bin/python tests/data/aeron_c/capture_logmeta.py

It starts pyaeron.MediaDriver in a temp dir (removed after) with the settings in SETTINGS,
adds an IPC publication (no subscriber), an exclusive UDP publication and a subscription on
the same endpoint (so an image comes), waits until both ends are connected and the image's
driver counted its sender, and copies the last 4096 bytes (the metadata) of each log file to
logmeta_<name>.bin, with logmeta.json naming each page's channel, stream id and the driver
settings, so the test can make the same on aeronio.
"""

import json
import os
import shutil
import socket
import tempfile

import pyaeron
from capture_support import wait

HERE = os.path.dirname(os.path.abspath(__file__))
META_LENGTH = 4096
ACTIVE_TRANSPORT_COUNT = 140  # offset in the metadata (i32, little-endian: its low byte)
SETTINGS = {  # the C driver's; aeronio's DriverContext gets the same values
    "term_length": 65536,
    "ipc_term_length": 65536,
    "mtu_length": 1408,
    "term_buffer_sparse_file": True,  # Aeron C's default
    "spies_simulate_connection": False,
}
IPC_CHANNEL = "aeron:ipc"
# The exclusive publication pins its session and position so the image's page is predictable;
# tags, linger, so-sndbuf and sparse are set to show them in the metadata.
UDP_PUB_PARAMS = (
    "session-id=777|init-term-id=1000|term-id=1002|term-offset=4096|linger=2000000000"
    "|tags=11,22|so-sndbuf=262144|sparse=false"
)
UDP_SUB_PARAMS = "rcv-wnd=65536|so-rcvbuf=131072"


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def metadata(path: str) -> bytes:
    with open(path, "rb") as f:
        f.seek(-META_LENGTH, os.SEEK_END)
        return f.read()


def main() -> None:
    base = tempfile.mkdtemp(prefix="aeron-c-logmeta-")
    try:
        endpoint = f"aeron:udp?endpoint=127.0.0.1:{free_port()}"
        pages = {
            "ipc_publication": {"channel": IPC_CHANNEL, "stream_id": 1001},
            "exclusive_udp_publication": {
                "channel": f"{endpoint}|{UDP_PUB_PARAMS}",
                "stream_id": 1002,
                "exclusive": True,
            },
            "image": {"channel": f"{endpoint}|{UDP_SUB_PARAMS}", "stream_id": 1002},
        }
        driver = pyaeron.MediaDriver(
            dir=os.path.join(base, "aeron"),
            threading="shared",
            term_buffer_length=SETTINGS["term_length"],
            ipc_term_buffer_length=SETTINGS["ipc_term_length"],
            mtu_length=SETTINGS["mtu_length"],
            spies_simulate_connection=SETTINGS["spies_simulate_connection"],
        )
        try:
            aeron = pyaeron.Aeron(dir=driver.dir)
            ipc = aeron.add_publication(pages["ipc_publication"]["channel"], 1001)
            pub = aeron.add_exclusive_publication(
                pages["exclusive_udp_publication"]["channel"], 1002
            )
            sub = aeron.add_subscription(pages["image"]["channel"], 1002)
            wait(lambda: pub.is_connected and sub.image_count == 1, "UDP publication connected")
            assert not ipc.is_connected  # no subscriber: its page stays as created
            logs = {
                "ipc_publication": os.path.join(driver.dir, "publications", "2.logbuffer"),
                "exclusive_udp_publication": os.path.join(
                    driver.dir, "publications", "3.logbuffer"
                ),
                "image": next(
                    os.path.join(driver.dir, "images", name)
                    for name in os.listdir(os.path.join(driver.dir, "images"))
                ),
            }
            # the image's active transport count: 1 once the C driver counted its sender
            wait(lambda: metadata(logs["image"])[ACTIVE_TRANSPORT_COUNT] == 1, "transport count")
            for name, path in logs.items():
                page = metadata(path)
                with open(os.path.join(HERE, f"logmeta_{name}.bin"), "wb") as f:
                    f.write(page)
            aeron.close()
        finally:
            driver.close()
        with open(os.path.join(HERE, "logmeta.json"), "w") as f:
            json.dump(
                {"aeron_version": pyaeron.aeron_version, "settings": SETTINGS, "pages": pages},
                f,
                indent=2,
            )
            f.write("\n")
    finally:
        shutil.rmtree(base, ignore_errors=True)


if __name__ == "__main__":
    main()
