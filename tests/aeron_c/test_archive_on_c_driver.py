"""aeronio's archive as a client of Aeron's C media driver (1.53): it records a pyaeron
publication and replays it."""

import asyncio
import signal

import aeronio
from aeronio import archive
from tests.aeron_c.streams import COUNT, SIZES, expected, receive
from tests.support.procs import CLI

STREAM = 1001


async def test_the_archive_records_and_replays_a_pyaeron_publication_on_a_c_driver(
    aeron_c, tmp_path
):
    dir = aeron_c.new_dir()
    await aeron_c.pyaeron("driver", dir=dir).aexpect_json("ready", 30)
    async with (
        aeronio.connect(dir) as aeron,
        archive.Archive.launch(aeron, archive_dir=tmp_path / "archive", **archive.LOCAL_ARCHIVE),
        archive.connect(aeron, **archive.LOCAL) as client,
    ):
        await client.start_recording("aeron:ipc", STREAM)
        publisher = aeron_c.pyaeron(
            "publish", dir=dir, channel="aeron:ipc", stream_id=STREAM, count=COUNT, sizes=SIZES
        )
        session_id = (await publisher.aexpect_json("publication", 30))["session_id"]
        sent = (await publisher.aexpect_json("sent", 60))["position"]
        async with asyncio.timeout(30):
            while await client.get_recording_position(0) < sent:
                await asyncio.sleep(0.01)
        [recording] = await client.list_recordings()
        assert (recording.session_id, recording.stream_id) == (session_id, STREAM)
        assert recording.start_position == 0

        replay = await client.replay(0, 0, sent, "aeron:ipc", 2002)
        assert await receive(replay, COUNT) == expected()
        await replay.close()


async def test_archive_serve_on_a_c_driver_records_and_replays_a_pyaeron_publication(
    aeron_c, tmp_path
):
    """`aeronio archive serve --driver-dir` as a process of its own, a client of Aeron's C
    driver: a client here has it record a pyaeron publication, then replays it."""
    dir = aeron_c.new_dir()
    await aeron_c.pyaeron("driver", dir=dir).aexpect_json("ready", 30)
    serve = aeron_c.spawn(
        [*CLI, "archive", "serve", "--dir", str(tmp_path / "archive"), "--driver-dir", dir,
         "--control-channel", "aeron:ipc", "--recording-events-channel", "aeron:ipc"],
        "archive serve",
    )  # fmt: skip
    ready = await serve.aexpect("aeronio archive pid", timeout=60)
    assert f"driver {dir}," in ready, ready
    async with aeronio.connect(dir) as aeron, archive.connect(aeron, **archive.LOCAL) as client:
        await client.start_recording("aeron:ipc", STREAM)
        publisher = aeron_c.pyaeron(
            "publish", dir=dir, channel="aeron:ipc", stream_id=STREAM, count=COUNT, sizes=SIZES
        )
        sent = (await publisher.aexpect_json("sent", 60))["position"]
        async with asyncio.timeout(30):
            while await client.get_recording_position(0) < sent:
                await asyncio.sleep(0.01)
        replay = await client.replay(0, 0, sent, "aeron:ipc", 2003)
        assert await receive(replay, COUNT) == expected()
        await replay.close()
    serve.send_signal(signal.SIGTERM)
    assert await serve.await_exit(30) == 0, serve.describe()
