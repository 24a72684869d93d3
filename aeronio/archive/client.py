"""ArchiveClient (the reference's AeronArchive): asks an archive, over Aeron, to record, list,
replay and truncate; speaks the reference 1.15.1 control protocol, so it works with the Java
archive as with aeronio's.

    async with archive.connect(aeron) as client:
        subscription_id = await client.start_recording(channel, stream_id)

One request at a time per client (a lock orders concurrent callers, as the reference's client
does): the request goes on the control publication, then responses are read until the one with
its correlation id (responses for other sessions sharing the response stream are skipped).
"""

from __future__ import annotations

import asyncio
import collections
import contextlib
import logging
import random
from collections.abc import AsyncGenerator, Callable, Generator
from typing import Any

from aeronio._core import Message
from aeronio.archive import codecs, context
from aeronio.archive.codecs import NULL_POSITION, ControlResponseCode, SourceLocation
from aeronio.archive.errors import ArchiveError, ArchiveTimeoutError
from aeronio.archive.replay_merge import Action as MergeAction
from aeronio.archive.replay_merge import ReplayMerge
from aeronio.archive.replay_merge import State as MergeState
from aeronio.client.aeron import Aeron
from aeronio.client.publication import Publication
from aeronio.client.subscription import Image, Subscription
from aeronio.errors import AeronError, ImageUnavailableError
from aeronio.protocol.channel import ChannelUri

NULL_LENGTH = -1
log = logging.getLogger("aeronio.archive")
# What undoes a request's result: (control session id, correlation id, its relevant id) -> the
# request that undoes it (StopRecordingSubscriptionRequest, StopReplayRequest).
Undo = Callable[[int, int, int], codecs.Message]


