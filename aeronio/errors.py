"""Exceptions raised by aeronio. Every one names the parameter or condition at fault."""


class AeronError(Exception):
    """Base class of aeronio errors."""


class ConfigurationError(AeronError, ValueError):
    """A bad option, channel URI parameter or stream id; the message names the parameter."""


class ChannelUriError(ConfigurationError):
    """A channel URI that does not parse or has an unknown key or a bad value."""


class MessageTooLargeError(AeronError, ValueError):
    """A message longer than the publication's max_message_length (or a claim over max payload)."""


class PublicationClosedError(AeronError):
    """An offer on a closed publication."""


class MaxPositionExceededError(AeronError):
    """The publication reached the end of its positions (term length x 2^31)."""


class ClaimError(AeronError):
    """A BufferClaim used after it was committed or aborted."""


class DriverError(AeronError):
    """The media driver refused a command; `code` says why."""

    def __init__(self, message: str, code: int = 0):
        super().__init__(message)
        self.code = code


class DriverNotFoundError(AeronError):
    """No media driver runs on the given directory."""


class DriverTimeoutError(AeronError, TimeoutError):
    """The media driver stopped answering."""


class ClientTimeoutError(AeronError):
    """The driver timed this client out (it sent no keepalive for the liveness timeout); its
    publications and images are gone."""
