"""The source's and the sink's options: parsed and checked on the Spark driver, so that a typo
fails the query before any task runs, naming the option."""

from __future__ import annotations

import json
import math
import re
from collections.abc import Mapping
from typing import NamedTuple

from aeronio.archive.context import CONTROL_STREAM_ID
from aeronio.errors import ChannelUriError
from aeronio.protocol.channel import ChannelUri
from aeronio.spark.recordings import Selection, SourceError
from aeronio.spark.remote import Remote

LAYOUTS = ("raw", "fixed", "msgpack", "json")
EARLIEST, LATEST = -2, -1  # in starting_positions JSON, as Kafka's

# option -> what it is, for the error that lists the known ones
COMMON_READ = {
    "archive": "the archive directory (or .load(DIR))",
    "path": "the archive directory, as .load(DIR) gives it",
    "recording_ids": "comma-separated recording ids",
    "channel": "a substring of the recordings' original channel",
    "stream_id": "the recordings' stream id",
    "layout": "raw (default), fixed, msgpack or json",
    "metadata_columns": "with a decoding layout: schema columns filled from the message",
    "driver_dir": "the archive's driver directory: active recordings end at rec-pos",
    "fail_on_data_loss": "true (default) or false",
    "max_partition_bytes": "split a segment into partitions of whole terms of at most this",
}
BATCH_READ = COMMON_READ | {
    "start_position": "read messages from this position",
    "end_position": "read messages starting before this position",
    "archive_control": "a remote archive's control channel (aeron:udp?endpoint=host:port)",
    "archive_control_stream_id": "the remote archive's control stream id (default 10)",
    "archive_timeout": "seconds a remote archive may take to answer or replay (default 10)",
    "push_down_aggregates": "true (default) or false: the JVM source may aggregate as it reads",
}
STREAM_READ = COMMON_READ | {
    "starting_positions": 'earliest (default), latest or JSON {"<recording id>": position}',
    "max_bytes_per_trigger": "at most about this many bytes per micro-batch",
}
WRITE = {
    "channel": "the channel to publish on",
    "stream_id": "the stream id to publish on",
    "driver_dir": "a running media driver's directory (else an embedded driver per task)",
    "timeout": "seconds an offer may wait (not connected, back-pressured); default 60",
}
# Options Spark itself adds to a streaming sink's.
SPARK_SINK_OPTIONS = {"checkpointlocation", "path", "queryname"}


def check_names(options: Mapping[str, str], known: Mapping[str, str], what: str) -> None:
    unknown = sorted(set(k.lower() for k in options) - set(known))
    if unknown:
        listed = ", ".join(sorted(known))
        raise SourceError(
            f"unknown option(s) for {what}: {', '.join(unknown)} (the options are: {listed})"
        )


_INTEGER = re.compile(r"[+-]?[0-9]+")


def _parse_long(text: str) -> int | None:
    """`text` (stripped) as Java's Long.parseLong reads it: ASCII digits, an optional sign, 64
    bits; else None."""
    text = text.strip()
    if not _INTEGER.fullmatch(text):
        return None
    number = int(text)
    return number if -(2**63) <= number < 2**63 else None


def _int(options: Mapping[str, str], name: str, low: int | None = None) -> int | None:
    value = options.get(name)
    if value is None:
        return None
    number = _parse_long(str(value))
    if number is None:
        raise SourceError(f"option {name}: {value!r} is not an integer")
    if low is not None and number < low:
        raise SourceError(f"option {name}: {number} must be at least {low}")
    return number


def _int32(options: Mapping[str, str], name: str) -> int | None:
    """An integer option that must fit 32 bits (a stream id), or None."""
    number = _int(options, name)
    if number is not None and not -(2**31) <= number < 2**31:
        raise SourceError(f"option {name}: {number} does not fit 32 bits")
    return number


_SIZE = re.compile(r"^\s*(\d+)\s*([kmg]?)i?b?\s*$", re.IGNORECASE | re.ASCII)