class ArchiveClient:
    """A control session with an archive (`aeronio.archive.connect`): start and stop
    recordings, list them, replay them (a subscription), replay-merge into a live stream."""

    def __init__(
        self,
        aeron: Aeron,
        publication: Publication,
        subscription: Subscription,
        message_timeout_s: float,
        recording_events_channel: str,
        recording_events_stream_id: int,
    ):
        self.aeron = aeron
        self.publication = publication
        self.subscription = subscription
        self.message_timeout_s = message_timeout_s
        self.recording_events_channel = recording_events_channel
        self.recording_events_stream_id = recording_events_stream_id
        self.control_session_id = -1
        self._next_correlation_id = random.getrandbits(48)
        self._lock = asyncio.Lock()
        self._errors: collections.deque[ArchiveError] = collections.deque()
        # Requests sent whose caller gave up (cancelled, or no answer in time): what undoes
        # what each made, sent when its late OK is read (None: its answer is only dropped).
        self._abandoned: dict[int, Undo | None] = {}
        self.is_closed = False

    # -- the exchange ---------------------------------------------------------------------

    def _correlation_id(self) -> int:
        self._next_correlation_id += 1
        return self._next_correlation_id

    async def _send(self, request: codecs.Message) -> None:
        """Send `request` (ValueError naming a field that does not fit it); ArchiveTimeoutError
        if the archive does not take it in time (a lost driver's error as it is)."""
        if self.is_closed:
            raise ArchiveError("the archive client is closed")
        data = request.encode()
        try:
            await self.publication.offer(data, timeout=self.message_timeout_s)
        except AeronError:  # DriverTimeoutError is a TimeoutError too: not the archive's
            raise
        except TimeoutError as e:  # the publication's: say whose
            raise ArchiveTimeoutError(
                f"the archive did not take a {type(request).__name__} within "
                f"{self.message_timeout_s} s ({e})"
            ) from e

    async def _next(self, correlation_id: int, deadline: float) -> codecs.SessionMessage:
        """The next response for this request (a ControlResponse or a RecordingDescriptor)."""
        loop = asyncio.get_running_loop()
        while True:
            left = deadline - loop.time()
            if left <= 0:
                raise ArchiveError(
                    f"no response from the archive for correlation id {correlation_id} within "
                    f"{self.message_timeout_s} s",
                    correlation_id=correlation_id,
                )
            try:
                # Not wait_for: on Python 3.11 a cancel that meets the answer is lost there
                # (the task goes on, as if never cancelled); asyncio.timeout keeps it.
                async with asyncio.timeout(left):
                    message = await self.subscription.receive()
            except (TimeoutError, ImageUnavailableError):  # a response lost with it: deadline
                continue
            response = self._decode(message, correlation_id)
            if response is not None:
                return response

    def _decode(self, message: Message, awaited: int | None = None) -> codecs.SessionMessage | None:
        """The response to request `awaited` for this session (not another's sharing the
        stream), or None. An ERROR for another of its requests (sent after answering it: a
        replay ended by damage) is kept for `poll_for_error_response`."""
        try:
            response = codecs.decode(message.data)
        except codecs.CodecError:
            return None
        if not isinstance(response, codecs.SessionMessage) or (
            self.control_session_id != -1 and response.control_session_id != self.control_session_id
        ):
            return None
        if response.correlation_id == awaited:
            return response
        if response.correlation_id in self._abandoned:
            self._undo(response, self._abandoned.pop(response.correlation_id))
            return None
        if (
            self.control_session_id != -1
            and isinstance(response, codecs.ControlResponse)
            and response.code == ControlResponseCode.ERROR
        ):
            self._errors.append(
                ArchiveError(response.error_message, response.relevant_id, response.correlation_id)
            )
        return None

    def poll_for_error_response(self) -> ArchiveError | None:
        """The oldest ERROR the archive sent for a request it had already answered (a replay
        that met damaged or missing recorded bytes: its message names the recording, position
        and file, and the replay's image ends; a replay that ended before it was complete,
        its subscriber gone or never there; a recording whose image was refused: an
        extension that does not continue it, a full catalog), or None (current Aeron's
        `pollForErrorResponse`). Reads the responses that came, unless a request is waiting
        for its answer (it keeps those it skips)."""
        self._read_late_responses()
        return self._errors.popleft() if self._errors else None

    def _read_late_responses(self) -> None:
        """Take the responses that came, unless a request is waiting for its answer."""
        if not self._lock.locked():
            while self.subscription._has_pending():
                self._decode(self.subscription._take_one())

    async def _request(
        self, make: Callable[[int, int], codecs.Message], undo: Undo | None = None
    ) -> int:
        """Send a request; its OK response's relevant id (ArchiveError for an ERROR). Given up
        once sent (cancelled, or no answer in time), what it made is undone by `undo` when its
        late OK is read."""
        return (await self._exchange(make, undo))[1]

    async def _exchange(
        self, make: Callable[[int, int], codecs.Message], undo: Undo | None = None
    ) -> tuple[int, int]:
        """Send a request; (its correlation id, its OK response's relevant id)."""
        async with self._lock:
            correlation_id = self._correlation_id()
            await self._send(make(self.control_session_id, correlation_id))
            deadline = asyncio.get_running_loop().time() + self.message_timeout_s
            try:
                response = await self._next(correlation_id, deadline)
            except BaseException:  # given up: its answer, should it come, is not the caller's
                self._abandoned[correlation_id] = undo
                raise
        return correlation_id, _relevant_id(response)

    def _undo(self, response: codecs.SessionMessage, undo: Undo | None) -> None:
        """The late answer to an abandoned request: what its OK made is undone (the undo's
        answer dropped in turn); an ERROR, or nothing to undo, is dropped."""
        if (
            undo is None
            or not isinstance(response, codecs.ControlResponse)
            or response.code != ControlResponseCode.OK
        ):
            return
        correlation_id = self._correlation_id()
        request = undo(self.control_session_id, correlation_id, response.relevant_id)
        if self.publication.try_offer(request.encode()) > 0:
            self._abandoned[correlation_id] = None
        else:
            log.warning(
                "archive client: could not send %s for request %d given up: %d",
                type(request).__name__,
                response.correlation_id,
                response.relevant_id,
            )

    async def _list(self, make: Callable[[int, int], codecs.Message], count: int) -> list:
        """Send a listing request; the descriptors until `count` or RECORDING_UNKNOWN."""
        found: list[codecs.RecordingDescriptor] = []
        async with self._lock:
            correlation_id = self._correlation_id()
            await self._send(make(self.control_session_id, correlation_id))
            loop = asyncio.get_running_loop()
            while len(found) < count:
                deadline = loop.time() + self.message_timeout_s
                response = await self._next(correlation_id, deadline)
                if isinstance(response, codecs.RecordingDescriptor):
                    found.append(response)
                elif (
                    isinstance(response, codecs.ControlResponse)
                    and response.code == ControlResponseCode.RECORDING_UNKNOWN
                ):
                    break
                else:
                    _relevant_id(response)
        return found

    async def _connect(self, response_channel: str, response_stream_id: int) -> None:
        correlation_id = self._correlation_id()
        request = codecs.ConnectRequest(correlation_id, response_stream_id, response_channel)
        await self._send(request)
        deadline = asyncio.get_running_loop().time() + self.message_timeout_s
        response = await self._next(correlation_id, deadline)
        _relevant_id(response)
        self.control_session_id = response.control_session_id

    # -- recording ------------------------------------------------------------------------

    async def start_recording(
        self, channel: str, stream_id: int, source_location: SourceLocation = SourceLocation.LOCAL
    ) -> int:
        """Record every image of `channel`/`stream_id`; returns the archive's subscription id."""
        return await self._request(
            lambda s, c: codecs.StartRecordingRequest(s, c, stream_id, source_location, channel),
            codecs.StopRecordingSubscriptionRequest,
        )

    async def extend_recording(
        self,
        recording_id: int,
        channel: str,
        stream_id: int,
        source_location: SourceLocation = SourceLocation.LOCAL,
    ) -> int:
        """Record a stream that continues a stopped recording (same initial term id, term length
        and MTU, joining at its stop position); returns the subscription id."""
        return await self._request(
            lambda s, c: codecs.ExtendRecordingRequest(
                s, c, recording_id, stream_id, source_location, channel
            ),
            codecs.StopRecordingSubscriptionRequest,
        )

    async def stop_recording(self, channel: str, stream_id: int) -> None:
        """Stop recording `channel` and `stream_id` (ArchiveError if it is not recorded)."""
        await self._request(lambda s, c: codecs.StopRecordingRequest(s, c, stream_id, channel))

    async def stop_recording_subscription(self, subscription_id: int) -> None:
        """Stop the recording started as `subscription_id` (start_recording's result)."""
        await self._request(
            lambda s, c: codecs.StopRecordingSubscriptionRequest(s, c, subscription_id)
        )

    async def get_recording_position(self, recording_id: int) -> int:
        """The recorded position of an active recording, NULL_POSITION (-1) when not active."""
        return await self._request(lambda s, c: codecs.RecordingPositionRequest(s, c, recording_id))

    async def get_stop_position(self, recording_id: int) -> int:
        """The stop position (NULL_POSITION while the recording is active)."""
        return await self._request(lambda s, c: codecs.StopPositionRequest(s, c, recording_id))

    async def truncate_recording(self, recording_id: int, position: int) -> None:
        """Cut a stopped recording back to `position` (refused for an active recording or one
        being replayed)."""
        await self._request(
            lambda s, c: codecs.TruncateRecordingRequest(s, c, recording_id, position)
        )

    # -- catalog --------------------------------------------------------------------------

    async def list_recordings(
        self, from_recording_id: int = 0, record_count: int = 2**31 - 1
    ) -> list[codecs.RecordingDescriptor]:
        """The descriptors of up to `record_count` recordings from `from_recording_id`."""
        return await self._list(
            lambda s, c: codecs.ListRecordingsRequest(s, c, from_recording_id, record_count),
            record_count,
        )

    async def list_recordings_for_uri(
        self,
        channel_fragment: str,
        stream_id: int,
        from_recording_id: int = 0,
        record_count: int = 2**31 - 1,
    ) -> list[codecs.RecordingDescriptor]:
        """Recordings of `stream_id` whose channel contains `channel_fragment`."""
        return await self._list(
            lambda s, c: codecs.ListRecordingsForUriRequest(
                s, c, from_recording_id, record_count, stream_id, channel_fragment
            ),
            record_count,
        )

    async def list_recording(self, recording_id: int) -> codecs.RecordingDescriptor | None:
        """The descriptor of one recording, or None if there is no such recording."""
        found = await self._list(lambda s, c: codecs.ListRecordingRequest(s, c, recording_id), 1)
        return found[0] if found else None

    async def find_last_matching_recording(
        self, min_recording_id: int, channel_fragment: str, stream_id: int, session_id: int
    ) -> int:
        """The last recording id from `min_recording_id` of that stream and session whose
        channel contains `channel_fragment`, or -1."""
        return await self._request(
            lambda s, c: codecs.FindLastMatchingRecordingRequest(
                s, c, min_recording_id, session_id, stream_id, channel_fragment
            )
        )

    # -- replay ---------------------------------------------------------------------------

    async def start_replay(
        self, recording_id: int, position: int, length: int, channel: str, stream_id: int
    ) -> int:
        """Replay `length` bytes (NULL_LENGTH: to the end, following a live recording) from
        `position` (NULL_POSITION: the start) to `channel`/`stream_id`; returns the replay
        session id, whose low 32 bits are the replay's session id."""
        return (await self._start_replay(recording_id, position, length, channel, stream_id))[1]

    async def _start_replay(
        self, recording_id: int, position: int, length: int, channel: str, stream_id: int
    ) -> tuple[int, int]:
        """start_replay's request: (its correlation id, the replay session id)."""
        return await self._exchange(
            lambda s, c: codecs.ReplayRequest(
                s, c, recording_id, position, length, stream_id, channel
            ),
            codecs.StopReplayRequest,
        )

    async def stop_replay(self, replay_session_id: int) -> None:
        """Stop a replay by its replay session id."""
        await self._request(lambda s, c: codecs.StopReplayRequest(s, c, replay_session_id))

    async def replay(
        self, recording_id: int, position: int, length: int, channel: str, stream_id: int
    ) -> Subscription:
        """A subscription to `channel`/`stream_id` receiving the replay (its image's session id
        is the replay session id's low 32 bits)."""
        subscription = await self.aeron.add_subscription(channel, stream_id)
        try:
            await self.start_replay(recording_id, position, length, channel, stream_id)
        except BaseException:
            await subscription.close()
            raise
        return subscription

    async def replay_merge(
        self,
        recording_id: int,
        stream_id: int,
        replay_destination: str,
        live_destination: str,
        *,
        position: int = NULL_POSITION,
        remerge: bool = False,
        subscription_channel: str = "aeron:udp?control-mode=manual",
        poll_interval_s: float = 0.005,
    ) -> AsyncGenerator[Message, None]:
        """Every message of a live stream from `position` (NULL_POSITION: the recording's
        start), first from its recording, then from the live stream: replayed to
        `replay_destination` (`aeron:udp?endpoint=host:port`), joined on `live_destination`
        once caught up (see `replay_merge.ReplayMerge`). Closing the iterator stops the replay
        and closes the subscription.

        Nothing is skipped: if the stream's image goes away or is replaced (the subscriber fell
        too far behind the live stream and the driver dropped its image, the replay broke off),
        ImageUnavailableError, whose `position` is just after the last message yielded (as
        Aeron's ReplayMerge fails); with `remerge=True` it merges again from that position
        through the archive instead, so that every message comes once, in order. A replay the
        archive ends with an error (damaged or missing recorded bytes) raises that
        ArchiveError, and an attempt that delivers nothing before it is lost again raises
        ImageUnavailableError even with `remerge=True`: merging again would not get further."""
        descriptor = await self.list_recording(recording_id)
        if descriptor is None:
            raise ArchiveError(
                f"unknown recording id {recording_id}", codecs.ErrorCode.UNKNOWN_RECORDING
            )
        if position == NULL_POSITION:
            position = descriptor.start_position
        session_id = descriptor.session_id  # the stream's image; any other session is not it
        replay_channel = str(
            ChannelUri.parse(replay_destination).with_params(session_id=session_id)
        )
        loop = asyncio.get_running_loop()
        while True:
            subscription = await self.aeron.add_subscription(subscription_channel, stream_id)
            request = replay_session_id = None
            attempt_from = position
            try:
                await subscription.add_destination(replay_destination)
                request, replay_session_id = await self._start_replay(
                    recording_id, position, NULL_LENGTH, replay_channel, stream_id
                )
                merge = ReplayMerge(descriptor.term_buffer_length)
                image = None
                next_check = 0.0
                while merge.state is not MergeState.MERGED:
                    image = _same_image(subscription, session_id, image, position)
                    messages: list[Message] = []
                    if image is not None:
                        image.poll_messages(messages, 256)
                    for message in messages:
                        position = message.position
                        yield message
                    if loop.time() >= next_check:
                        next_check = loop.time() + poll_interval_s
                        if not messages and (image is None or image.is_end_of_stream):
                            self._raise_replay_error(request)  # once what came is yielded
                        await self._merge_step(
                            merge, subscription, image, recording_id, live_destination
                        )
                    if not messages:
                        await asyncio.sleep(0.0005)
                await self._stop_replay_if_running(replay_session_id)
                replay_session_id = None
                await subscription.remove_destination(replay_destination)
                while True:  # merged: the live stream, parked between
                    try:
                        async for batch in subscription.batches():
                            _same_image(subscription, session_id, image, position)
                            for message in batch:
                                if message.header.session_id == session_id:
                                    position = message.position
                                    yield message
                        return
                    except ImageUnavailableError as lost:
                        if lost.session_id == session_id:
                            raise _lost_at(session_id, stream_id, position) from lost
            except ImageUnavailableError as lost:
                if request is not None:
                    self._raise_replay_error(request)
                if not remerge or position == attempt_from:
                    raise
                log.warning("%s: merging again from the recording", lost)
            finally:
                try:
                    if replay_session_id is not None and not self.is_closed:
                        with contextlib.suppress(AeronError):
                            await self.stop_replay(replay_session_id)
                finally:
                    await subscription.close()

    def _raise_replay_error(self, request: int) -> None:
        """Raise the ERROR the archive sent for the replay started by `request` (damaged
        recorded bytes), if it came; other requests' ERRORs stay for poll_for_error_response."""
        self._read_late_responses()
        for error in self._errors:
            if error.correlation_id == request:
                self._errors.remove(error)
                raise error

    async def _stop_replay_if_running(self, replay_session_id: int) -> None:
        """Stop a replay, which may have ended already (UNKNOWN_REPLAY: it has)."""
        try:
            await self.stop_replay(replay_session_id)
        except ArchiveError as e:
            if e.error_code != codecs.ErrorCode.UNKNOWN_REPLAY:
                raise

    async def _merge_step(
        self,
        merge: ReplayMerge,
        subscription: Subscription,
        image: Image | None,
        recording_id: int,
        live: str,
    ) -> None:
        recorded = await self._recorded_position(recording_id)
        action = merge.step(None if image is None else image.position, recorded)
        if action is MergeAction.ADD_LIVE:
            await subscription.add_destination(live)
            merge.on_live_added(await self._recorded_position(recording_id))
        elif action is MergeAction.STOP_REPLAY:
            merge.on_replay_stopped()

    async def _recorded_position(self, recording_id: int) -> int:
        """The recording's position, live or stopped."""
        position = await self.get_recording_position(recording_id)
        if position == NULL_POSITION:
            position = await self.get_stop_position(recording_id)
        return position

    # -- events ---------------------------------------------------------------------------

    async def recording_events(self) -> AsyncGenerator[codecs.Message, None]:
        """RecordingStarted, RecordingProgress and RecordingStopped events, as they come."""
        subscription = await self.aeron.add_subscription(
            self.recording_events_channel, self.recording_events_stream_id
        )
        try:
            async for message in subscription:
                try:
                    yield codecs.decode(message.data)
                except codecs.CodecError:
                    continue
        finally:
            await subscription.close()

    # -- lifecycle ------------------------------------------------------------------------

    async def close(self) -> None:
        """Close the control session and its publication and subscription (idempotent)."""
        if self.is_closed:
            return
        try:
            if self.control_session_id != -1 and self.publication.is_connected:
                self.publication.try_offer(
                    codecs.CloseSessionRequest(self.control_session_id).encode()
                )
        finally:
            self.is_closed = True
            try:
                with contextlib.suppress(AeronError):
                    await self.publication.close()
            finally:  # cancelled closing the one, the other closes too
                with contextlib.suppress(AeronError):
                    await self.subscription.close()

    async def __aenter__(self) -> ArchiveClient:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()


