"""The documents stay true to the repository: every picture is rendered from its checked-in
source as it is now, nothing in docs/ or README.md points outside the repository, the site
builds without a warning and the API it documents has its docstrings; architecture.md's layout
names every source file and module, and cli.py's docstring every subcommand."""

import hashlib
import importlib
import inspect
import re
import subprocess
import sys
from pathlib import Path

import pytest

from aeronio import cli

ROOT = Path(__file__).parents[2]
PICTURES = sorted((ROOT / "docs" / "pictures").glob("*.dot"))
DOCUMENTS = [ROOT / "README.md", *sorted((ROOT / "docs").rglob("*.md"))]


def test_there_are_pictures():
    assert {p.stem for p in PICTURES} >= {"layers", "data_path"}


@pytest.mark.parametrize("source", PICTURES, ids=lambda p: p.name)
def test_every_picture_is_rendered_from_its_source_as_it_is(source: Path):
    digest = hashlib.sha256(source.read_bytes()).hexdigest()
    svg = source.with_suffix(".svg").read_text()
    assert f"<!-- source sha256: {digest} -->" in svg, (
        f"{source.name} changed since it was rendered: run `python docs/pictures/render.py`"
    )


@pytest.mark.parametrize("document", DOCUMENTS, ids=lambda p: str(p.relative_to(ROOT)))
def test_documents_point_nowhere_outside_the_repository(document: Path):
    text = document.read_text()
    outside = re.findall(r"(?:\.\./shared/(?!aeron-java)\S*|/work/\S*)", text)
    assert not outside, f"{document.name} points outside the repository: {outside}"
    for target in re.findall(r"\]\(([^)#]+)\)", text):
        if not re.match(r"[a-z]+://", target):
            assert (document.parent / target).exists(), f"{document.name}: broken link {target}"


# -- the README's example -----------------------------------------------------------------------


def readme_example() -> str:
    return re.search(r"```python\n(.*?)```", (ROOT / "README.md").read_text(), re.S).group(1)


def run_example(code: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=120, cwd=ROOT
    )


def test_the_readmes_first_example_runs():
    result = run_example(readme_example())
    assert result.returncode == 0, result.stderr
    assert [line.split()[0] for line in result.stdout.splitlines()] == [
        "b'hello'", "b'world'", "b'claimed!'"
    ]  # fmt: skip


@pytest.mark.slow
def test_the_readmes_first_example_without_a_subscriber_says_so_in_seconds():
    """Its waits are bounded: with no subscriber it fails with a TimeoutError, not a hang."""
    code = readme_example()
    line = 'subscription = await aeron.add_subscription("aeron:ipc", stream_id=10)'
    assert line in code
    code = code.replace(line, "subscription = None")
    result = run_example(code)
    assert result.returncode == 1
    assert re.search(r"TimeoutError: publication \d+ on aeron:ipc\S* not connected within 5 s",
                     result.stderr), result.stderr  # fmt: skip
    code = code.replace("await publication.wait_connected(timeout=5)", "")
    result = run_example(code)
    assert result.returncode == 1
    assert "TimeoutError: offer timed out (not connected)" in result.stderr, result.stderr


# -- the documentation site (MkDocs, mkdocs.yml) -------------------------------------------------

API_MODULES = ("aeronio", "aeronio.archive", "aeronio.spark")


