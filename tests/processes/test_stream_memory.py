"""What a stream costs: an embedded driver (aeronio.connect()) makes sparse logs, so a small
service with one UDP publication and subscription takes memory as its logs fill; the one switch
back, term_buffer_sparse_file=False, gives Aeron's allocated, pre-faulted logs. Measured in a
child process each (VmRSS and the logs' allocated blocks)."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap

import pytest

from tests.support.ports import free_port

SERVICE = textwrap.dedent(
    """
    import asyncio, json, os, sys
    import aeronio

    async def main(setting, port):
        channel = f"aeron:udp?endpoint=127.0.0.1:{port}"
        options = {} if setting == "default" else {"term_buffer_sparse_file": setting == "true"}
        async with aeronio.connect(**options) as aeron:
            sub = await aeron.add_subscription(channel, 1)
            pub = await aeron.add_publication(channel, 1)
            await sub.wait_connected(timeout=10)
            for _ in range(100):
                await pub.offer(bytes(100))
            got = 0
            async for message in sub:
                got += 1
                if got == 100:
                    break
            status = open("/proc/self/status").read().split("VmRSS:")[1]
            logs = []
            for root, _, files in os.walk(aeron.driver_dir):
                for name in files:
                    if name.endswith(".logbuffer"):
                        st = os.stat(os.path.join(root, name))
                        logs.append([st.st_size, st.st_blocks * 512])
            print(json.dumps({"rss": int(status.split()[0]) * 1024, "logs": logs}))

    asyncio.run(main(sys.argv[1], sys.argv[2]))
    """
)


def measure(setting: str) -> dict:
    run = subprocess.run(
        [sys.executable, "-c", SERVICE, setting, str(free_port())],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert run.returncode == 0, run.stderr
    return json.loads(run.stdout)


@pytest.mark.slow  # three child processes with drivers and 48 MiB logs: about 9 s
def test_an_embedded_driver_takes_memory_as_logs_fill_and_one_switch_allocates():
    default, allocated = measure("default"), measure("false")
    log = 3 * 16 * 1024 * 1024 + 4096  # a default UDP log: three 16 MiB terms and metadata
    assert [size for size, _ in default["logs"]] == [log, log]  # the publication and the image
    # Not all of it: only what its writers may reach (driver/storage.py LogPages), a third at
    # most: a publication's window (half a term) and longest message (an eighth) past its
    # consumers, an image's term past its consumption, and the metadata page.
    assert all(taken < log // 3 + 8192 for _, taken in default["logs"])
    assert allocated["logs"] == [[log, log], [log, log]]  # all of it, at once
    assert allocated["rss"] - default["rss"] > 2 * log * 0.9  # and in memory: pre-faulted
    sparse = measure("true")  # the default is the sparse setting
    assert all(taken < log // 3 + 8192 for _, taken in sparse["logs"])
