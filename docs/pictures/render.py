"""Renders every docs/pictures/*.dot to the .svg beside it with Graphviz `dot`, stamping the SVG
with the sha256 of its source (tests/unit/test_docs.py checks the stamps, so a picture cannot
drift from its source). Run: `python docs/pictures/render.py`."""

import hashlib
import pathlib
import subprocess

HERE = pathlib.Path(__file__).parent


def stamp(source: bytes) -> str:
    return f"<!-- source sha256: {hashlib.sha256(source).hexdigest()} -->"


def main() -> None:
    for dot in sorted(HERE.glob("*.dot")):
        source = dot.read_bytes()
        svg = subprocess.run(["dot", "-Tsvg"], input=source, capture_output=True, check=True)
        declaration, rest = svg.stdout.decode().split("\n", 1)  # the XML declaration comes first
        dot.with_suffix(".svg").write_text(f"{declaration}\n{stamp(source)}\n{rest}")


if __name__ == "__main__":
    main()
