"""Driver configuration: one typed, validated set of options.

Options come from keyword arguments, `AERONIO_*` environment variables and a TOML or JSON
file (`DriverContext.from_sources`), highest precedence first. Every error names the option
and where its value came from.
"""

from __future__ import annotations

import json
import os
import re
import tomllib
import uuid
from collections.abc import Mapping
from typing import Any

import msgspec

from aeronio.driver.directories import PREFIX, default_base
from aeronio.errors import ConfigurationError
from aeronio.protocol import limits
from aeronio.protocol.channel import parse_duration_ns, parse_size

ENV_PREFIX = "AERONIO_"
# AERONIO_* variables that are not driver options (read by clients or tools), never rejected.
# AERONIO_CACHE: aeronio.spark.jvm; AERONIO_PYAERON_PYTHON: the tests' tests/support/aeron_c.py.
NON_DRIVER_ENV_VARS: frozenset[str] = frozenset({"AERONIO_CACHE", "AERONIO_PYAERON_PYTHON"})

_INT_RE = re.compile(r"[+-]?[0-9]+")
_TRUE = ("true", "1", "yes")
_FALSE = ("false", "0", "no")


def default_dir() -> str:
    """A fresh driver directory under /dev/shm (or the temp dir where /dev/shm is missing)."""
    return os.path.join(default_base(), f"{PREFIX}{os.getpid()}-{uuid.uuid4().hex[:8]}")


