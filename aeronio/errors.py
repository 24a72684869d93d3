"""Exceptions raised by aeronio. Every one names the parameter or condition at fault.

One type per kind of bad input, whatever the value: an option or argument (a driver option, a
CLI flag, a `stream_id`) raises ConfigurationError; anything wrong in a channel URI, ChannelUriError
(a ConfigurationError); a frame off the wire, `protocol.frames.MalformedFrameError`. The limits
themselves (term length, MTU, page size, segment length, 32-bit ids) have one validator each, in
`protocol.limits`, which every entry point calls with its own exception type. A directory an
option names that cannot be made or used is said in a word by `dir_problem`.
"""

import os


class AeronError(Exception):
    """Base class of aeronio errors."""


class ConfigurationError(AeronError, ValueError):
    """A bad option or argument (driver option, CLI flag, stream id); the message names it."""


class ChannelUriError(ConfigurationError):
    """A channel URI that does not parse, or has an unknown key or a value out of its limits."""


class MessageTooLargeError(AeronError, ValueError):
    """A message longer than the publication's max_message_length (or a claim over max payload)."""


class PublicationClosedError(AeronError):
    """An offer on a closed publication."""


class SubscriptionClosedError(AeronError):
    """The subscription was closed while waiting on it."""


class MaxPositionExceededError(AeronError):
    """The publication reached the end of its positions (term length x 2^31)."""


class OfferBatchTimeoutError(AeronError, TimeoutError):
    """offer_batch's timeout passed with part of the batch appended: `appended` messages (the
    first ones, in order) are in the log, the rest are not."""

    def __init__(self, message: str, *, appended: int = 0):  # the default: for pickle
        super().__init__(message)
        self.appended = appended


class ClaimError(AeronError):
    """A BufferClaim used after it was committed or aborted."""


class DriverError(AeronError):
    """The media driver refused a command; `code` says why."""

    def __init__(self, message: str, code: int = 0):
        super().__init__(message)
        self.code = code


class StorageSpaceError(DriverError):
    """The driver refused a new log (code STORAGE_SPACE): not enough storage (or, on a tmpfs,
    memory) for it."""


class DriverNotFoundError(AeronError):
    """No media driver runs on the given directory."""


class DriverTimeoutError(AeronError, TimeoutError):
    """The media driver stopped answering."""


class ClientTimeoutError(AeronError):
    """The driver timed this client out (it sent no keepalive for the liveness timeout); its
    publications and images are gone."""


class ImageUnavailableError(AeronError):
    """An image went away before its end of stream (its receiver fell too far behind, its
    source went silent, ...), or its log was refused as it came (not a log buffer, unreadable):
    what was not read from it is not coming from that image.
    `position` is the image's position when it went, just after the last message taken from
    it; the stream may go on in a new image of the same session from another position."""

    def __init__(self, message: str, *, session_id: int, stream_id: int, position: int):
        super().__init__(message)
        self.session_id = session_id
        self.stream_id = stream_id
        self.position = position


def dir_problem(error: OSError, dir: str) -> str | None:
    """`error`'s reason, in a word a user reads, if it is about `dir` or a path under it (that
    directory cannot be made or used); None for any other error."""
    if not dir or error.filename is None:
        return None
    where = os.fspath(error.filename)
    if not where.startswith(dir):
        return None
    said = (
        "not a directory" if isinstance(error, FileExistsError) and where == dir else error.strerror
    )
    return said if where == dir else f"{said} ({where})"
