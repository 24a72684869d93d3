"""Messages to Arrow record batches, by layout.

- raw: the metadata columns and `data` (binary), any subset of them in any order.
- fixed: each message is one little-endian packed record of the schema's fields (long, int,
  short, byte, double, float, boolean), read through a numpy structured dtype: no Python loop
  per row.
- msgpack / json: each message is a map (object) of the schema's fields, decoded by msgspec
  into the schema's types.

With a decoding layout, schema columns named in `metadata_columns` are filled from the message
(recording_id, position, ...) instead of the record.
"""

from __future__ import annotations

import datetime
import decimal
import operator
from collections.abc import Callable, Sequence
from typing import Any

import msgspec
import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
from pyspark.sql.pandas.types import to_arrow_schema
from pyspark.sql.types import (
    ArrayType,
    BinaryType,
    BooleanType,
    ByteType,
    DataType,
    DateType,
    DecimalType,
    DoubleType,
    FloatType,
    IntegerType,
    LongType,
    MapType,
    ShortType,
    StringType,
    StructField,
    StructType,
    TimestampType,
)

from aeronio.archive.segments import HEADER_LENGTH
from aeronio.spark import frames as fr
from aeronio.spark.recordings import Recording, SourceError

METADATA: dict[str, DataType] = {
    "recording_id": LongType(),
    "session_id": IntegerType(),
    "stream_id": IntegerType(),
    "channel": StringType(),
    "position": LongType(),
    "length": IntegerType(),
    "reserved_value": LongType(),
}
RAW: dict[str, DataType] = METADATA | {"data": BinaryType()}

FIXED_TYPES: dict[type, str] = {
    LongType: "<i8",
    IntegerType: "<i4",
    ShortType: "<i2",
    ByteType: "i1",
    DoubleType: "<f8",
    FloatType: "<f4",
    BooleanType: "u1",
}


def raw_schema() -> StructType:
    """The raw columns: recording_id, session_id, stream_id, channel, position, length,
    reserved_value, data."""
    return StructType([StructField(name, kind, True) for name, kind in RAW.items()])


def _python_type(kind: DataType) -> Any:
    if isinstance(kind, (LongType, IntegerType, ShortType, ByteType)):
        return int
    if isinstance(kind, (DoubleType, FloatType)):
        return float
    if isinstance(kind, StringType):
        return str
    if isinstance(kind, BinaryType):
        return bytes
    if isinstance(kind, BooleanType):
        return bool
    if isinstance(kind, TimestampType):
        return datetime.datetime
    if isinstance(kind, DateType):
        return datetime.date
    if isinstance(kind, DecimalType):
        return decimal.Decimal
    if isinstance(kind, (ArrayType, MapType, StructType)):
        return Any
    raise SourceError(f"type {kind.simpleString()} is not supported")


