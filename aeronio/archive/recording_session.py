"""RecordingSession: one image recorded into one recording, until the image goes or the
recording is stopped.

Each duty cycle (on the recorder's thread, see `recorder.py`) writes the image's blocks (whole
frames of one term, at most `MAX_BLOCK_LENGTH` each), up to `MAX_RUN_LENGTH` bytes
(`RecordingWriter.record`), moving `rec-pos` after each block, then sends one progress event:
`rec-pos` never passes what is written. A write that fails (a full disk) or a frame the image
cannot be read past (a corrupt length) stops the recording at the last whole block written and
counts the error.
"""

from __future__ import annotations

import enum
import threading
from collections.abc import Callable

from aeronio.archive import codecs
from aeronio.archive.context import MAX_BLOCK_LENGTH
from aeronio.archive.proxies import RecordingEventsProxy
from aeronio.archive.recording_writer import RecordingWriter
from aeronio.client.counter import ClientCounter
from aeronio.client.subscription import Image
from aeronio.errors import AeronError

# The most a duty cycle writes: a stop or an abort is seen within this.
MAX_RUN_LENGTH = 8 * MAX_BLOCK_LENGTH


class State(enum.Enum):
    RECORDING = 1
    DONE = 2


class RecordingSession:
    def __init__(
        self,
        recording_id: int,
        image: Image,
        writer: RecordingWriter,
        position: ClientCounter,
        events: RecordingEventsProxy,
        on_error: Callable[[BaseException], None],
    ):
        self.recording_id = recording_id
        self.image = image
        self.writer = writer
        self.position = position
        self.events = events
        self.on_error = on_error
        self.start_position = writer.position
        self.state = State.RECORDING
        self.error: BaseException | None = None
        self.lock = threading.Lock()  # held by whoever polls it (see recorder.py)
        position.set(writer.position)

    @property
    def recorded_position(self) -> int:
        return self.writer.position

    def do_work(self) -> int:
        if self.state is not State.RECORDING:
            return 0
        before = self.writer.position
        try:
            work = self.writer.record(self.image, self.position, MAX_RUN_LENGTH)
        except (OSError, AeronError) as e:  # a full disk or a corrupt frame: what was
            # written stays, the recording stops
            self._progress(before)
            self.fail(e)
            return 1
        self._progress(before)
        if work == 0 and (self.image.is_closed or self.image.is_end_of_stream):
            self.state = State.DONE
        return work

    def fail(self, error: BaseException) -> None:
        """End the recording where it got to, with `error` (counted by `on_error`)."""
        self.error = error
        self.on_error(error)
        self.state = State.DONE

    def _progress(self, before: int) -> None:
        position = self.writer.position
        if position != before:
            self.events.send(
                codecs.RecordingProgress(self.recording_id, self.start_position, position)
            )

    def abort(self) -> None:
        self.state = State.DONE
