"""The package itself: the version it reports, the public names it imports on first use (so one
submodule does not load the driver), and the errors all being AeronErrors."""

from __future__ import annotations

import ast
import importlib
import re
import subprocess
import sys
from pathlib import Path

import pytest

import aeronio
from aeronio.archive.segments import SegmentError
from aeronio.errors import AeronError
from tests.support.python_source import parse

LAZY_PACKAGES = ("aeronio", "aeronio.archive")
SOURCE = Path(aeronio.__file__).parent


def run_python(code: str) -> str:
    """What `code` prints, run in a fresh interpreter (nothing of aeronio imported yet)."""
    result = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=60, check=False
    )
    assert result.returncode == 0, result.stderr
    return result.stdout


@pytest.mark.parametrize(
    ("version", "reported"),
    [("return '9.8.7'", "9.8.7"), ("raise m.PackageNotFoundError(name)", "0+unknown")],
)
def test_the_version_is_the_installed_distributions(version, reported):
    code = (
        "import importlib.metadata as m\n"
        f"def version(name):\n    assert name == 'aeronio'\n    {version}\n"
        "m.version = version\nimport aeronio\nprint(aeronio.__version__)\n"
    )
    assert run_python(code) == f"{reported}\n"


# -- lazy imports --------------------------------------------------------------------------------


def loaded_after(statement: str) -> list[str]:
    ours = "sorted(n for n in sys.modules if n.split('.')[0] == 'aeronio')"
    code = f"import sys\n{statement}\nprint(*{ours})"
    return run_python(code).split()


def test_importing_the_package_loads_only_the_core_and_the_errors():
    assert loaded_after("import aeronio") == [
        "aeronio", "aeronio._core", "aeronio._lazy", "aeronio.errors"
    ]  # fmt: skip


@pytest.mark.parametrize(
    "module",
    [
        "aeronio.protocol.channel",
        "aeronio.protocol.frames",
        "aeronio.protocol.control",
        "aeronio.protocol.limits",
        "aeronio.logbuffer.descriptor",
        "aeronio.cnc",
        "aeronio.archive.segments",
        "aeronio.archive.codecs",
    ],
)
def test_a_submodule_loads_neither_the_driver_nor_the_client(module):
    loaded = loaded_after(f"import {module}")
    assert module in loaded
    assert [n for n in loaded if n.startswith(("aeronio.driver", "aeronio.client"))] == []
    assert "aeronio.archive.client" not in loaded


def test_a_public_name_loads_its_module_on_first_use():
    loaded = loaded_after("from aeronio import ConfigurationError, MediaDriver")
    assert "aeronio.driver.media_driver" in loaded
    assert "aeronio.client.aeron" not in loaded


def declared(
    package: str,
) -> tuple[set[tuple[str, str]], set[tuple[str, str]], list[str], set[str]]:
    """The package's TYPE_CHECKING imports and lazy table as (module, name), its __all__ and the
    public names it assigns itself."""
    tree = parse(Path(importlib.import_module(package).__file__))
    imports: set[tuple[str, str]] = set()
    table: set[tuple[str, str]] = set()
    names: list[str] = []
    own: set[str] = set()
    for node in tree.body:
        if isinstance(node, ast.If) and ast.unparse(node.test) == "TYPE_CHECKING":
            imports |= {
                (i.module, a.name) for i in node.body if isinstance(i, ast.ImportFrom)
                for a in i.names
            }  # fmt: skip
        if isinstance(node, ast.If) and ast.unparse(node.test) == "not TYPE_CHECKING":
            (assign,) = node.body
            call = assign.value
            assert ast.unparse(call.func) == "_lazy.exports"
            table |= {(m, n) for m, ns in ast.literal_eval(call.args[1]).items() for n in ns}
        if isinstance(node, ast.Assign) and ast.unparse(node.targets[0]) == "__all__":
            names = ast.literal_eval(node.value)
        elif isinstance(node, ast.Assign) and not ast.unparse(node.targets[0]).startswith("_"):
            own.add(ast.unparse(node.targets[0]))
        elif isinstance(node, ast.AnnAssign) and not ast.unparse(node.target).startswith("_"):
            own.add(ast.unparse(node.target))
    return imports, table, names, own


@pytest.mark.parametrize("package", LAZY_PACKAGES)
def test_the_typed_imports_the_lazy_table_and_all_agree(package):
    imports, table, names, own = declared(package)
    assert imports == table
    assert sorted(names) == sorted({name for _, name in table} | own)
    assert len(names) == len(set(names))


@pytest.mark.parametrize("package", LAZY_PACKAGES)
def test_every_public_name_resolves_to_its_modules_object(package):
    module = importlib.import_module(package)
    imports, _, names, _ = declared(package)
    for where, name in sorted(imports):
        assert getattr(module, name) is getattr(importlib.import_module(where), name), name
    assert set(names) <= set(dir(module))
    with pytest.raises(AttributeError, match=f"module '{package}' has no attribute 'Nope'"):
        module.Nope  # noqa: B018


def test_star_import_gives_all():
    code = "from aeronio import *\nprint(Aeron.__name__, MediaDriver.__name__, ADMIN_ACTION)"
    assert run_python(code) == f"Aeron MediaDriver {aeronio.ADMIN_ACTION}\n"


# -- errors --------------------------------------------------------------------------------------


def test_a_segment_error_is_an_aeron_error():
    assert issubclass(SegmentError, AeronError)
    assert issubclass(SegmentError, ValueError)  # as before, for who catches ValueError


def test_no_private_asyncio_name_is_used():
    """Only asyncio's public API (`asyncio.get_running_loop`, not `events._get_running_loop`)."""
    found = [
        f"{path.relative_to(SOURCE)}:{number}"
        for path in sorted(SOURCE.rglob("*.py"))
        for number, line in enumerate(path.read_text().splitlines(), 1)
        if re.search(r"asyncio\.events\.|asyncio\._|\b_get_running_loop\b", line)
    ]
    assert found == []
