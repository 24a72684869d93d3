"""The concept pages' pictures stay true to their source: `docs/pictures/concepts/draw.py` draws
every picture the pages show, each checked-in SVG is stamped with the hash of the script that
drew it (and is exactly what it draws now, with the same matplotlib), keeps its text as text
with no date, and every image any document references exists."""

import hashlib
import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).parents[2]
DOCS = ROOT / "docs"
CONCEPTS = DOCS / "pictures" / "concepts"
SCRIPT = CONCEPTS / "draw.py"
DOCUMENTS = [ROOT / "README.md", *sorted(DOCS.rglob("*.md"))]
STAMP = re.compile(r"<!-- source sha256: ([0-9a-f]{64}); matplotlib (\S+) -->")


def images(document: Path) -> list[Path]:
    """The images a Markdown document shows (`![alt](path)` or `<img src="path">`), resolved."""
    text = document.read_text()
    targets = re.findall(r"!\[[^\]]*\]\(([^)\s]+)\)", text)
    targets += re.findall(r"<img[^>]*\bsrc=\"([^\"]+)\"", text)
    return [(document.parent / t).resolve() for t in targets if not re.match(r"[a-z]+://", t)]


def shown_concept_pictures() -> set[str]:
    return {p.name for d in DOCUMENTS for p in images(d) if p.parent == CONCEPTS.resolve()}


@pytest.fixture(scope="module")
def drawn(tmp_path_factory) -> Path:
    """The pictures as the script draws them now, in a directory of their own."""
    pytest.importorskip("matplotlib")
    out = tmp_path_factory.mktemp("concepts")
    subprocess.run(
        [sys.executable, str(SCRIPT), "--out", str(out)],
        check=True,
        capture_output=True,
        timeout=300,
    )
    return out


@pytest.mark.parametrize("document", DOCUMENTS, ids=lambda p: str(p.relative_to(ROOT)))
def test_every_image_a_document_shows_exists(document: Path):
    missing = [str(p) for p in images(document) if not p.is_file()]
    assert not missing, f"{document.relative_to(ROOT)} shows images that do not exist: {missing}"


def test_the_concept_pages_show_pictures_and_every_checked_in_one_is_shown():
    checked_in = {p.name for p in CONCEPTS.glob("*.svg")}
    shown = shown_concept_pictures()
    assert len(shown) >= 9, shown
    assert checked_in == shown, f"drawn but not shown: {checked_in - shown}"


def test_the_script_draws_every_picture_the_pages_show(drawn: Path):
    made = {p.name for p in drawn.glob("*.svg")}
    assert shown_concept_pictures() <= made
    assert made == {p.name for p in CONCEPTS.glob("*.svg")}


@pytest.mark.parametrize("name", sorted(p.name for p in CONCEPTS.glob("*.svg")))
def test_each_picture_is_drawn_from_the_script_as_it_is(name: str, drawn: Path):
    checked_in = (CONCEPTS / name).read_text()
    stamp = STAMP.search(checked_in)
    assert stamp, f"{name} has no source stamp: run `python {SCRIPT.relative_to(ROOT)}`"
    digest = hashlib.sha256(SCRIPT.read_bytes()).hexdigest()
    assert stamp[1] == digest, (
        f"{SCRIPT.name} changed since {name} was drawn: run `python {SCRIPT.relative_to(ROOT)}`"
    )
    now = (drawn / name).read_text()
    if STAMP.search(now)[2] != stamp[2]:
        pytest.skip(f"drawn with matplotlib {stamp[2]}, here {STAMP.search(now)[2]}: not compared")
    assert now == checked_in, (
        f"{name} differs from what {SCRIPT.name} draws now (a constant it reads from aeronio "
        f"changed?): run `python {SCRIPT.relative_to(ROOT)}`"
    )


@pytest.mark.parametrize("name", sorted(p.name for p in CONCEPTS.glob("*.svg")))
def test_each_picture_keeps_its_text_as_text_and_has_no_date(name: str):
    svg = (CONCEPTS / name).read_text()
    assert "<text" in svg  # svg.fonttype none: text, not glyph outlines
    assert 'id="DejaVuSans-' not in svg
    assert "<dc:date>" not in svg
    assert len(svg) < 64_000, f"{name} is {len(svg)} bytes"
