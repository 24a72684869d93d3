"""Every block of Python on the getting-started page (docs/index.md) runs as it is, each in a
fresh interpreter, and prints what the page says it does."""

import re
import subprocess
import sys
from pathlib import Path

import pytest

PAGE = Path(__file__).parents[2] / "docs" / "index.md"
BLOCKS = re.findall(r"```python\n(.*?)```", PAGE.read_text(), re.S)
EXPECTED = [  # what each block prints, in order
    r"^\[b'message 0', b'message 1', b'message 2'\] up to position 192$",
    r"^b'over the wire' from session -?\d+$",
    r"^b'through the standalone driver'$",
]


def test_the_page_has_its_blocks():
    assert len(BLOCKS) == len(EXPECTED)


@pytest.mark.parametrize("index", range(len(EXPECTED)))
def test_a_block_runs_as_it_is(index, tmp_path):
    result = subprocess.run(
        [sys.executable, "-c", BLOCKS[index]],
        capture_output=True,
        text=True,
        timeout=120,
        cwd=tmp_path,
    )
    assert result.returncode == 0, result.stderr
    assert re.search(EXPECTED[index], result.stdout, re.M), result.stdout