class DriverContext(msgspec.Struct, kw_only=True):
    """Media driver options. Durations are in nanoseconds, like Aeron's."""

    dir: str = ""
    ipc_term_length: int = 64 * 1024 * 1024
    ipc_mtu: int = 1408
    term_length: int = 16 * 1024 * 1024
    mtu_length: int = 1408
    ipc_publication_term_window_length: int = 0
    publication_unblock_timeout_ns: int = 15_000_000_000
    publication_linger_ns: int = 5_000_000_000
    client_liveness_timeout_ns: int = 10_000_000_000
    # Aeron's aeron.image.liveness.timeout as an IPC publication whose image a subscriber
    # rejected uses it: how long none of its subscriptions is linked again (network images'
    # liveness is receiver_state.IMAGE_LIVENESS_TIMEOUT_NS, this default).
    image_liveness_timeout_ns: int = 10_000_000_000
    # The conductor's housekeeping interval (Aeron's aeron.timer.interval): client and image
    # liveness, lingering, its heartbeat. Idle, it parks until woken or the next deadline.
    timer_interval_ns: int = 1_000_000_000
    # A duty cycle whose Python part (commands, control frames, bookkeeping, the timer) takes
    # longer is counted ("Conductor work cycle exceeded threshold count"; the longest is
    # "Conductor max cycle time"), as Aeron's aeron.driver.conductor.cycle.threshold: it held
    # the event loop's thread that long.
    conductor_cycle_threshold_ns: int = 100_000_000
    # Idle duty cycles that only yield to the loop, after work, before the driver parks.
    conductor_idle_spins: int = 100
    # Spin only while an IPC publication has subscribers: the one traffic that wakes the driver
    # only once its publisher is blocked (at its limit). Network streams wake it for all they
    # need (their sockets, appends, consumption), so spins there only hold a core.
    conductor_idle_spins_ipc_only: bool = False
    # After a duty cycle that sent or received, keep the data path's duty cycles running in C
    # (waiting on its sockets between them) until this long passes without traffic or Python
    # is due, instead of parking in Python after each (0: park at once). It holds the event
    # loop's thread meanwhile, so only a driver alone on its loop (standalone) lingers, and
    # only while it does not spin (conductor_idle_spins_ipc_only without IPC).
    data_path_linger_ns: int = 0
    max_counters: int = 4096
    term_buffer_sparse_file: bool = False
    dir_delete_on_shutdown: bool = True
    # Send runs of equal datagrams as one (UDP GSO) and receive them as one (UDP GRO) where the
    # kernel can; the datagrams on the wire are the same either way.
    udp_offload: bool = True
    # How often a client tells the driver it is alive (well under client_liveness_timeout_ns).
    client_keepalive_interval_ns: int = 500_000_000
    # How often a thread (no GIL) looks for commands in cnc.dat's to-driver ring buffer while the
    # driver parks: the longest a command of a client without a doorbell waits (Aeron's clients).
    command_watch_interval_ns: int = 10_000_000
    # Look every command_watch_interval_ns always, not only while a process without aeronio's
    # core maps cnc.dat (driver/command_watch.py): for Aeron's clients the scan cannot see, in a
    # process that also loaded aeronio, or of another user.
    command_watch_always: bool = False
    # Stop the driver on a client's TERMINATE_DRIVER command (Aeron's termination validator);
    # off, the command is recorded in the error log and ignored.
    terminate_driver_enabled: bool = False
    # Check the storage (and on a tmpfs, memory) left before making a log (driver/storage.py).
    perform_storage_checks: bool = True
    low_storage_warning_threshold: int = 160 * 1024 * 1024

    def __post_init__(self) -> None:
        if not self.dir:
            self.dir = default_dir()
        limits.check_term_length(self.ipc_term_length, "ipc_term_length")
        limits.check_mtu(self.ipc_mtu, "ipc_mtu")
        limits.check_term_length(self.term_length, "term_length")
        limits.check_mtu(self.mtu_length, "mtu_length")
        limits.check_mtu_for_term_length(self.ipc_mtu, self.ipc_term_length, "ipc_mtu")
        limits.check_mtu_for_term_length(self.mtu_length, self.term_length, "mtu_length")
        window = self.ipc_publication_term_window_length
        if window < 0 or window > self.ipc_term_length:
            raise ConfigurationError(
                f"ipc_publication_term_window_length {window} must be in 0..ipc_term_length"
            )
        for name in (
            "publication_unblock_timeout_ns",
            "publication_linger_ns",
            "client_liveness_timeout_ns",
            "image_liveness_timeout_ns",
        ):
            if getattr(self, name) < 0:
                raise ConfigurationError(f"{name} must not be negative")
        for name in (
            "client_keepalive_interval_ns",
            "timer_interval_ns",
            "command_watch_interval_ns",
            "conductor_cycle_threshold_ns",
        ):
            if getattr(self, name) <= 0:
                raise ConfigurationError(f"{name} {getattr(self, name)} must be positive")
        if self.client_keepalive_interval_ns >= self.client_liveness_timeout_ns:
            raise ConfigurationError(
                f"client_keepalive_interval_ns {self.client_keepalive_interval_ns} must be less "
                f"than client_liveness_timeout_ns {self.client_liveness_timeout_ns}"
            )
        if self.conductor_idle_spins < 0:
            raise ConfigurationError("conductor_idle_spins must not be negative")
        if self.data_path_linger_ns < 0:
            raise ConfigurationError("data_path_linger_ns must not be negative")
        if self.low_storage_warning_threshold < 0:
            raise ConfigurationError("low_storage_warning_threshold must not be negative")
        if self.max_counters < 64:  # the driver's system counters take 48 of them
            raise ConfigurationError(f"max_counters {self.max_counters} must be at least 64")

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

    @classmethod
    def from_sources(
        cls,
        defaults: Mapping[str, object] | None = None,
        /,
        *,
        config_file: str | os.PathLike[str] | None = None,
        env: Mapping[str, str] | None = None,
        **options: object,
    ) -> DriverContext:
        """Build from keyword options > `AERONIO_*` variables in env > config file > `defaults`
        (typed values replacing the fields' own, such as STANDALONE_DEFAULTS) > the fields'.

        Text values (env, file strings) accept size suffixes (k/m/g) for lengths and unit
        suffixes (ns/us/ms/s) for durations. Errors name the option and its source.
        """
        unknown = set(options) - set(cls.__struct_fields__)
        if unknown:
            raise ConfigurationError(f"unknown driver option(s): {', '.join(sorted(unknown))}")
        entries: list[tuple[str, Any, str]] = []  # (field, value, source), lowest precedence first
        for name, value in (defaults or {}).items():
            entries.append((name, _check_type(name, value, "defaults"), "defaults"))
        if config_file is not None:
            entries += _file_entries(os.fspath(config_file))
        if env is not None:
            entries += _env_entries(env)
        for name, value in options.items():
            source = "option"
            entries.append((name, _check_type(name, value, source), source))
        return _build(cls, entries)


# The defaults of a standalone driver (`aeronio driver`) that differ from an embedded one's. Its
# loop is its own, so a spin yields to nothing and holds a core its clients may need: on two
# busy cores, a UDP stream between two processes each on a standalone driver, at a 128 KiB
# window, went from 0.66x to 1.19x pyaeron's rate with the drivers parking at once (its status
# messages and data waited less for a core; docs/benchmarks.md), while IPC across processes
# needs the spins (its publisher limit moves in time). An embedded driver's spins yield to the
# application's loop. For the same reason a standalone driver's data path lingers after work
# (nothing else waits for its loop): UDP between standalone drivers went from 2.8 to 3.6 M
# msgs/s at a 2 MiB window, round trips through them from 362 to 263 µs (docs/benchmarks.md).
STANDALONE_DEFAULTS: Mapping[str, object] = {
    "conductor_idle_spins_ipc_only": True,
    "data_path_linger_ns": 1_000_000,
}


