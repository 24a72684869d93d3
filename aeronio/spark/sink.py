"""The sink: every row's `data` offered on a channel and stream, in row order per task.

Each task connects to the driver in `driver_dir` (else launches an embedded driver for itself),
adds a (concurrent) publication and offers the rows of its partition batch by batch, waiting
through back-pressure and "not connected" for at most `timeout` seconds at a time. Its commit
message reports what it wrote and the position after its last message. A retried task offers
its rows again: at-least-once.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Iterator
from dataclasses import dataclass

import numpy as np
import pyarrow as pa
from pyspark.sql.datasource import (
    DataSourceArrowWriter,
    DataSourceStreamArrowWriter,
    WriterCommitMessage,
)
from pyspark.sql.types import BinaryType, StringType, StructType

import aeronio
from aeronio.errors import OfferBatchTimeoutError
from aeronio.spark.options import WriteOptions
from aeronio.spark.recordings import SourceError

log = logging.getLogger("aeronio.spark")

OFFER_CHUNK = 1024  # messages per offer_batch (each given the whole timeout)


@dataclass
class PublishedCommit(WriterCommitMessage):
    """What one task published: on which session, how much, and the position after its last
    message (-1 when it had no rows)."""

    channel: str
    stream_id: int
    session_id: int
    messages: int
    bytes: int
    end_position: int


def check_schema(schema: StructType) -> int:
    """The index of the `data` column (binary or string); other columns are ignored."""
    names = [f.name for f in schema.fields]
    if "data" not in names:
        raise SourceError(f"the rows to write need a data column (binary or string): {names}")
    kind = schema["data"].dataType
    if not isinstance(kind, (BinaryType, StringType)):
        raise SourceError(f"column data must be binary or string, not {kind.simpleString()}")
    return names.index("data")


def _messages(
    column: pa.Array, max_payload: int, max_message: int, first_row: int
) -> tuple[np.ndarray | list[bytes], int]:
    """The column's values as what `offer_batch` takes: a 2-D uint8 array when every value has
    the same length and fits a frame (no copy), else a list of bytes. SourceError, naming the
    task's row (the column's first is `first_row`), for a null or a value longer than
    `max_message`."""
    if column.null_count:
        row = first_row + int(np.argmax(column.is_null().to_numpy(zero_copy_only=False)))
        raise SourceError(f"column data is null in row {row} of the task: nothing to send")
    if pa.types.is_string(column.type):
        column = column.cast(pa.binary())
    if pa.types.is_large_binary(column.type) or pa.types.is_large_string(column.type):
        column = column.cast(pa.binary())
    n = len(column)
    _, offsets_buffer, values = column.buffers()
    offsets = np.frombuffer(offsets_buffer, np.int32, n + 1, column.offset * 4)
    lengths = np.diff(offsets)
    if n and int(lengths.max()) > max_message:
        i = int(np.argmax(lengths > max_message))
        raise SourceError(
            f"column data in row {first_row + i} of the task is {int(lengths[i])} bytes, more "
            f"than the stream's max message length {max_message} (a term length / 8)"
        )
    size = int(lengths[0]) if n else 0
    if n and 0 < size <= max_payload and np.all(lengths == size):
        data = np.frombuffer(values, np.uint8, n * size, int(offsets[0]))
        return data.reshape(n, size), n * size
    return column.to_pylist(), int(offsets[-1] - offsets[0])


async def _publish(
    options: WriteOptions, batches: Iterator[pa.RecordBatch], data_index: int
) -> PublishedCommit:
    embedded = options.driver_dir is None
    connection = aeronio.connect() if embedded else aeronio.connect(options.driver_dir)
    async with connection as aeron:
        publication = await aeron.add_publication(options.channel, options.stream_id)
        count = total = 0
        end = -1
        try:
            while (batch := await asyncio.to_thread(next, batches, None)) is not None:
                try:
                    messages, size = _messages(
                        batch.column(data_index),
                        publication.max_payload_length,
                        publication.max_message_length,
                        count,
                    )
                except SourceError as e:  # rows offered before stay offered: say how many
                    raise SourceError(
                        f"{e}; the task offered its {count} row(s) before it"
                        + (
                            f" (session {publication.session_id}, to position {end})"
                            if count
                            else ""
                        )
                    ) from None
                for at in range(0, len(messages), OFFER_CHUNK):
                    try:
                        end = await publication.offer_batch(
                            messages[at : at + OFFER_CHUNK], timeout=options.timeout
                        )
                    except OfferBatchTimeoutError as e:  # the rows before stay offered
                        offered = count + at + e.appended
                        raise SourceError(
                            f"{e}; the task offered {offered} row(s) in all (session "
                            f"{publication.session_id})"
                        ) from None
                count += len(messages)
                total += size
            if embedded and count:  # an error for Spark to retry, not a loss the driver logs
                await publication.wait_sent(end, timeout=options.timeout)
        finally:
            await publication.close()
        return PublishedCommit(
            options.channel, options.stream_id, publication.session_id, count, total, end
        )


def _write(
    options: WriteOptions, data_index: int, iterator: Iterator[pa.RecordBatch]
) -> PublishedCommit:
    return asyncio.run(_publish(options, iter(iterator), data_index))


class BatchWriter(DataSourceArrowWriter):
    def __init__(self, options: WriteOptions, schema: StructType):
        self.options = options
        self.data_index = check_schema(schema)

    def write(self, iterator: Iterator[pa.RecordBatch]) -> PublishedCommit:
        return _write(self.options, self.data_index, iterator)

    def commit(self, messages: list[WriterCommitMessage | None]) -> None:
        _log_commit(messages, None)

    def abort(self, messages: list[WriterCommitMessage | None]) -> None:
        _log_commit(messages, None, aborted=True)


class StreamWriter(DataSourceStreamArrowWriter):
    def __init__(self, options: WriteOptions, schema: StructType):
        self.options = options
        self.data_index = check_schema(schema)

    def write(self, iterator: Iterator[pa.RecordBatch]) -> PublishedCommit:
        return _write(self.options, self.data_index, iterator)

    def commit(self, messages: list[WriterCommitMessage | None], batchId: int) -> None:
        _log_commit(messages, batchId)

    def abort(self, messages: list[WriterCommitMessage | None], batchId: int) -> None:
        _log_commit(messages, batchId, aborted=True)


def _log_commit(
    messages: list[WriterCommitMessage | None], batch_id: int | None, aborted: bool = False
) -> None:
    done = [m for m in messages if isinstance(m, PublishedCommit)]
    what = "aborted (rows offered before are not taken back)" if aborted else "committed"
    log.info(
        "aeronio sink %s%s: %d messages, %d bytes; %s",
        what,
        "" if batch_id is None else f" (batch {batch_id})",
        sum(m.messages for m in done),
        sum(m.bytes for m in done),
        ", ".join(f"session {m.session_id} to {m.end_position}" for m in done if m.messages),
    )
