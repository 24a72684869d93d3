"""The driver's log files (Aeron's RawLogFactory): a publication's log (IPC or network) and a
network image's are made here, in the driver directory's `publications/` and `images/`, their
storage checked first (driver/storage.py), and removed here (`free_log`: unmapped, the file
unlinked). Nothing else in the driver makes or removes a log file."""

from __future__ import annotations

import contextlib
import errno
import os
from collections.abc import Iterator

from aeronio.counters import Counter
from aeronio.driver import storage
from aeronio.driver.context import DriverContext
from aeronio.errors import StorageSpaceError
from aeronio.logbuffer.descriptor import LogParams, compute_log_length
from aeronio.logbuffer.log_buffers import LogBuffers
from aeronio.protocol import layout, limits
from aeronio.protocol.frames import SetupFrame


class RawLogFactory:
    def __init__(self, ctx: DriverContext, low_storage_warnings: Counter):
        """`low_storage_warnings` counts the logs made with little storage left after them."""
        self._ctx = ctx
        self._low_storage_warnings = low_storage_warnings
        for directory in (layout.PUBLICATIONS_DIR, layout.IMAGES_DIR):
            os.makedirs(os.path.join(ctx.dir, directory), exist_ok=True)

    def new_publication(
        self,
        registration_id: int,
        *,
        term_length: int,
        initial_term_id: int,
        session_id: int,
        stream_id: int,
        mtu: int,
        term_id: int | None,
        term_offset: int,
        params: LogParams,
    ) -> LogBuffers:
        """The log of a new publication (its active term `term_id`, None: the initial one)."""
        path = layout.publication_log(self._ctx.dir, registration_id)
        self._check_storage(path, term_length)
        with _removed_on_failure(path):
            return LogBuffers.create(
                path,
                term_length=term_length,
                initial_term_id=initial_term_id,
                session_id=session_id,
                stream_id=stream_id,
                mtu=mtu,
                correlation_id=registration_id,
                term_id=term_id,
                term_offset=term_offset,
                params=params,
            )

    def new_image(self, registration_id: int, setup: SetupFrame, params: LogParams) -> LogBuffers:
        """The log of a new image, where `setup` says its session is."""
        path = layout.image_log(self._ctx.dir, registration_id)
        self._check_storage(path, setup.term_length)
        with _removed_on_failure(path):
            return LogBuffers.create(
                path,
                term_length=setup.term_length,
                initial_term_id=setup.initial_term_id,
                session_id=setup.session_id,
                stream_id=setup.stream_id,
                mtu=setup.mtu,
                correlation_id=registration_id,
                term_id=setup.active_term_id,
                term_offset=setup.term_offset,
                params=params,
            )

    def _check_storage(self, path: str, term_length: int) -> None:
        """StorageSpaceError if a log of `term_length` cannot be made as `path` (unless the
        checks are off); a low-storage warning is counted."""
        ctx = self._ctx
        if ctx.perform_storage_checks:
            length = compute_log_length(term_length, limits.PAGE_MIN_SIZE)
            directory = os.path.dirname(path)
            if storage.check(ctx.dir, directory, length, ctx.low_storage_warning_threshold):
                self._low_storage_warnings.increment()


def free_log(log: LogBuffers) -> None:
    """Unmap a log the factory made and remove its file (Aeron's RawLog.close)."""
    log.close()
    _unlink(os.fspath(log.path))


@contextlib.contextmanager
def _removed_on_failure(path: str) -> Iterator[None]:
    """A log that cannot be made (bad parameters, no space for its allocation: then
    StorageSpaceError) leaves no file (one already there is not its own: FileExistsError)."""
    try:
        yield
    except FileExistsError:
        raise
    except BaseException as e:
        _unlink(path)
        if isinstance(e, OSError) and e.errno == errno.ENOSPC:  # the checks off, or outrun
            raise StorageSpaceError(f"no room for the new log {path}: {e.strerror}") from e
        raise


def _unlink(path: str) -> None:
    with contextlib.suppress(FileNotFoundError):
        os.unlink(path)
