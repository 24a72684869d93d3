"""A user's program written as the docs show the API type-checks under `mypy --strict`: the
archive's LOCAL options into `connect`, closing the async generators `recording_events` and
`replay_merge` (as the docs say to stop them), a driver directory given as a Path; and the
classes the stub makes generic can be subscripted at run time."""

from __future__ import annotations

import ast
import os
import subprocess
import sys
import typing
from pathlib import Path

import pytest

from aeronio import _core
from tests.support.python_source import parse

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


MISTAKES = """
import aeronio


async def main(publication: aeronio.ExclusivePublication) -> None:
    await publication.offer_batch(42)
    publication.try_offer_block("text")
    await publication.offer_block(3.5)
"""


@pytest.mark.slow  # about 12 s: mypy reads the package
def test_a_program_as_the_docs_write_it_type_checks_strictly_and_mistakes_do_not(tmp_path: Path):
    """The mistakes (each a TypeError at run time) were accepted: the publication's buffer
    type was a union with Any."""
    (tmp_path / "user_program.py").write_text(PROGRAM)
    (tmp_path / "mistakes.py").write_text(MISTAKES)
    result = subprocess.run(
        [sys.executable, "-m", "mypy", "--strict", "--follow-imports=silent",
         "--cache-dir", str(tmp_path / "cache"), "user_program.py", "mistakes.py"],
        capture_output=True, text=True, timeout=600, cwd=tmp_path,
        env=os.environ | {"MYPYPATH": str(ROOT)},  # the package as a checkout has it
    )  # fmt: skip
    errors = [line for line in result.stdout.splitlines() if ": error: " in line]
    assert [e.split(": error: ")[0] for e in errors] == [
        "mistakes.py:6", "mistakes.py:7", "mistakes.py:8"
    ], result.stdout + result.stderr  # fmt: skip
    assert all(e.endswith("[arg-type]") for e in errors), errors


def test_the_stubs_generic_classes_are_subscriptable_at_run_time():
    """`Message[bytes]` in an annotation Python evaluates (no `from __future__ import
    annotations`, pydantic, typing.get_type_hints): the stub makes them generic, the module
    gives them __class_getitem__. Before: TypeError, not subscriptable."""
    stub = parse(ROOT / "aeronio" / "_core.pyi")
    generic = [
        node.name
        for node in stub.body
        if isinstance(node, ast.ClassDef) and any(isinstance(b, ast.Subscript) for b in node.bases)
    ]
    assert generic == ["Message", "FragmentAssembler", "Completed"]
    for name in generic:
        cls = getattr(_core, name)
        alias = cls[int]
        assert (typing.get_origin(alias), typing.get_args(alias)) == (cls, (int,))