class Decoder:
    """Builds each batch's columns for the query's schema (checked on the driver when made)."""

    def __init__(self, schema: StructType, layout: str, metadata_columns: tuple[str, ...] = ()):
        self.schema = schema
        self.layout = layout
        self.names = [f.name for f in schema.fields]
        if len(set(self.names)) != len(self.names):
            raise SourceError(f"the schema names a column twice: {self.names}")
        if layout == "raw":
            for f in schema.fields:
                if f.name not in RAW:
                    raise SourceError(
                        f"column {f.name!r} is not one of the raw layout's "
                        f"({', '.join(RAW)}); decode messages with option layout fixed, "
                        "msgpack or json"
                    )
            self.metadata = set(self.names)
        else:
            for name in metadata_columns:
                if name not in METADATA:
                    raise SourceError(
                        f"option metadata_columns: {name!r} is not one of {', '.join(METADATA)}"
                    )
                if name not in self.names:
                    raise SourceError(
                        f"option metadata_columns: {name!r} is not a column of the schema"
                    )
            self.metadata = set(metadata_columns)
        for f in schema.fields:
            if f.name in self.metadata and f.dataType != RAW[f.name]:
                raise SourceError(
                    f"column {f.name!r} must be {RAW[f.name].simpleString()}, not "
                    f"{f.dataType.simpleString()}"
                )
        self.record_fields = [f for f in schema.fields if f.name not in self.metadata]
        if layout != "raw" and not self.record_fields:
            raise SourceError(f"layout {layout} needs record columns in the schema")
        self.dtype = np.dtype([])  # the record (layout fixed); no fields for the others
        if layout == "fixed":
            formats = []
            for f in self.record_fields:
                code = FIXED_TYPES.get(type(f.dataType))
                if code is None:
                    raise SourceError(
                        f"layout fixed: column {f.name!r} is {f.dataType.simpleString()}; a "
                        "fixed record holds long, int, short, byte, double, float or boolean"
                    )
                formats.append(code)
            self.dtype = np.dtype(
                {"names": [f.name for f in self.record_fields], "formats": formats}
            )
        elif layout in ("msgpack", "json"):
            for f in self.record_fields:
                try:
                    _python_type(f.dataType)
                except SourceError as e:
                    raise SourceError(f"layout {layout}: column {f.name!r}: {e}") from None
        self._arrow_schema: pa.Schema | None = None
        self._decode: Callable[[bytes], Any] | None = None

    def __getstate__(self) -> dict[str, object]:
        state = self.__dict__.copy()
        state["_arrow_schema"] = None
        state["_decode"] = None  # a msgspec type made at run time does not pickle
        return state

    @property
    def arrow_schema(self) -> pa.Schema:
        if self._arrow_schema is None:
            self._arrow_schema = to_arrow_schema(self.schema, timezone="UTC")
        return self._arrow_schema

    @property
    def record_size(self) -> int:
        return self.dtype.itemsize

    # -- batches -------------------------------------------------------------------------

    def batch(
        self,
        r: Recording,
        buffer: np.ndarray,
        position: int,
        frames: fr.Frames,
        messages: fr.Messages,
    ) -> pa.RecordBatch:
        """The batch of `messages` (found in `buffer`, whose first byte is at `position`)."""
        n = len(messages)
        columns: dict[str, pa.Array] = {}
        payloads = None
        if "data" in self.metadata or self.layout in ("msgpack", "json"):
            payloads = payload_array(buffer, frames, messages)
        for name in self.metadata:
            if name == "data":
                columns[name] = payloads
            elif name == "recording_id":
                columns[name] = pa.array(np.full(n, r.recording_id, np.int64))
            elif name == "session_id":
                columns[name] = pa.array(np.full(n, r.session_id, np.int32))
            elif name == "stream_id":
                columns[name] = pa.array(np.full(n, r.stream_id, np.int32))
            elif name == "channel":
                columns[name] = pa.repeat(r.channel, n).cast(pa.string())
            elif name == "position":
                columns[name] = pa.array(messages.offset + position)
            elif name == "length":
                columns[name] = pa.array(messages.length)
            elif name == "reserved_value":
                columns[name] = pa.array(messages.reserved_value)
        if self.layout == "fixed":
            columns.update(self._fixed(r, position, buffer, frames, messages, payloads))
        elif self.layout in ("msgpack", "json"):
            columns.update(self._structured(r, position, messages, payloads))
        arrays = [columns[name] for name in self.names]
        return pa.RecordBatch.from_arrays(arrays, schema=self.arrow_schema)

    def _fixed(
        self,
        r: Recording,
        position: int,
        buffer: np.ndarray,
        frames: fr.Frames,
        messages: fr.Messages,
        payloads: pa.Array | None,
    ) -> dict[str, pa.Array]:
        """Each field of the records: copied once out of `buffer` through strided views of
        the runs of records an equal distance apart (a run per term, for records of one size,
        one frame each), else out of the joined payloads (`payloads`, when already made)."""
        size = self.dtype.itemsize
        wrong = np.flatnonzero(messages.length != size)
        if len(wrong):
            i = int(wrong[0])
            raise SourceError(
                f"layout fixed: the message at position {position + int(messages.offset[i])} of "
                f"recording {r.recording_id} is {int(messages.length[i])} bytes, the record "
                f"({', '.join(f.name for f in self.record_fields)}) is {size} bytes"
            )
        n = len(messages)
        records = None
        if n and np.array_equal(messages.first, messages.last):  # one frame each
            records = _strided_records(buffer, messages.offset + HEADER_LENGTH, self.dtype)
        if records is None:
            if payloads is None:
                payloads = payload_array(buffer, frames, messages)
            _, offsets, values = payloads.buffers()
            first = int(np.frombuffer(offsets, np.int32, 1, payloads.offset * 4)[0]) if n else 0
            records = [
                np.frombuffer(values, self.dtype, n, first) if n else np.empty(0, self.dtype)
            ]
        out = {}
        for f in self.record_fields:
            column = np.concatenate([run[f.name] for run in records])  # a copy, even of one
            if isinstance(f.dataType, BooleanType):
                column = column != 0
            out[f.name] = pa.array(column)
        return out

    def _structured(
        self, r: Recording, position: int, messages: fr.Messages, payloads: pa.Array
    ) -> dict[str, pa.Array]:
        decode = self._decode
        if decode is None:
            fields: list[tuple[str, Any] | tuple[str, Any, None]] = []
            for f in self.record_fields:
                kind = _python_type(f.dataType)
                if f.nullable:
                    fields.append((f.name, kind | None, None))
                else:
                    fields.append((f.name, kind))
            record = msgspec.defstruct("Record", fields, kw_only=True)
            module = msgspec.msgpack if self.layout == "msgpack" else msgspec.json
            decode = self._decode = module.Decoder(record).decode
        items = payloads.to_pylist()
        try:
            rows = list(map(decode, items))
        except (msgspec.DecodeError, msgspec.ValidationError):
            for i, item in enumerate(items):
                try:
                    decode(item)
                except (msgspec.DecodeError, msgspec.ValidationError) as e:
                    raise SourceError(
                        f"layout {self.layout}: the message at position "
                        f"{position + int(messages.offset[i])} of recording {r.recording_id} "
                        f"does not decode: {e}"
                    ) from None
            raise
        names = [f.name for f in self.record_fields]
        columns: list[Sequence[Any]]
        if len(names) == 1:
            columns = [[getattr(row, names[0]) for row in rows]]
        else:
            columns = list(zip(*map(operator.attrgetter(*names), rows), strict=True)) or [
                [] for _ in names
            ]
        out = {}
        for f, values in zip(self.record_fields, columns, strict=True):
            kind = self.arrow_schema.field(f.name).type
            try:
                out[f.name] = pa.array(values, type=kind)
            except (pa.ArrowInvalid, pa.ArrowTypeError, OverflowError) as e:
                raise SourceError(
                    f"layout {self.layout}: column {f.name!r} ({f.dataType.simpleString()}) in "
                    f"recording {r.recording_id} near position {position}: {e}"
                ) from None
        return out