def test_the_site_builds_with_no_warning(tmp_path):
    """`mkdocs build --strict`: a broken link, a missing page or an object the API reference
    cannot render fails the build; the reference has the public API."""
    site = tmp_path / "site"
    result = subprocess.run(
        [sys.executable, "-m", "mkdocs", "build", "--strict", "-f", str(ROOT / "mkdocs.yml")]
        + ["-d", str(site)],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert result.returncode == 0, result.stderr
    assert "WARNING" not in result.stderr, result.stderr
    api = (site / "api" / "index.html").read_text()
    for name in ("aeronio.connect", "aeronio.Publication.offer", "aeronio.Subscription",
                 "aeronio.archive.ArchiveClient.replay", "aeronio.spark.register"):  # fmt: skip
        assert f'id="{name}"' in api, name
    assert (site / "index.html").read_text().count("Getting started") >= 1


def test_every_class_and_function_of_the_api_reference_has_a_docstring():
    missing = []
    for module_name in API_MODULES:
        module = importlib.import_module(module_name)
        for name in module.__all__:
            obj = getattr(module, name)
            if not (inspect.isclass(obj) or inspect.isroutine(obj)):
                continue  # constants: documented where they are listed
            inherited = inspect.isclass(obj) and obj.__doc__ == obj.__mro__[1].__doc__
            if not (obj.__doc__ or "").strip() or inherited:
                missing.append(f"{module_name}.{name}")
            ours = [c for c in getattr(obj, "__mro__", ()) if c.__module__.startswith("aeronio")]
            for attr, value in [item for c in ours for item in vars(c).items()]:
                value = value.__func__ if isinstance(value, (staticmethod, classmethod)) else value
                if not attr.startswith("_") and inspect.isroutine(value):
                    if not (value.__doc__ or "").strip():
                        missing.append(f"{module_name}.{name}.{attr}")
    assert not missing, f"no docstring: {missing}"


# -- the layout and the command line ------------------------------------------------------------

BUILT = {".so", ".c", ".pyc", ".jar"}  # build outputs, not sources


def layout() -> dict[str, list[list]]:
    """architecture.md's Layout block: for each top directory (`aeronio/`) the entries under it,
    each as [the names it starts with, the rest of its text with its continuation lines]; the
    top directory's own entry first."""
    text = (ROOT / "docs" / "architecture.md").read_text()
    section = text.split("\n## Layout\n", 1)[1].split("\n## ", 1)[0]
    blocks: dict[str, list[list]] = {}
    top, entry = "", []
    for line in section.splitlines():
        indent = len(line) - len(line.lstrip())
        if indent < 4 or not line.strip():
            continue
        if indent > 6:
            entry[1] += " " + line.strip()
            continue
        names, rest = re.match(r"((?:[\w.]+/?)(?:, [\w.]+/?)*)(.*)", line.strip()).groups()
        entry = [names.split(", "), rest.strip()]
        if indent == 4:
            top = names
            blocks[top] = []
        blocks[top].append(entry)
    return blocks


def sources(directory: Path) -> set[str]:
    """The files and packages (as `name/`) directly in `directory`."""
    return {
        f"{path.name}/" if path.is_dir() else path.name
        for path in directory.iterdir()
        if path.name != "__pycache__" and path.suffix not in BUILT
    }


def test_the_layout_names_every_file_of_the_core_and_the_package():
    blocks = layout()
    for top in ("cython_core/", "aeronio/"):
        named = [name for names, _ in blocks[top][1:] for name in names]
        assert len(named) == len(set(named)), f"{top} names a file twice"
        assert sorted(named) == sorted(sources(ROOT / top)), top


def test_the_layout_lists_every_module_of_each_package():
    for names, text in layout()["aeronio/"][1:]:
        if names[0].endswith("/"):
            package = ROOT / "aeronio" / names[0]
            modules = {name.removesuffix(".py") for name in sources(package) - {"__init__.py"}}
            assert sorted(text.split(", ")) == sorted(modules), names[0]


def test_the_layout_names_every_directory_of_the_tests_and_examples():
    for top in ("tests/", "examples/"):
        ((_, text),) = layout()[top]
        named = set(re.findall(r"\b([\w]+)/", text))
        assert named == {name.rstrip("/") for name in sources(ROOT / top) if name.endswith("/")}


def test_the_command_lines_docstring_names_every_subcommand():
    _, commands = cli.build_parser()
    assert set(re.findall(r"`(\w+)", cli.__doc__)) - {"aeronio"} == set(commands)
