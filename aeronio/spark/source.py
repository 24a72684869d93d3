"""The Python data source "aeronio_python": batch and streaming reads of an archive's
recordings, and a sink that publishes rows (see docs/spark.md). `format("aeronio")`, the JVM
source (jvm.py), reads archive directories in batch itself and hands it everything else."""

from __future__ import annotations

import logging
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING

from pyspark.sql.datasource import (
    DataSource,
    DataSourceReader,
    DataSourceStreamReader,
    InputPartition,
)
from pyspark.sql.streaming.datasource import (
    ReadAllAvailable,
    ReadLimit,
    ReadMaxBytes,
    SupportsTriggerAvailableNow,
)
from pyspark.sql.types import StructType

from aeronio.archive.catalog import Catalog
from aeronio.spark import reader as rd
from aeronio.spark import recordings as recs
from aeronio.spark import remote
from aeronio.spark.decode import Decoder, raw_schema
from aeronio.spark.options import EARLIEST, LATEST, ReadOptions, read_options, write_options
from aeronio.spark.recordings import DataLossError, Recording, SourceError

if TYPE_CHECKING:
    from aeronio.spark.sink import BatchWriter, StreamWriter

log = logging.getLogger("aeronio.spark")


class AeronioPartition(InputPartition):
    """One `reader.Part`."""

    def __init__(self, part: rd.Part):
        super().__init__(part)

    def __repr__(self) -> str:
        p = self.value
        return (
            f"AeronioPartition(recording {p.recording.recording_id}, "
            f"positions {p.emit_from}..{p.emit_to})"
        )


class _Reading:
    """What batch and stream readers share: options, the decoder, and the archive."""

    def __init__(self, options: ReadOptions, decoder: Decoder):
        self.options = options
        self.decoder = decoder
        self.archive_dir = Path(options.archive)
        self._catalog: Catalog | None = None
        self._positions: recs.RecordingPositions | None = None
        # a remote archive's: (recordings, positions of active ones)
        self._listing: tuple[list[Recording], dict[int, int]] | None = None

    def __getstate__(self) -> dict[str, object]:
        state = self.__dict__.copy()
        state["_catalog"] = None  # reopened where needed (planning only)
        state["_positions"] = None
        state["_listing"] = None
        return state

    def _remote_listing(self, archive: remote.Remote) -> tuple[list[Recording], dict[int, int]]:
        if self._listing is None:
            self._listing = remote.list_recordings(archive, self.options.selection)
        return self._listing

    @property
    def catalog(self) -> Catalog:
        if self._catalog is None:
            self._catalog = recs.open_catalog(self.archive_dir)
        return self._catalog

    def recordings(self) -> list[Recording]:
        if self.options.remote is not None:
            return self._remote_listing(self.options.remote)[0]
        return [r for r in recs.recordings(self.catalog) if self.options.selection(r)]

    def rec_positions(self) -> dict[int, int] | None:
        if self.options.remote is not None:
            return self._remote_listing(self.options.remote)[1]
        if self.options.driver_dir is None:
            return None
        if self._positions is None:
            self._positions = recs.RecordingPositions(self.options.driver_dir)
        return self._positions.snapshot()

    def read(self, partition: InputPartition) -> Iterator:
        if partition.value is None:  # Spark's stand-in when there is nothing to read
            return iter(())
        if self.options.remote is not None:
            return remote.read_part(
                self.options.remote, partition.value, self.decoder, self.options.fail_on_data_loss
            )
        return rd.read_part(
            self.archive_dir, partition.value, self.decoder, self.options.fail_on_data_loss
        )

    def close(self) -> None:
        if self._catalog is not None:
            self._catalog.close()
            self._catalog = None
        if self._positions is not None:
            self._positions.close()
            self._positions = None
        self._listing = None


class BatchReader(_Reading, DataSourceReader):
    """Reads what the options select. No filters are pushed down: PySpark 4.3 keeps the read
    planned by a pushdown on the DataFrame's relation and reuses it for the DataFrame's later
    queries that push none, so a pushed filter would outlive its query (docs/spark.md)."""

    def __init__(self, options: ReadOptions, decoder: Decoder):
        super().__init__(options, decoder)
        self.bounds = rd.Bounds(
            low=options.start_position or 0,
            high=options.end_position if options.end_position is not None else 2**63 - 1,
        )

    def partitions(self) -> list[AeronioPartition]:
        try:
            if self.options.remote is None:
                recs.check_named(self.catalog, self.options.selection.recording_ids)
            parts = rd.plan_batch(
                self.archive_dir,
                self.recordings(),
                self.bounds,
                self.rec_positions(),
                self.options.max_partition_bytes,
            )
        finally:
            self.close()
        return [AeronioPartition(p) for p in parts]


