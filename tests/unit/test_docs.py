"""The documents stay true to the repository: every picture is rendered from its checked-in
source as it is now, and nothing in docs/ or README.md points outside the repository."""

import hashlib
import re
from pathlib import Path

import pytest

ROOT = Path(__file__).parents[2]
PICTURES = sorted((ROOT / "docs" / "pictures").glob("*.dot"))
DOCUMENTS = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]


def test_there_are_pictures():
    assert {p.stem for p in PICTURES} >= {"layers", "data_path"}


@pytest.mark.parametrize("source", PICTURES, ids=lambda p: p.name)
def test_every_picture_is_rendered_from_its_source_as_it_is(source: Path):
    digest = hashlib.sha256(source.read_bytes()).hexdigest()
    svg = source.with_suffix(".svg").read_text()
    assert f"<!-- source sha256: {digest} -->" in svg, (
        f"{source.name} changed since it was rendered: run `python docs/pictures/render.py`"
    )


@pytest.mark.parametrize("document", DOCUMENTS, ids=lambda p: p.name)
def test_documents_point_nowhere_outside_the_repository(document: Path):
    text = document.read_text()
    outside = re.findall(r"(?:\.\./shared/(?!aeron-java)\S*|/work/\S*)", text)
    assert not outside, f"{document.name} points outside the repository: {outside}"
    for target in re.findall(r"\]\(([^)#]+)\)", text):
        if not re.match(r"[a-z]+://", target):
            assert (document.parent / target).exists(), f"{document.name}: broken link {target}"
