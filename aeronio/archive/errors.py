"""ArchiveError: what the archive answered with an ERROR (or what its client could not do);
ArchiveTimeoutError: a request the archive did not take in time."""

from __future__ import annotations

from aeronio.archive.codecs import ErrorCode
from aeronio.errors import AeronError


class ArchiveError(AeronError):
    """An archive request that failed: `error_code` is the reference's `ArchiveException` code
    (the response's relevant id), `correlation_id` the request's."""

    def __init__(self, message: str, error_code: int = ErrorCode.GENERIC, correlation_id: int = -1):
        super().__init__(message)
        self.error_code = error_code
        self.correlation_id = correlation_id


class ArchiveTimeoutError(ArchiveError, TimeoutError):
    """The archive did not take a request in time (none there, or it went): an ArchiveError
    and a TimeoutError."""