class StreamReader(_Reading, DataSourceStreamReader, SupportsTriggerAvailableNow):
    """Offsets are {recording id: position}: every message that starts before the position has
    been read. Each trigger re-reads the catalog (new matching recordings start from their
    first message) and moves each recording to its last message boundary that is recorded."""

    def __init__(self, options: ReadOptions, decoder: Decoder):
        super().__init__(options, decoder)
        self._target: dict[int, int] | None = None
        self._ends: dict[int, int] = {}  # readable ends found (frame boundaries), per recording

    # -- offsets -------------------------------------------------------------------------

    def _latest(self, r: Recording, positions: dict[int, int] | None) -> int:
        """The recording's last message boundary that is recorded (a stopped one's end)."""
        end = rd.readable_end(self.archive_dir, r, positions)
        if not r.active:
            return end
        return recs.last_boundary(self.archive_dir, r, r.known_boundary(end), end)

    def initialOffset(self) -> dict:
        start = self.options.starting_positions
        recs.check_named(self.catalog, self.options.selection.recording_ids, streaming=True)
        found = {r.recording_id: r for r in self.recordings()}
        positions = self.rec_positions()
        out = {}
        if isinstance(start, dict):
            for rid in start:
                if rid not in found:
                    raise SourceError(
                        f"option starting_positions: recording {rid} is not in the archive's "
                        "catalog, or the options leave it out"
                    )
        for rid, r in found.items():
            wanted = start.get(rid, EARLIEST) if isinstance(start, dict) else start
            if wanted in ("earliest", EARLIEST):
                out[rid] = r.start_position
            elif wanted in ("latest", LATEST):
                out[rid] = self._latest(r, positions)
            else:
                position = int(wanted)  # the options leave no other string
                end = rd.readable_end(self.archive_dir, r, positions)
                if not r.start_position <= position <= end:
                    raise SourceError(
                        f"option starting_positions: recording {rid} holds positions "
                        f"{r.start_position} to {end}, not {wanted}"
                    )
                out[rid] = position
        return rd.as_offset(out)

    def getDefaultReadLimit(self) -> ReadLimit:
        if self.options.max_bytes_per_trigger is None:
            return ReadAllAvailable()
        return ReadMaxBytes(self.options.max_bytes_per_trigger)

    def prepareForTriggerAvailableNow(self) -> None:
        positions = self.rec_positions()
        self._target = {r.recording_id: self._latest(r, positions) for r in self.recordings()}

    def _lost(self, message: str) -> None:
        if self.options.fail_on_data_loss:
            raise DataLossError(f"{message} (option fail_on_data_loss false skips it)")
        log.warning("%s; skipping it", message)

    def latestOffset(self, start: dict, limit: ReadLimit | None = None) -> dict:
        current = rd.from_offset(start)
        sound = {r.recording_id: r for r in recs.recordings(self.catalog)}
        found = {rid: r for rid, r in sound.items() if self.options.selection(r)}
        positions = self.rec_positions()
        target = self._target
        reading: dict[int, tuple[Recording, int, int]] = {}  # rid -> (r, from, readable end)
        out: dict[int, int] = {}
        for rid, position in current.items():
            r = found.get(rid)
            if r is None:
                if rid in sound:
                    out[rid] = position  # left out by the options now: no longer read
                    continue
                self._lost(
                    f"recording {rid} is no longer a sound recording of the archive's catalog "
                    "(deleted, invalidated, or its entry corrupt)"
                )
                continue
            if position < r.start_position:
                self._lost(
                    f"recording {rid} now starts at {r.start_position}, after the query's "
                    f"position {position}"
                )
                position = r.start_position
            if not r.active and r.stop_position < position:
                self._lost(
                    f"recording {rid} was truncated to {r.stop_position}, before the query's "
                    f"position {position}"
                )
                out[rid] = r.stop_position
                continue
            reading[rid] = (r, position, 0)
        for rid, r in found.items():
            if rid not in current and (target is None or rid in target):
                reading[rid] = (r, r.start_position, 0)  # a new recording: from its start
        backlog = {}
        for rid, (r, position, _) in list(reading.items()):
            known = self._ends.pop(rid, None)
            end = rd.readable_end(self.archive_dir, r, positions, position, known)
            if r.active:  # (a stopped one may be cut, then extended: found again from scratch)
                self._ends[rid] = end
            if end < position:  # recorded bytes went back: truncated, then extended again
                self._lost(
                    f"recording {rid} is recorded to {end}, before the query's position "
                    f"{position}: it was truncated and extended under the query (what was "
                    "recorded again below the query's position is skipped)"
                )
                position = recs.last_boundary(self.archive_dir, r, r.known_boundary(end), end)
            if target is not None:
                end = min(end, target.get(rid, position))
            reading[rid] = (r, position, max(end, position))
            backlog[rid] = max(0, end - position)
        budget = limit.max_bytes if isinstance(limit, ReadMaxBytes) else None
        allotted = rd.allot(backlog, budget)
        for rid, (r, position, end) in reading.items():
            out[rid] = rd.advance(self.archive_dir, r, position, end, allotted[rid])
        return rd.as_offset(out)

    def partitions(self, start: dict, end: dict) -> list[AeronioPartition]:
        begin, finish = rd.from_offset(start), rd.from_offset(end)
        found = {r.recording_id: r for r in self.recordings()}
        parts = []
        for rid, stop in finish.items():
            r = found.get(rid)
            if r is None:  # gone since the offset was taken (or a restart replans it)
                if stop > begin.get(rid, stop):
                    self._lost(
                        f"recording {rid} is no longer a sound recording of the archive's "
                        f"catalog: positions {begin[rid]} to {stop} are not read"
                    )
                continue
            low = begin.get(rid, r.start_position)
            parts += rd.split(r, low, stop, stop, self.options.max_partition_bytes, trusted=True)
        return [AeronioPartition(p) for p in parts]

    def commit(self, end: dict) -> None:
        pass

    def stop(self) -> None:
        self.close()


