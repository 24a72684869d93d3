"""A process that maps a file (cnc.dat) and holds it until told to go: an Aeron client's view
of the driver's directory, without Aeron. Run as `python cnc_mapper.py PATH MODE [aeronio]`: MODE
`rw` or `ro`; `aeronio` loads aeronio's core first. It says "mapped" once mapped, and leaves
when its stdin closes."""

from __future__ import annotations

import contextlib
import mmap
import os
import subprocess
import sys
from collections.abc import Iterator


@contextlib.contextmanager
def mapping(path: str, mode: str = "rw", aeronio: bool = False) -> Iterator[subprocess.Popen]:
    """A running mapper process of `path` (closed, and waited for, on exit)."""
    flags = ["aeronio"] if aeronio else []
    argv = [sys.executable, os.path.abspath(__file__), path, mode, *flags]
    process = subprocess.Popen(argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE)
    try:
        line = process.stdout.readline()
        assert line == b"mapped\n", f"the mapper of {path} said {line!r}"
        yield process
    finally:
        process.stdin.close()
        process.wait(timeout=30)
        process.stdout.close()


def main(path: str, mode: str, *flags: str) -> None:
    if "aeronio" in flags:
        import aeronio._core  # noqa: F401
    fd = os.open(path, os.O_RDWR if mode == "rw" else os.O_RDONLY)
    try:
        mapped = mmap.mmap(fd, 0, access=mmap.ACCESS_WRITE if mode == "rw" else mmap.ACCESS_READ)
    finally:
        os.close(fd)
    print("mapped", flush=True)
    sys.stdin.read()
    mapped.close()


if __name__ == "__main__":
    main(*sys.argv[1:])
