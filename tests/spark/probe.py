"""The aeronio source with a probe, for tests/spark/test_remote.py: each partition read notes the
process that reads it (pid, and the pid of the JVM it works for) in a file of `ProbeSource.dir`.
The test pickles this module by value (executors need not import tests/)."""

from __future__ import annotations

import os
import uuid
from pathlib import Path

from aeronio.spark.source import AeronioDataSource, BatchReader


def stat(pid: int) -> tuple[str, int]:
    """(command name, parent pid) of a process, from /proc."""
    text = Path(f"/proc/{pid}/stat").read_text()
    end = text.rindex(")")
    return text[text.index("(") + 1 : end], int(text[end + 2 :].split()[1])


def jvm_of(pid: int) -> int:
    """The nearest java process among `pid`'s ancestors (0 when there is none)."""
    while pid > 1:
        pid = stat(pid)[1]
        if stat(pid)[0] == "java":
            return pid
    return 0


class ProbeReader(BatchReader):
    probe_dir = ""

    def read(self, partition):
        p = partition.value
        if p is not None:
            note = (
                f"{os.getpid()} {jvm_of(os.getpid())} {p.recording.recording_id} {p.emit_from} "
                f"{p.emit_to}"
            )
            (Path(self.probe_dir) / uuid.uuid4().hex).write_text(note)
        return super().read(partition)


class ProbeSource(AeronioDataSource):
    probe_dir = ""

    @classmethod
    def name(cls) -> str:
        return "aeronio_probe"

    def reader(self, schema):
        reader = super().reader(schema)
        reader.__class__ = ProbeReader
        reader.probe_dir = self.probe_dir
        return reader


def notes(probe_dir: Path) -> list[tuple[int, int, int, int, int]]:
    """(pid, its JVM's pid, recording id, emit from, emit to) of each partition read."""
    return [tuple(int(x) for x in path.read_text().split()) for path in sorted(probe_dir.iterdir())]
