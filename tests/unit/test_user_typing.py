"""A user's program written as the docs show the API type-checks under `mypy --strict`: the
archive's LOCAL options into `connect`, closing the async generators `recording_events` and
`replay_merge` (as the docs say to stop them), a driver directory given as a Path."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).parents[2]

PROGRAM = """
import contextlib
from pathlib import Path

import aeronio
from aeronio import archive
from aeronio.driver.media_driver import MediaDriver


async def main(home: Path) -> None:
    async with MediaDriver.launch(home / "driver"):
        async with aeronio.connect(home / "driver") as aeron:
            async with archive.Archive.launch(
                aeron, archive_dir=home / "archive", **archive.LOCAL_ARCHIVE
            ):
                async with archive.connect(aeron, **archive.LOCAL) as client:
                    events = client.recording_events()
                    async with contextlib.aclosing(events):
                        async for event in events:
                            print(event)
                            break
                    merge = client.replay_merge(
                        0, 1001, "aeron:udp?endpoint=localhost:0", "aeron:udp?endpoint=localhost:0"
                    )
                    async with contextlib.aclosing(merge):
                        async for message in merge:
                            print(message.data)
"""


@pytest.mark.slow  # about 12 s: mypy reads the package
def test_a_program_as_the_docs_write_it_type_checks_strictly(tmp_path: Path):
    program = tmp_path / "user_program.py"
    program.write_text(PROGRAM)
    result = subprocess.run(
        [sys.executable, "-m", "mypy", "--strict", "--follow-imports=silent",
         "--cache-dir", str(tmp_path / "cache"), str(program)],
        capture_output=True, text=True, timeout=600, cwd=tmp_path,
        env=os.environ | {"MYPYPATH": str(ROOT)},  # the package as a checkout has it
    )  # fmt: skip
    assert result.returncode == 0, result.stdout + result.stderr