def _size(options: Mapping[str, str], name: str) -> int | None:
    value = options.get(name)
    if value is None:
        return None
    m = _SIZE.match(str(value))
    if not m:
        raise SourceError(f"option {name}: {value!r} is not a size (bytes, or with k, m or g)")
    number = int(m.group(1)) << {"": 0, "k": 10, "m": 20, "g": 30}[m.group(2).lower()]
    if number <= 0:
        raise SourceError(f"option {name}: {value!r} must be positive")
    if number >= 2**63:
        raise SourceError(f"option {name}: {value!r} does not fit 64 bits")
    return number


def _bool(options: Mapping[str, str], name: str, default: bool) -> bool:
    value = options.get(name)
    if value is None:
        return default
    text = str(value).strip().lower()
    if text in ("true", "1", "yes"):
        return True
    if text in ("false", "0", "no"):
        return False
    raise SourceError(f"option {name}: {value!r} is not true or false")


class ReadOptions(NamedTuple):
    archive: str
    selection: Selection
    layout: str
    metadata_columns: tuple[str, ...]
    driver_dir: str | None
    fail_on_data_loss: bool
    max_partition_bytes: int | None
    start_position: int | None = None
    end_position: int | None = None
    starting_positions: str | dict[int, int] = "earliest"
    max_bytes_per_trigger: int | None = None
    remote: Remote | None = None  # option archive_control: read by replay, not from files


def read_options(options: Mapping[str, str], streaming: bool | None) -> ReadOptions:
    """Parse a reader's options; `streaming` None checks names against both kinds."""
    if streaming is None:
        check_names(options, BATCH_READ | STREAM_READ, "reading")
    else:
        known, other = (STREAM_READ, BATCH_READ) if streaming else (BATCH_READ, STREAM_READ)
        kind, other_kind = ("a streaming", "a batch") if streaming else ("a batch", "a streaming")
        misplaced = sorted(k for k in options if k not in known and k in other)
        if misplaced:
            raise SourceError(
                f"option(s) {', '.join(misplaced)} are for {other_kind} read, not {kind} read"
            )
        check_names(options, known, f"{kind} read")
    archive = options.get("archive") or options.get("path")
    remote = _remote(options, archive)
    if not archive and remote is None:
        raise SourceError(
            'option archive is required: .option("archive", DIR) or .load(DIR) (or '
            "archive_control, a remote archive's control channel)"
        )
    if options.get("archive") and options.get("path") and options["archive"] != options["path"]:
        raise SourceError(
            f"two archives given: option archive {options['archive']!r} and path "
            f"{options['path']!r}"
        )
    ids = options.get("recording_ids")
    recording_ids = None
    if ids is not None:
        parsed = [_parse_long(i) for i in str(ids).split(",") if i.strip()]
        if None in parsed:
            raise SourceError(f"option recording_ids: {ids!r} is not a comma-separated list of ids")
        recording_ids = frozenset(i for i in parsed if i is not None)
        if not recording_ids:
            raise SourceError("option recording_ids is empty")
    channel = options.get("channel")
    selection = Selection(recording_ids, channel or None, _int32(options, "stream_id"))
    layout = str(options.get("layout", "raw")).strip().lower()
    if layout not in LAYOUTS:
        raise SourceError(f"option layout: {layout!r} is not one of {', '.join(LAYOUTS)}")
    metadata = tuple(
        c.strip() for c in str(options.get("metadata_columns", "")).split(",") if c.strip()
    )
    if metadata and layout == "raw":
        raise SourceError("option metadata_columns is for the fixed, msgpack and json layouts")
    start = _int(options, "start_position", 0)
    end = _int(options, "end_position", 0)
    _bool(options, "push_down_aggregates", True)  # checked here, used by the JVM source only
    if start is not None and end is not None and end < start:
        raise SourceError(f"option end_position {end} is before start_position {start}")
    return ReadOptions(
        archive=str(archive or ""),
        selection=selection,
        layout=layout,
        metadata_columns=metadata,
        driver_dir=options.get("driver_dir") or None,
        fail_on_data_loss=_bool(options, "fail_on_data_loss", True),
        max_partition_bytes=_size(options, "max_partition_bytes"),
        start_position=start,
        end_position=end,
        starting_positions=_starting_positions(options.get("starting_positions")),
        max_bytes_per_trigger=_size(options, "max_bytes_per_trigger"),
        remote=remote,
    )


