"""What a process holds, from /proc: its fds, RSS and the mappings of a driver directory's logs
(those of deleted logs apart), and the counters a driver has allocated."""

from __future__ import annotations

import os

from aeronio.counters import CountersReader


def held(pid: int, dir: str) -> dict[str, int]:
    """fds, RSS (KiB; anonymous and shared memory apart), the logs of `dir` mapped and those of
    them deleted, of process `pid`."""
    maps = set()
    deleted = set()
    with open(f"/proc/{pid}/maps") as f:
        for line in f:
            if dir in line and ".logbuffer" in line:
                path = line.split(maxsplit=5)[5].strip()
                maps.add(path)
                if path.endswith("(deleted)"):
                    deleted.add(path)
    with open(f"/proc/{pid}/status") as f:
        status = dict(line.split(":", 1) for line in f)
    kib = {name: int(status[name].split()[0]) for name in ("VmRSS", "RssAnon", "RssShmem")}
    return {
        "fds": len(os.listdir(f"/proc/{pid}/fd")),
        "rss_kib": kib["VmRSS"],
        "rss_anon_kib": kib["RssAnon"],
        "rss_shmem_kib": kib["RssShmem"],
        "logs_mapped": len(maps),
        "deleted_logs_mapped": len(deleted),
    }


def allocated_counters(dir: str) -> int:
    """How many counters the driver on `dir` has allocated (system counters included)."""
    with CountersReader.open(dir) as reader:
        return sum(1 for _ in reader.for_each())
