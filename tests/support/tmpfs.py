"""A small tmpfs for a test that fills its disk (mounting needs root): never the machine's."""

from __future__ import annotations

import contextlib
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest


@contextlib.contextmanager
def mounted(point: Path, size: str) -> Iterator[Path]:
    """A tmpfs of `size` mounted on `point` (made if absent), unmounted at the end."""
    point.mkdir(parents=True, exist_ok=True)
    mount = subprocess.run(
        ["mount", "-t", "tmpfs", "-o", f"size={size}", "tmpfs", str(point)],
        capture_output=True,
        text=True,
    )
    if mount.returncode != 0:
        pytest.fail(
            f"this test needs to mount a tmpfs (as root): `{' '.join(mount.args)}` failed with "
            f"{mount.returncode}: {mount.stderr.strip()}",
            pytrace=False,
        )
    try:
        yield point
    finally:
        umount = subprocess.run(["umount", "-l", str(point)], capture_output=True, text=True)
        assert umount.returncode == 0, umount.stderr