def _strided_records(buffer: np.ndarray, starts: np.ndarray, dtype: np.dtype) -> list | None:
    """Records of `dtype` at `starts` (ascending offsets in `buffer`) as structured views, one
    per run of starts an equal distance apart; None when the runs are too many to be worth it
    (records of many sizes in between)."""
    n = len(starts)
    steps = np.diff(starts)
    changes = np.flatnonzero(steps[1:] != steps[:-1]) + 1  # k: steps[k] differs from steps[k-1]
    if len(changes) > n // 16:
        return None
    views, i = [], 0
    while i < n:
        if i == n - 1:
            views.append(np.ndarray(1, dtype, buffer, int(starts[i])))
            break
        j = int(np.searchsorted(changes, i, side="right"))
        k = int(changes[j]) if j < len(changes) else n - 1  # records i..k are steps[i] apart
        views.append(np.ndarray(k - i + 1, dtype, buffer, int(starts[i]), (int(steps[i]),)))
        i = k + 1
    return views


def payload_array(buffer: np.ndarray, frames: fr.Frames, messages: fr.Messages) -> pa.Array:
    """The messages' payloads (fragments joined) as one binary array, copied out of `buffer`
    by Arrow's `take`, not a Python loop."""
    if len(messages) == 0:
        return pa.array([], pa.binary())
    starts, ends, counts = fr.payload_spans(frames, messages)
    parts = _gather(buffer, starts, ends)
    if len(parts) == len(messages):
        return parts
    offsets = np.concatenate([[0], np.cumsum(counts)]).astype(np.int32)
    joined = pc.binary_join(pa.ListArray.from_arrays(pa.array(offsets), parts), b"")
    return joined.cast(pa.binary())


def _gather(buffer: np.ndarray, starts: np.ndarray, ends: np.ndarray) -> pa.Array:
    """Binary values buffer[starts[i]:ends[i]] (ascending, not overlapping)."""
    n = len(starts)
    bounds = np.empty(2 * n, np.int32)
    bounds[0::2] = starts
    bounds[1::2] = ends
    # Elements alternate: a payload, then the bytes up to the next payload (a header, padding).
    spans = pa.Array.from_buffers(
        pa.binary(), 2 * n - 1, [None, pa.py_buffer(bounds), pa.py_buffer(buffer)]
    )
    return pc.take(spans, pa.array(np.arange(0, 2 * n, 2, dtype=np.int64)))