def _same_image(
    subscription: Subscription, session_id: int, image: Image | None, position: int
) -> Image | None:
    """The stream's image: `image`, or None until the first of `session_id` comes (the replay's,
    starting at `position`); an ImageUnavailableError at `position` once it went or another
    took its place."""
    current = subscription.image_by_session_id(session_id)
    if image is None and (current is None or current.join_position == position):
        return current
    if current is image and image is not None and not image.is_closed:
        return current
    raise _lost_at(session_id, subscription.stream_id, position)


def _lost_at(session_id: int, stream_id: int, position: int) -> ImageUnavailableError:
    return ImageUnavailableError(
        f"replay merge: the image of session {session_id} stream {stream_id} went away; the "
        f"last message delivered ends at position {position} (merge again from there, or "
        f"pass remerge=True)",
        session_id=session_id,
        stream_id=stream_id,
        position=position,
    )


def _relevant_id(response: codecs.Message) -> int:
    if not isinstance(response, codecs.ControlResponse):
        raise ArchiveError(f"unexpected {type(response).__name__} from the archive")
    if response.code == ControlResponseCode.OK:
        return response.relevant_id
    if response.code == ControlResponseCode.RECORDING_UNKNOWN:
        raise ArchiveError(
            f"unknown recording {response.relevant_id}",
            codecs.ErrorCode.UNKNOWN_RECORDING,
            response.correlation_id,
        )
    raise ArchiveError(response.error_message, response.relevant_id, response.correlation_id)


