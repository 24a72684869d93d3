"""The archive keys channels as Aeron Archive 1.15.1 does (`ChannelUri.stripped_channel` and
`recording_key`, checked against the jar in tests/interop/test_channel_identity_java.py): the
catalog's stripped channel in Aeron's parameter order, alias kept; one recording subscription per
source, whatever its session-id."""
# ruff: noqa: F811 (the fixtures of test_archive.py, imported, are the tests' arguments)

import pytest

from aeronio import archive
from aeronio.archive.codecs import ErrorCode
from tests.driver.test_archive import (  # noqa: F401 (fixtures)
    STREAM,
    TERM,
    aeron,
    arch,
    client,
    messages,
    publish,
    wait_recorded,
)


async def test_stripped_channel_and_one_recording_subscription_per_source(aeron, arch, client):
    channel = f"aeron:ipc?alias=prices|term-length={TERM}|session-id=7"
    await client.start_recording(channel, STREAM)
    with pytest.raises(archive.ArchiveError) as caught:  # another session, the same source
        await client.start_recording("aeron:ipc?session-id=8", STREAM)
    assert caught.value.error_code == ErrorCode.ACTIVE_SUBSCRIPTION
    publication = await aeron.add_exclusive_publication(
        f"aeron:ipc?term-length={TERM}|session-id=7", STREAM
    )
    end = await publish(publication, messages(5))
    await wait_recorded(client, 0, end)
    descriptor = arch.catalog.descriptor(0)
    assert (descriptor.stripped_channel, descriptor.original_channel) == (
        "aeron:ipc?session-id=7|alias=prices",
        channel,
    )
    await client.stop_recording("aeron:ipc?session-id=9", STREAM)  # the same source: stopped
    assert not arch.conductor.recording_subscriptions