def _remote(options: Mapping[str, str], archive: str | None) -> Remote | None:
    """A remote archive (option archive_control), checked: a UDP channel with an endpoint."""
    control = options.get("archive_control")
    if not control:
        for name in ("archive_control_stream_id", "archive_timeout"):
            if options.get(name) is not None:
                raise SourceError(f"option {name} is for a remote archive (archive_control)")
        return None
    if archive:
        raise SourceError(
            f"option archive_control {control!r} names a remote archive, and {archive!r} a "
            "directory: give one of them"
        )
    if options.get("driver_dir"):
        raise SourceError(
            "option driver_dir is for an archive directory: a remote archive tells how far its "
            "active recordings are recorded"
        )
    try:
        uri = ChannelUri.parse(str(control))
    except ChannelUriError as e:
        raise SourceError(f"option archive_control: {e}") from None
    if uri.media != "udp" or not uri.params.get("endpoint"):
        raise SourceError(
            f"option archive_control: {control!r} is not a UDP channel with an endpoint "
            "(aeron:udp?endpoint=host:port)"
        )
    stream_id = _int32(options, "archive_control_stream_id")
    if stream_id is None:
        stream_id = CONTROL_STREAM_ID
    raw = options.get("archive_timeout", "10")
    try:
        timeout = float(raw)
    except ValueError:
        raise SourceError(f"option archive_timeout: {raw!r} is not a number of seconds") from None
    if not 0 < timeout < math.inf:  # nan too
        raise SourceError(
            f"option archive_timeout: {raw!r} must be a positive, finite number of seconds"
        )
    return Remote(str(control), stream_id, timeout)


def _starting_positions(value: str | None) -> str | dict[int, int]:
    if value is None:
        return "earliest"
    text = str(value).strip()
    if text.lower() in ("earliest", "latest"):
        return text.lower()
    try:
        parsed = json.loads(text)
        if not isinstance(parsed, dict):
            raise ValueError
        out: dict[int, int] = {}
        for key, number in parsed.items():
            rid, position = _json_long(key), _json_long(number)
            if rid is None or position is None:
                raise ValueError
            out[rid] = position
    except ValueError:
        raise SourceError(
            f"option starting_positions: {value!r} is not earliest, latest or a JSON object "
            '{"<recording id>": <position, -2 earliest, -1 latest>}'
        ) from None
    for rid, position in out.items():
        if position < EARLIEST:
            raise SourceError(
                f"option starting_positions: recording {rid}: position {position} is negative "
                "(-2 is earliest, -1 latest)"
            )
    return out


def _json_long(value: object) -> int | None:
    """A recording id or position in starting_positions' JSON: a JSON integer of 64 bits, or a
    string Long.parseLong reads (not a fraction, a bool or 1e3: none is truncated); else None."""
    if isinstance(value, str):
        return _parse_long(value)
    if isinstance(value, int) and not isinstance(value, bool) and -(2**63) <= value < 2**63:
        return value
    return None


class WriteOptions(NamedTuple):
    channel: str
    stream_id: int
    driver_dir: str | None
    timeout: float


def write_options(options: Mapping[str, str], streaming: bool) -> WriteOptions:
    names = {k: v for k, v in options.items() if not (streaming and k in SPARK_SINK_OPTIONS)}
    check_names(names, WRITE, "writing")
    channel = options.get("channel")
    if not channel:
        raise SourceError('option channel is required: .option("channel", "aeron:udp?...")')
    stream_id = _int32(options, "stream_id")
    if stream_id is None:
        raise SourceError('option stream_id is required: .option("stream_id", 10)')
    try:
        uri = ChannelUri.parse(str(channel))
    except ChannelUriError as e:
        raise SourceError(f"option channel: {e}") from None
    driver_dir = options.get("driver_dir") or None
    if driver_dir is None and uri.media == "ipc":
        raise SourceError(
            f"channel {channel!r} needs option driver_dir: an IPC publication on an embedded "
            "driver per task would have no subscriber"
        )
    raw = options.get("timeout", "60")
    try:
        timeout = float(raw)
    except ValueError:
        raise SourceError(f"option timeout: {raw!r} is not a number of seconds") from None
    if not 0 < timeout < math.inf:  # nan too
        raise SourceError(f"option timeout: {raw!r} must be a positive, finite number of seconds")
    return WriteOptions(str(channel), stream_id, driver_dir, timeout)