class Connect:
    """What `connect` returns: await it, or use it with `async with`."""

    def __init__(self, aeron: Aeron, options: dict[str, Any]):
        self.aeron = aeron
        self.options = options
        self._client: ArchiveClient | None = None

    async def _connect(self) -> ArchiveClient:
        o = self.options
        aeron = self.aeron
        publication = await aeron.add_exclusive_publication(
            o["control_channel"], o["control_stream_id"]
        )
        try:
            subscription = await aeron.add_subscription(
                o["response_channel"], o["response_stream_id"]
            )
        except BaseException:
            await publication.close()
            raise
        client = ArchiveClient(
            aeron,
            publication,
            subscription,
            o["message_timeout_s"],
            o["recording_events_channel"],
            o["recording_events_stream_id"],
        )
        try:
            await client._connect(o["response_channel"], o["response_stream_id"])
        except BaseException:
            await client.close()
            raise
        self._client = client
        return client

    def __await__(self) -> Generator[Any, None, ArchiveClient]:
        return self._connect().__await__()

    async def __aenter__(self) -> ArchiveClient:
        return await self._connect()

    async def __aexit__(self, *exc: object) -> None:
        if self._client is not None:
            await self._client.close()


def connect(
    aeron: Aeron,
    *,
    control_channel: str = context.CONTROL_CHANNEL,
    control_stream_id: int = context.CONTROL_STREAM_ID,
    response_channel: str = context.CONTROL_RESPONSE_CHANNEL,
    response_stream_id: int = context.CONTROL_RESPONSE_STREAM_ID,
    recording_events_channel: str = context.RECORDING_EVENTS_CHANNEL,
    recording_events_stream_id: int = context.RECORDING_EVENTS_STREAM_ID,
    message_timeout_s: float = context.MESSAGE_TIMEOUT_NS / 1e9,
) -> Connect:
    """Connect to an archive (the reference's default channels unless told otherwise)."""
    return Connect(aeron, dict(locals()) | {"aeron": aeron})
