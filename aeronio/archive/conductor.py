"""ArchiveConductor: the archive's one agent. A client of a media driver (never part of it), it
answers control requests, records images and replays recordings, one duty cycle at a time.

A duty cycle
------------
1. Control requests from the control and local control subscriptions, in arrival order. A
   message that does not decode, an unknown template id, a message that is not a control
   request (a response or event on the control stream) or a request for an unknown control
   session is counted (`errors`), logged the first time of each kind, and dropped unanswered;
   so is a ConnectRequest whose response channel reaches the archive's own control or events
   streams (`own_streams.py`: it would answer itself for ever). A request that cannot be done
   is answered ERROR with the reference's code and message. Nothing a client sends stops the
   archive.
2. Images that arrived on recording subscriptions become recording sessions.
3. Control sessions flush their responses and listings; replay sessions send. Sessions that
   are DONE are closed (a recording's stop position goes to the catalog and a
   RecordingStopped event out; a control session aborted for responses it could not deliver
   is counted and logged). Recording sessions write on the recorder's thread
   (`recorder.py`), replay sessions send on the replayer's once they are REPLAYING
   (`replayer.py`), so that disk writes and replays' copies overlap the event loop's work.
"""

from __future__ import annotations

import contextlib
import logging
import time
from collections import deque
from collections.abc import Iterator
from dataclasses import dataclass, field

import msgspec

from aeronio._core import Doorbell
from aeronio.archive import codecs, segments
from aeronio.archive.catalog import Catalog, CatalogError
from aeronio.archive.codecs import NULL_POSITION, ErrorCode, SourceLocation
from aeronio.archive.context import MESSAGE_TIMEOUT_NS, ArchiveContext
from aeronio.archive.control_session import ControlSession
from aeronio.archive.control_session import State as ControlState
from aeronio.archive.errors import ArchiveError
from aeronio.archive.own_streams import OwnStreams
from aeronio.archive.proxies import ControlResponseProxy, RecordingEventsProxy
from aeronio.archive.recorder import Recorder
from aeronio.archive.recording_pos import RecordingPos
from aeronio.archive.recording_session import RecordingSession
from aeronio.archive.recording_session import State as RecordingState
from aeronio.archive.recording_writer import RecorderCounters, RecordingWriter
from aeronio.archive.replay_session import ReplaySession
from aeronio.archive.replay_session import State as ReplayState
from aeronio.archive.replayer import Replayer
from aeronio.archive.segments import RecordingReader
from aeronio.client.aeron import Aeron
from aeronio.client.counter import ClientCounter
from aeronio.client.subscription import Image, Subscription, park_for_data
from aeronio.errors import AeronError
from aeronio.logbuffer.descriptor import FRAME_ALIGNMENT
from aeronio.protocol.channel import SPY_PREFIX, ChannelUri

log = logging.getLogger("aeronio.archive")

# Counter type ids (Aeron's AeronCounters).
ARCHIVE_ERROR_COUNT_TYPE_ID = 101
RECORDER_MAX_WRITE_TIME_TYPE_ID = 105
RECORDER_TOTAL_WRITE_BYTES_TYPE_ID = 106
RECORDER_TOTAL_WRITE_TIME_TYPE_ID = 107
NULL_VALUE = -1


@dataclass(eq=False)
class RecordingSubscription:
    """A subscription the archive records (StartRecording / ExtendRecording)."""

    subscription: Subscription
    key: tuple[str, int]  # (the channel's recording key, stream id)
    original_channel: str
    control_session_id: int  # the request's: told if an image of it is refused
    correlation_id: int
    extend_id: int | None = None  # the recording an ExtendRecording continues
    sessions: list[RecordingSession] = field(default_factory=list)