PYTHON_NAME = "aeronio_python"  # the JVM source's AeronioSource.PYTHON


class AeronioDataSource(DataSource):
    """`df.write...`, `df.writeStream...` and reads of a remote archive or of the msgpack
    layout, through the JVM source; every read as `format("aeronio_python")`:
    register with `aeronio.spark.register(spark)`."""

    @classmethod
    def name(cls) -> str:
        """The format name Spark knows it by (the JVM source's is "aeronio")."""
        return PYTHON_NAME

    def schema(self) -> StructType:
        """The schema without `.schema(...)`: the raw columns (`layout` raw only)."""
        options = read_options(self.options, None)
        if options.layout != "raw":
            raise SourceError(
                f'layout {options.layout} needs a schema: .schema("ts long, price double")'
            )
        return raw_schema()

    def _decoder(self, schema: StructType, options: ReadOptions) -> Decoder:
        return Decoder(schema, options.layout, options.metadata_columns)

    def reader(self, schema: StructType) -> BatchReader:
        """The batch reader: checks the options and the catalog (or the archive) here, on
        Spark's driver."""
        options = read_options(self.options, streaming=False)
        if options.remote is None:
            recs.open_catalog(options.archive).close()  # fails here, on the driver
        reader = BatchReader(options, self._decoder(schema, options))
        if options.remote is not None:
            reader.recordings()  # connects and lists here, on the driver
        return reader

    def streamReader(self, schema: StructType) -> StreamReader:
        """The streaming reader: offsets are {recording_id: position}."""
        options = read_options(self.options, streaming=True)
        recs.open_catalog(options.archive).close()
        return StreamReader(options, self._decoder(schema, options))

    def writer(self, schema: StructType, overwrite: bool) -> BatchWriter:
        """The batch sink: each row offered on the stream (append mode only)."""
        from aeronio.spark.sink import BatchWriter

        if overwrite:
            raise SourceError(
                "a stream has nothing to overwrite: use mode append (every row is published)"
            )
        return BatchWriter(write_options(self.options, streaming=False), schema)

    def streamWriter(self, schema: StructType, overwrite: bool) -> StreamWriter:
        """The streaming sink: each micro-batch's rows offered, positions at commit."""
        from aeronio.spark.sink import StreamWriter

        return StreamWriter(write_options(self.options, streaming=True), schema)
