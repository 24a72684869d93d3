"""Driver configuration: one typed, validated set of options."""

from __future__ import annotations

import os
import tempfile
import uuid

import msgspec

from aeronio.errors import ConfigurationError
from aeronio.logbuffer import descriptor as d


def default_dir() -> str:
    """A fresh driver directory under /dev/shm (or the temp dir where /dev/shm is missing)."""
    base = "/dev/shm" if os.path.isdir("/dev/shm") else tempfile.gettempdir()
    return os.path.join(base, f"aeronio-{os.getpid()}-{uuid.uuid4().hex[:8]}")


class DriverContext(msgspec.Struct, kw_only=True):
    """Media driver options. Durations are in nanoseconds, like Aeron's."""

    dir: str = ""
    ipc_term_length: int = 64 * 1024 * 1024
    ipc_mtu: int = 1408
    ipc_publication_term_window_length: int = 0
    publication_unblock_timeout_ns: int = 15_000_000_000
    publication_linger_ns: int = 5_000_000_000
    client_liveness_timeout_ns: int = 10_000_000_000
    conductor_idle_ns: int = 1_000_000
    max_counters: int = 4096
    term_buffer_sparse_file: bool = True
    dir_delete_on_shutdown: bool = True

    def __post_init__(self) -> None:
        if not self.dir:
            self.dir = default_dir()
        d.check_term_length(self.ipc_term_length)
        d.check_mtu(self.ipc_mtu)
        if self.ipc_mtu - 32 > d.max_message_length(self.ipc_term_length):
            raise ConfigurationError(f"ipc_mtu {self.ipc_mtu} is too large for the term length")
        window = self.ipc_publication_term_window_length
        if window < 0 or window > self.ipc_term_length:
            raise ConfigurationError(
                f"ipc_publication_term_window_length {window} must be in 0..ipc_term_length"
            )
        for name in (
            "publication_unblock_timeout_ns",
            "publication_linger_ns",
            "client_liveness_timeout_ns",
            "conductor_idle_ns",
        ):
            if getattr(self, name) < 0:
                raise ConfigurationError(f"{name} must not be negative")
        if self.max_counters < 32:
            raise ConfigurationError(f"max_counters {self.max_counters} must be at least 32")

    @classmethod
    def from_options(cls, **options: object) -> DriverContext:
        """Build from keyword options, naming any unknown or ill-typed one."""
        unknown = set(options) - set(cls.__struct_fields__)
        if unknown:
            raise ConfigurationError(f"unknown driver option(s): {', '.join(sorted(unknown))}")
        try:
            return msgspec.convert(options, cls)
        except msgspec.ValidationError as e:
            raise ConfigurationError(f"bad driver option: {e}") from None