class ArchiveConductor:
    def __init__(self, aeron: Aeron, ctx: ArchiveContext):
        self.aeron = aeron
        self.ctx = ctx
        self.archive_id = aeron.client_id
        self.catalog = Catalog(
            ctx.archive_dir,
            max_entries=ctx.max_catalog_entries,
            file_sync_level=ctx.catalog_file_sync_level,
            lock=True,
        )
        if self.catalog.damage is not None:  # its cut record is kept for someone to look at
            self.catalog.close()
            raise CatalogError(f"{self.catalog.damage}: no archive starts on it")
        try:
            self.recovered = self.catalog.recover(_now_ms())
        except BaseException:  # the archive does not start: its lock goes now
            self.catalog.close()
            raise
        self.control_sessions: dict[int, ControlSession] = {}
        self.recording_subscriptions: dict[int, RecordingSubscription] = {}
        self.recordings: dict[int, RecordingSession] = {}
        self.replays: dict[int, ReplaySession] = {}
        self._new_images: deque[tuple[RecordingSubscription, Image]] = deque()
        self._requests: list = []  # control messages taken while deciding to park
        self.wakeup = Doorbell()  # rung for work that comes by no control subscription
        self._next_session_id = 1
        self._replay_count = 0
        self.control_subscriptions: list[Subscription] = []
        self.own_streams = OwnStreams([])
        self._logged: set[str] = set()  # the kinds of dropped message logged once
        self.events = RecordingEventsProxy(None)
        self.errors: ClientCounter | None = None
        self.recorder_counters: RecorderCounters | None = None
        self.recorder = Recorder(on_done=self.wakeup.ring)
        self.replayer = Replayer(on_done=self.wakeup.ring)

    async def start(self) -> None:
        """Open the control subscriptions, the events publication and the counters."""
        ctx, aeron = self.ctx, self.aeron
        label = f"archiveId={self.archive_id}"
        self.errors = await aeron.add_counter(
            ARCHIVE_ERROR_COUNT_TYPE_ID, f"archive-errors - {label}"
        )
        self.recorder_counters = RecorderCounters(
            await aeron.add_counter(
                RECORDER_MAX_WRITE_TIME_TYPE_ID, f"archive-recorder max write time in ns - {label}"
            ),
            await aeron.add_counter(
                RECORDER_TOTAL_WRITE_BYTES_TYPE_ID, f"archive-recorder total write bytes - {label}"
            ),
            await aeron.add_counter(
                RECORDER_TOTAL_WRITE_TIME_TYPE_ID,
                f"archive-recorder total write time in ns - {label}",
            ),
        )
        self.own_streams = await OwnStreams.resolve(ctx)
        self.control_subscriptions.append(
            await aeron.add_subscription(ctx.control_channel, ctx.control_stream_id)
        )
        if ctx.local_control_channel:
            self.control_subscriptions.append(
                await aeron.add_subscription(ctx.local_control_channel, ctx.local_control_stream_id)
            )
        if ctx.recording_events_channel:
            self.events = RecordingEventsProxy(
                await aeron.add_publication(
                    ctx.recording_events_channel, ctx.recording_events_stream_id
                )
            )
        self.recorder.start()
        self.replayer.start()
        for _, entry in self.catalog.entries():
            if isinstance(entry, CatalogError):  # said once; each request for it is refused
                self.count_error()
                log.warning("%s", entry)
        for recording_id in self.catalog.orphans:
            self.count_error()
            log.warning(
                "%s: recording %d has segment files and no catalog entry (lost): they are kept, "
                "and new recordings take ids after it",
                ctx.archive_dir, recording_id,
            )  # fmt: skip

    # -- duty cycle -----------------------------------------------------------------------

    async def do_work(self) -> int:
        now_ns = time.monotonic_ns()
        work = 0
        self._take_requests()
        requests, self._requests = self._requests, []
        for message in requests:
            await self._on_message(message.data, now_ns)
            work += 1
        while self._new_images:
            await self._start_recording_session(*self._new_images.popleft())
            work += 1
        for session in list(self.control_sessions.values()):
            work += session.do_work(now_ns)
            if session.state is ControlState.DONE:
                await self._close_control_session(session)
        for recording in list(self.recordings.values()):  # recorded on the recorder's thread
            if recording.state is RecordingState.DONE:
                await self._stop_recording_session(recording)
                work += 1
        for replay in list(self.replays.values()):
            if replay in self.replayer:  # replayed on the replayer's thread until DONE
                if replay.state is ReplayState.DONE:
                    await self._close_replay(replay)
                    work += 1
                continue
            work += replay.do_work(now_ns)
            if replay.state is ReplayState.REPLAYING:
                self.replayer.add(replay)
            elif replay.state is ReplayState.DONE:
                await self._close_replay(replay)
        return work

    def _take_requests(self) -> bool:
        """Take the control messages that came (for the next duty cycle); whether any did."""
        before = len(self._requests)
        for subscription in self.control_subscriptions:
            for image in subscription.images:
                image.poll_messages(self._requests, 64)
        return len(self._requests) > before

    @property
    def busy(self) -> bool:
        """Whether work may come that nothing signals: a replay, a recording to start, a control
        session connecting or with answers still to send (it then backs off, as the reference
        archive's agent always does)."""
        return (
            bool(self._new_images or self._requests)
            or any(replay not in self.replayer for replay in self.replays.values())
            or any(session.busy for session in self.control_sessions.values())
        )

    async def park(self, timeout: float) -> None:
        """Sleep until a control message comes (from this process or another), a new image or
        a recording's end rings `wakeup`, or `timeout` passes (sessions' timeouts are checked
        then)."""
        await park_for_data(
            self.control_subscriptions,
            timeout,
            lambda: not self._take_requests() and not self.busy,
            also=(self.wakeup,),
        )

    async def _on_message(self, data: bytes, now_ns: int) -> None:
        try:
            request = codecs.decode(data)
        except codecs.CodecError as e:
            self._drop("undecodable control message", e)
            return
        if type(request) not in codecs.CONTROL_REQUESTS or not isinstance(
            request, codecs.ConnectRequest | codecs.CloseSessionRequest | codecs.SessionMessage
        ):
            self._drop("not a control request", request)
            return
        if isinstance(request, codecs.ConnectRequest):
            await self._on_connect(request, now_ns)
            return
        session = self.control_sessions.get(request.control_session_id)
        if session is None or session.state is ControlState.DONE:
            self._drop("request for an unknown control session", request)
        elif isinstance(request, codecs.CloseSessionRequest):
            session.close()
        else:
            await self._answer(request, session)

    async def _answer(self, request: codecs.SessionMessage, session: ControlSession) -> None:
        try:
            await self._on_request(request, session)
        except ArchiveError as e:
            self.count_error()
            session.error(request.correlation_id, e.error_code, str(e))
        except (AeronError, CatalogError, segments.SegmentError, OSError) as e:
            self.count_error()
            session.error(request.correlation_id, ErrorCode.GENERIC, f"{type(e).__name__}: {e}")

    def count_error(self) -> None:
        """One more in the `archive-errors` counter (once it exists)."""
        if self.errors is not None:
            self.errors.increment()

    def _drop(self, kind: str, what: object) -> None:
        """Count a control message dropped unanswered; log the first of each kind with `what`
        (a flood of them shows in the `archive-errors` counter, not in the log)."""
        self.count_error()
        if kind not in self._logged:
            self._logged.add(kind)
            log.warning("dropped %s: %.200s (further ones only counted)", kind, what)

    # -- requests -------------------------------------------------------------------------

    async def _on_connect(self, request: codecs.ConnectRequest, now_ns: int) -> None:
        channel, stream_id = request.response_channel, request.response_stream_id
        own = await self.own_streams.find(channel, stream_id)
        if own is not None:  # its answers would come back as requests: it has no answer
            self._drop(
                "ConnectRequest to answer on this archive's own stream",
                f"streamId={stream_id} channel={channel} is the {own} stream",
            )
            return
        try:
            publication = await self.aeron.add_publication(channel, stream_id)
        except AeronError as e:
            self._drop("ConnectRequest with no response publication", e)
            return
        session_id = self._next_session_id
        self._next_session_id += 1
        self.control_sessions[session_id] = ControlSession(
            session_id,
            request.correlation_id,
            ControlResponseProxy(publication),
            MESSAGE_TIMEOUT_NS,
            MESSAGE_TIMEOUT_NS,
            self.ctx.max_pending_response_bytes,
            now_ns,
        )

    async def _on_request(self, request: codecs.SessionMessage, session: ControlSession) -> None:
        correlation_id = request.correlation_id
        match request:
            case codecs.StartRecordingRequest():
                subscription_id = await self._start_recording(
                    request.channel, request.stream_id, request.source_location, session,
                    correlation_id,
                )  # fmt: skip
                session.ok(correlation_id, subscription_id)
            case codecs.ExtendRecordingRequest():
                self._extendable(request.recording_id)
                subscription_id = await self._start_recording(
                    request.channel, request.stream_id, request.source_location, session,
                    correlation_id, extend_id=request.recording_id,
                )  # fmt: skip
                session.ok(correlation_id, subscription_id)
            case codecs.StopRecordingRequest():
                key = (ChannelUri.parse(request.channel).recording_key(), request.stream_id)
                found = [r for r in self.recording_subscriptions.values() if r.key == key]
                if not found:
                    raise ArchiveError(
                        f"no recording found for streamId={request.stream_id} "
                        f"channel={request.channel}",
                        ErrorCode.UNKNOWN_SUBSCRIPTION,
                    )
                await self._stop_recording(found[0])
                session.ok(correlation_id)
            case codecs.StopRecordingSubscriptionRequest():
                recording = self.recording_subscriptions.get(request.subscription_id)
                if recording is None:
                    raise ArchiveError(
                        f"no recording subscription found for {request.subscription_id}",
                        ErrorCode.UNKNOWN_SUBSCRIPTION,
                    )
                await self._stop_recording(recording)
                session.ok(correlation_id)
            case codecs.ReplayRequest():
                replay_id = await self._start_replay(request, session)
                session.ok(correlation_id, replay_id)
            case codecs.StopReplayRequest():
                replay = self.replays.get(request.replay_session_id)
                if replay is None:
                    raise ArchiveError(
                        f"replay session not known for {request.replay_session_id}",
                        ErrorCode.UNKNOWN_REPLAY,
                    )
                with replay.lock:  # a run of the replayer's thread ends at a shut window
                    replay.abort()
                await self._close_replay(replay)
                session.ok(correlation_id)
            case codecs.ListRecordingsRequest():
                session.list(
                    lambda: self._listing(session, request, request.from_recording_id, None)
                )
            case codecs.ListRecordingsForUriRequest():
                session.list(
                    lambda: self._listing(
                        session, request, request.from_recording_id,
                        (request.stream_id, request.channel),
                    )
                )  # fmt: skip
            case codecs.ListRecordingRequest():
                if self.catalog.is_valid(request.recording_id):
                    session.send(self._descriptor(session, request, request.recording_id))
                else:
                    session.recording_unknown(correlation_id, request.recording_id)
            case codecs.RecordingPositionRequest():
                recorded = self.recordings.get(request.recording_id)
                position = NULL_VALUE if recorded is None else recorded.recorded_position
                session.ok(correlation_id, position)
            case codecs.StopPositionRequest():
                self._check_recording(request.recording_id)
                session.ok(correlation_id, self.catalog.stop_position(request.recording_id))
            case codecs.FindLastMatchingRecordingRequest():
                if not 0 <= request.min_recording_id < len(self.catalog):
                    raise ArchiveError(
                        f"min recording id outside valid range: {request.min_recording_id}",
                        ErrorCode.UNKNOWN_RECORDING,
                    )
                last = self.catalog.find_last(
                    request.min_recording_id, request.session_id, request.stream_id,
                    request.channel,
                )  # fmt: skip
                session.ok(correlation_id, NULL_VALUE if last is None else last)
            case codecs.TruncateRecordingRequest():
                await self._settle_replays(request.recording_id)
                self._truncate(request.recording_id, request.position)
                session.ok(correlation_id)

    def _check_recording(self, recording_id: int, text: str = "unknown recording") -> None:
        if not self.catalog.is_valid(recording_id):
            raise ArchiveError(f"{text} {recording_id}", ErrorCode.UNKNOWN_RECORDING)

    def _descriptor(
        self, session: ControlSession, request: codecs.SessionMessage, recording_id: int
    ) -> codecs.RecordingDescriptor:
        return msgspec.structs.replace(
            self.catalog.descriptor(recording_id),
            control_session_id=session.control_session_id,
            correlation_id=request.correlation_id,
        )

    def _listing(
        self,
        session: ControlSession,
        request: codecs.ListRecordingsRequest | codecs.ListRecordingsForUriRequest,
        from_id: int,
        match: tuple[int, str] | None,
    ) -> Iterator[codecs.Message]:
        """Descriptors from `from_id` (those matching stream id and channel, if given) up to
        the request's count; RECORDING_UNKNOWN with the next id when the catalog runs out."""
        sent, recording_id = 0, from_id
        while sent < request.record_count and 0 <= recording_id < len(self.catalog):
            if self.catalog.is_valid(recording_id):
                try:
                    d = self.catalog.descriptor(recording_id)
                except CatalogError as e:  # counted and skipped: it hides no other recording
                    self.count_error()
                    log.warning("listing skips %s", e)
                    recording_id += 1
                    continue
                if match is None or (d.stream_id == match[0] and match[1] in d.original_channel):
                    yield self._descriptor(session, request, recording_id)
                    sent += 1
            recording_id += 1
        if sent < request.record_count:
            session.recording_unknown(request.correlation_id, recording_id)

    # -- recording ------------------------------------------------------------------------

    def _extendable(self, recording_id: int) -> None:
        self._check_recording(recording_id, "unknown recording id")
        if recording_id in self.recordings or any(
            r.extend_id == recording_id for r in self.recording_subscriptions.values()
        ):
            raise ArchiveError(
                f"cannot extend active recording for {recording_id}", ErrorCode.ACTIVE_RECORDING
            )

    async def _start_recording(
        self,
        channel: str,
        stream_id: int,
        source_location: int,
        session: ControlSession,
        correlation_id: int,
        extend_id: int | None = None,
    ) -> int:
        uri = ChannelUri.parse(channel)
        if uri.is_spy:
            raise ArchiveError(f"channel must not be a spy: {channel}")
        if source_location not in (SourceLocation.LOCAL, SourceLocation.REMOTE):
            raise ArchiveError(f"unknown source location {source_location}")
        own = await self.own_streams.find(channel, stream_id)
        if own is not None:
            raise ArchiveError(
                f"streamId={stream_id} channel={channel} is this archive's own {own} stream"
            )
        key = (uri.recording_key(), stream_id)
        if any(r.key == key for r in self.recording_subscriptions.values()):
            raise ArchiveError(
                f"recording exists for streamId={stream_id} channel={channel}",
                ErrorCode.ACTIVE_SUBSCRIPTION,
            )
        if len(self.recordings) >= self.ctx.max_concurrent_recordings:
            raise ArchiveError(
                f"max concurrent recordings reached: {self.ctx.max_concurrent_recordings}",
                ErrorCode.MAX_RECORDINGS,
            )
        spy = source_location == SourceLocation.LOCAL and not uri.is_ipc
        recording: RecordingSubscription | None = None

        def on_image(image: Image) -> None:
            if recording is not None:
                self._new_images.append((recording, image))
                self.wakeup.ring()

        subscription = await self.aeron.add_subscription(
            f"{SPY_PREFIX}:{uri}" if spy else str(uri), stream_id, available_image=on_image
        )
        recording = RecordingSubscription(
            subscription, key, channel, session.control_session_id, correlation_id, extend_id
        )
        self.recording_subscriptions[subscription.registration_id] = recording
        for image in subscription.images:  # any that came before the callback could see them
            self._new_images.append((recording, image))
        return subscription.registration_id

    async def _start_recording_session(
        self, recording: RecordingSubscription, image: Image
    ) -> None:
        if recording.subscription.is_closed or image.is_closed:
            return
        if any(s.image is image for s in recording.sessions):
            return
        ctx = self.ctx
        segment_length = max(ctx.segment_file_length, image.term_length)
        stripped = ChannelUri.parse(recording.original_channel).stripped_channel()
        try:
            if recording.extend_id is not None:
                recording_id = recording.extend_id
                start = self._check_extension(recording_id, image)
                layout = self.catalog.layout(recording_id)
            else:
                start = image.position
                recording_id = self.catalog.add_recording(
                    start_position=start,
                    start_timestamp=_now_ms(),
                    initial_term_id=image.initial_term_id,
                    segment_file_length=segment_length,
                    term_buffer_length=image.term_length,
                    mtu_length=image.mtu_length,
                    session_id=image.session_id,
                    stream_id=image.stream_id,
                    stripped_channel=stripped,
                    original_channel=recording.original_channel,
                    source_identity=image.source_identity,
                )
                layout = segments.RecordingLayout(
                    recording_id, start, image.term_length, segment_length
                )
        except (ArchiveError, CatalogError) as e:
            # an image this archive cannot record: its request, answered OK, gets an ERROR (as
            # the reference's validateImageForExtendRecording sends), and the subscription
            # goes, so that its publication is not held back by a subscriber that never reads
            log.warning("not recording %r: %s", image, e)
            code = e.error_code if isinstance(e, ArchiveError) else ErrorCode.GENERIC
            await self._recording_failed(recording, code, str(e))
            return
        counter: ClientCounter | None = None
        try:
            counter = await RecordingPos.allocate(
                self.aeron,
                recording_id,
                image.session_id,
                image.stream_id,
                stripped,
                image.source_identity,
            )
            writer = RecordingWriter(
                ctx.archive_dir, layout, start, ctx.file_sync_level, self.recorder_counters
            )
        except (AeronError, OSError) as e:
            # no rec-pos counter (the driver's are full) or no file: an entry added is
            # stopped where it starts (one to extend is still stopped), the request gets an
            # ERROR
            log.warning("not recording %r: %s", image, e)
            if recording.extend_id is None:
                self.catalog.recording_stopped(recording_id, start, _now_ms())
            if counter is not None:
                with contextlib.suppress(AeronError):
                    await counter.close()
            text = f"recording {recording_id} not started: {type(e).__name__}: {e}"
            await self._recording_failed(recording, ErrorCode.GENERIC, text)
            return
        session = RecordingSession(
            recording_id, image, writer, counter, self.events, lambda e: self.count_error()
        )
        recording.sessions.append(session)
        self.recordings[recording_id] = session
        if recording.extend_id is not None:
            # Active in the catalog only once its session is there to say how far it is: a
            # replayer reading in between takes a stop unset for "recorded to -1, ended"
            self.catalog.extend_recording(
                recording_id, recording.control_session_id, recording.correlation_id
            )
        self.recorder.add(session)
        self.events.send(
            codecs.RecordingStarted(
                recording_id, start, image.session_id, image.stream_id,
                recording.original_channel, image.source_identity,
            )
        )  # fmt: skip

    def _check_extension(self, recording_id: int, image: Image) -> int:
        d = self.catalog.descriptor(recording_id)
        stop = d.stop_position
        problems = [
            f"{name} {got} != {want}"
            for name, got, want in (
                ("join position", image.position, stop),
                ("initial term id", image.initial_term_id, d.initial_term_id),
                ("term length", image.term_length, d.term_buffer_length),
                ("mtu", image.mtu_length, d.mtu_length),
                ("stream id", image.stream_id, d.stream_id),
            )
            if got != want
        ]
        if problems:
            raise ArchiveError(
                f"cannot extend recording {recording_id}: " + ", ".join(problems),
                ErrorCode.INVALID_EXTENSION,
            )
        return stop

    async def _recording_failed(
        self, recording: RecordingSubscription, code: int, text: str, counted: bool = False
    ) -> None:
        """A recording that cannot start or go on: counted (unless it was), its request
        (answered OK) gets an ERROR (as the reference's validateImageForExtendRecording sends),
        and its subscription goes, so that its publication is not held back by a subscriber
        that never reads."""
        if not counted:
            self.count_error()
        requester = self.control_sessions.get(recording.control_session_id)
        if requester is not None and requester.state is not ControlState.DONE:
            requester.error(recording.correlation_id, code, text)
        await self._stop_recording(recording)

    async def _stop_recording(self, recording: RecordingSubscription) -> None:
        """Record what the images hold now, then close the subscription."""
        self._drain(recording)
        await recording.subscription.close()

    def _drain(self, recording: RecordingSubscription) -> None:
        """Record what the images of `recording` hold now (taking each session from the
        recorder's thread); nothing polls them again."""
        self.recording_subscriptions.pop(recording.subscription.registration_id, None)
        for session in recording.sessions:
            self.recorder.remove(session)
            with session.lock:
                while session.do_work():
                    pass
                session.abort()  # DONE: nothing polls its image again

    async def _stop_recording_session(self, session: RecordingSession) -> None:
        stop = self._store_stop(session)
        for recording in list(self.recording_subscriptions.values()):
            if session in recording.sessions:
                recording.sessions.remove(session)
                if session.error is not None:  # a failed write (a full disk), a corrupt frame
                    error = session.error
                    text = (
                        f"recording {session.recording_id} stopped at {stop}: "
                        f"{type(error).__name__}: {error}"
                    )
                    log.warning("%s", text)  # counted by the session when it failed
                    await self._recording_failed(recording, ErrorCode.GENERIC, text, True)
        with contextlib.suppress(AeronError):
            await session.position.close()
        self.events.send(
            codecs.RecordingStopped(session.recording_id, session.start_position, stop)
        )

    def _store_stop(self, session: RecordingSession) -> int:
        """Close the recording's file and store where it stops in the catalog; returns it."""
        self.recorder.remove(session)
        with session.lock:  # DONE: the recorder's thread is past it
            session.writer.close()
        stop = session.recorded_position
        # The stop position in the catalog before the recording leaves `recordings`: a live
        # replay on the replayer's thread reads the one, then the other (`recorded`).
        self.catalog.recording_stopped(session.recording_id, stop, _now_ms())
        self.recordings.pop(session.recording_id, None)
        return stop

    def _truncate(self, recording_id: int, position: int) -> None:
        self._check_recording(recording_id)
        if recording_id in self.recordings:
            raise ArchiveError("cannot truncate active recording", ErrorCode.ACTIVE_RECORDING)
        if any(r.recording_id == recording_id for r in self.replays.values()):
            raise ArchiveError(
                f"cannot truncate recording with active replay {recording_id}",
                ErrorCode.ACTIVE_RECORDING,
            )
        d = self.catalog.descriptor(recording_id)
        if not d.start_position <= position <= d.stop_position or position % FRAME_ALIGNMENT:
            raise ArchiveError(f"invalid position {position}")
        layout = self.catalog.layout(recording_id)
        problem = segments.frame_boundary_problem(
            self.ctx.archive_dir, layout, position, d.stop_position
        )
        if problem is not None:  # refused before any file changes
            raise ArchiveError(
                f"invalid position {position}: not a frame boundary of recording "
                f"{recording_id}: {problem}"
            )
        segments.truncate(self.ctx.archive_dir, layout, position)
        self.catalog.recording_stopped(recording_id, position, _now_ms())

    # -- replay ---------------------------------------------------------------------------

    async def _start_replay(self, request: codecs.ReplayRequest, session: ControlSession) -> int:
        recording_id = request.recording_id
        self._check_recording(recording_id, "unknown recording id")
        own = await self.own_streams.find(request.replay_channel, request.replay_stream_id)
        if own is not None:
            raise ArchiveError(
                f"streamId={request.replay_stream_id} channel={request.replay_channel} "
                f"is this archive's own {own} stream: no replay there"
            )
        if len(self.replays) >= self.ctx.max_concurrent_replays:
            raise ArchiveError(
                f"max concurrent replays reached: {self.ctx.max_concurrent_replays}",
                ErrorCode.MAX_REPLAYS,
            )
        d = self.catalog.descriptor(recording_id)
        live = self.recordings.get(recording_id)
        stop = live.recorded_position if live is not None else d.stop_position
        position = d.start_position if request.position == NULL_VALUE else request.position
        _check_replay_position(recording_id, position, d.start_position, stop, live is not None)
        layout = self.catalog.layout(recording_id)
        problem = segments.frame_boundary_problem(self.ctx.archive_dir, layout, position, stop)
        if problem is not None:
            raise ArchiveError(
                f"requested replay start position {position} is not a frame boundary "
                f"for recording {recording_id}: {problem}"
            )
        length = request.length
        end = 2**63 - 1 if length < 0 or length >= 2**63 - 1 - position else position + length
        if live is None:
            end = min(end, stop)
        uri = ChannelUri.parse(request.replay_channel)
        channel = uri.with_params(
            init_term_id=d.initial_term_id,
            term_id=_term_id(position, d),
            term_offset=position & (d.term_buffer_length - 1),
            term_length=d.term_buffer_length,
            mtu=d.mtu_length,
        )
        publication = await self.aeron.add_exclusive_publication(
            str(channel), request.replay_stream_id
        )
        self._replay_count += 1
        replay_session_id = (self._replay_count << 32) | (publication.session_id & 0xFFFFFFFF)
        reader = RecordingReader(self.ctx.archive_dir, layout, position, max(stop, position))

        def recorded() -> tuple[int, bool]:
            # On the replayer's thread. A recording's session is registered before its entry
            # is made active and stopped before it goes: an unset stop here means its session
            # was registered since the first look, or has yet to be (a new one: nothing yet)
            recording = self.recordings.get(recording_id)
            if recording is None:
                stop = self.catalog.stop_position(recording_id)
                if stop != NULL_POSITION:
                    return stop, False
                recording = self.recordings.get(recording_id)
                if recording is None:
                    return NULL_POSITION, True
            return recording.recorded_position, True

        self.replays[replay_session_id] = ReplaySession(
            replay_session_id,
            recording_id,
            publication,
            reader,
            end,
            recorded,
            MESSAGE_TIMEOUT_NS,
            self.ctx.replay_linger_timeout_ns,
            time.monotonic_ns(),
            lambda message, failed: self._replay_ended(
                session, request.correlation_id, message, failed
            ),
        )
        return replay_session_id

    async def _settle_replays(self, recording_id: int) -> None:
        """Poll the recording's replays on the replayer's thread once here, under their locks,
        and close those that are done: a replay whose subscriber has gone ends now, not at the
        thread's next cycle (a client that closed its replay, then truncates)."""
        for replay in list(self.replays.values()):
            if replay.recording_id != recording_id or replay not in self.replayer:
                continue
            with replay.lock:  # the thread's duty cycle is short: a run stops at a shut window
                replay.do_work(time.monotonic_ns())
            if replay.state is ReplayState.DONE:
                await self._close_replay(replay)

    def _replay_ended(
        self, session: ControlSession, correlation_id: int, message: str, failed: bool
    ) -> None:
        """A replay ended incomplete: an ERROR for its request (the reference's ReplaySession
        does the same); `failed` (damaged recorded bytes), counted and logged too."""
        if failed:
            self.count_error()
            log.warning("replay failed: %s", message)
        if session.state is not ControlState.DONE:
            session.error(correlation_id, ErrorCode.GENERIC, message)

    async def _close_replay(self, replay: ReplaySession) -> None:
        self._end_replay(replay)
        with contextlib.suppress(AeronError):
            await replay.publication.close()

    def _end_replay(self, replay: ReplaySession) -> None:
        """Take the replay from the replayer and close it (its publication stays open)."""
        self.replays.pop(replay.replay_session_id, None)
        self.replayer.remove(replay)
        with replay.lock:  # DONE, or the replayer closed: its thread is past it
            replay.close()

    # -- sessions -------------------------------------------------------------------------

    async def _close_control_session(self, session: ControlSession) -> None:
        self.control_sessions.pop(session.control_session_id, None)
        if session.abort_reason is not None:
            self.count_error()
            log.warning(
                "control session %d aborted: %s", session.control_session_id, session.abort_reason
            )
        with contextlib.suppress(AeronError):
            await session.proxy.publication.close()

    async def close(self) -> None:
        """End every recording (stored stopped in the catalog), replay (an ERROR for each one
        not all sent) and control session; close the catalog. Cancelled while it closes a
        stream, it still records what the images hold and stores every stop (the streams left
        go with the Aeron client)."""
        self.recorder.close()
        self.replayer.close()
        try:
            for recording in list(self.recording_subscriptions.values()):
                await self._stop_recording(recording)
            for session in list(self.recordings.values()):
                await self._stop_recording_session(session)
            for replay in list(self.replays.values()):  # an ERROR for those not all sent, so
                with replay.lock:  # that a replay cut short never looks whole to its client
                    replay.cut_short("archive closed before replay is complete")
                await self._close_replay(replay)
            for control in list(self.control_sessions.values()):
                await self._close_control_session(control)
        finally:
            for recording in list(self.recording_subscriptions.values()):
                self._drain(recording)
            for session in list(self.recordings.values()):
                self._store_stop(session)
            for replay in list(self.replays.values()):
                self._end_replay(replay)
            self.catalog.close()


def _check_replay_position(
    recording_id: int, position: int, start: int, stop: int, live: bool
) -> None:
    """The reference's checks of a replay's start position, with its messages."""
    what = f"requested replay start position {position}"
    if position % FRAME_ALIGNMENT:
        problem = f"{what} is not a multiple of FRAME_ALIGNMENT ({FRAME_ALIGNMENT})"
    elif position < start:
        problem = f"{what} is less than recording start position {start}"
    elif position > stop and live:
        raise ArchiveError(
            f"replay recording {recording_id} - {position} after current position of {stop}"
        )
    elif position > stop:
        problem = f"{what} must be less than highest recorded position {stop}"
    else:
        return
    raise ArchiveError(f"{problem} for recording {recording_id}")


def _term_id(position: int, d: codecs.RecordingDescriptor) -> int:
    """The term id of `position` in a recording (its positions are its stream's)."""
    term_id = d.initial_term_id + (position // d.term_buffer_length)
    return (term_id + 2**31) % 2**32 - 2**31


def _now_ms() -> int:
    return time.time_ns() // 1_000_000