def option_names() -> tuple[str, ...]:
    """The driver option (field) names, in declaration order."""
    return DriverContext.__struct_fields__


def env_var_name(option: str) -> str:
    """The environment variable for an option: `ipc_term_length` -> `AERONIO_IPC_TERM_LENGTH`."""
    return ENV_PREFIX + option.upper()


def parse_option_value(option: str, text: str, source: str) -> Any:
    """Convert an option's text (from env, a file or a command line) to the option's type.

    Raises ConfigurationError naming the source and option for an unknown option or bad text.
    """
    kind = _field_type(option, source)
    try:
        if kind is str:
            return text
        if kind is bool:
            lowered = text.strip().lower()
            if lowered in _TRUE or lowered in _FALSE:
                return lowered in _TRUE
            raise ConfigurationError(
                f"invalid boolean for {option}: {text!r} (expected true/false/1/0/yes/no)"
            )
        text = text.strip()
        if option.endswith(("_length", "_mtu")):
            return parse_size(option, text)
        if option.endswith("_ns"):
            return parse_duration_ns(option, text)
        if _INT_RE.fullmatch(text) is None:
            raise ConfigurationError(f"invalid integer for {option}: {text!r}")
        return int(text)
    except ConfigurationError as e:
        raise ConfigurationError(f"{source}: {e}") from None


def _field_type(option: str, source: str) -> type:
    if option not in DriverContext.__struct_fields__:
        raise ConfigurationError(f"{source}: unknown driver option {option!r}")
    return _FIELD_TYPES[option]


def _check_type(option: str, value: object, source: str) -> Any:
    """An already-typed value, checked against the option's type (bool is not an int)."""
    kind = _field_type(option, source)
    if type(value) is not kind:
        raise ConfigurationError(
            f"{source}: {option} must be of type {kind.__name__}, not {type(value).__name__} "
            f"({value!r})"
        )
    return value


def _env_entries(env: Mapping[str, str]) -> list[tuple[str, Any, str]]:
    entries = []
    for var in sorted(env):
        if not var.startswith(ENV_PREFIX) or var in NON_DRIVER_ENV_VARS:
            continue
        option = var[len(ENV_PREFIX) :].lower()
        if option not in DriverContext.__struct_fields__:
            raise ConfigurationError(f"{var}: unknown driver option {option!r}")
        entries.append((option, parse_option_value(option, env[var], var), var))
    return entries


def _file_entries(path: str) -> list[tuple[str, Any, str]]:
    source = f"config file {path}"
    table = _load_file(path, source)
    entries = []
    for key, value in table.items():
        option = key.replace("-", "_")
        if option not in DriverContext.__struct_fields__:
            raise ConfigurationError(f"{source}: unknown driver option {key!r}")
        if isinstance(value, str) and _FIELD_TYPES[option] is not str:
            value = parse_option_value(option, value, source)
        entries.append((option, _check_type(option, value, source), source))
    return entries


def _load_file(path: str, source: str) -> dict[str, Any]:
    ext = os.path.splitext(path)[1].lower()
    if ext not in (".toml", ".json"):
        raise ConfigurationError(f"{source}: unsupported extension {ext!r} (use .toml or .json)")
    try:
        with open(path, "rb") as f:
            table = tomllib.load(f) if ext == ".toml" else json.load(f)
    except FileNotFoundError:
        raise ConfigurationError(f"{source}: no such file") from None
    except (OSError, ValueError) as e:  # TOMLDecodeError and JSONDecodeError are ValueErrors
        raise ConfigurationError(f"{source}: cannot read: {e}") from None
    if not isinstance(table, dict):
        raise ConfigurationError(f"{source}: expected a table of options, not {type(table)}")
    return table


def _build(cls: type[DriverContext], entries: list[tuple[str, Any, str]]) -> DriverContext:
    """Construct from the entries; on a validation error, blame the first entry that causes it."""
    values: dict[str, Any] = {}
    for option, value, _ in entries:
        values[option] = value
    try:
        return cls(**values)
    except ConfigurationError as error:
        final = error
    values.clear()
    for option, value, source in entries:
        values[option] = value
        try:
            cls(**values)
        except ConfigurationError as e:
            raise ConfigurationError(f"{source}: {e}") from None
    raise final  # not reached: the full set failed, so some prefix does


_FIELD_TYPES: dict[str, type] = {f.name: f.type for f in msgspec.structs.fields(DriverContext)}
