"""The layers of the package, enforced on every import (docs/architecture.md, "Layers").

Rules, by the layer a module is in (a subpackage, or one of the base modules `errors`, `idle`,
`cnc`, `_lazy`; every other top-level module, `__init__.py`, `_connect.py`, `cli.py`, `_run.py`,
`samples.py`, is the top level):
- `aeronio.client` imports only `protocol`, `logbuffer`, `counters`, `cnc`, `concurrent`, `idle`,
  `errors` and `_core`: a client reaches its driver only through the control protocol and cnc.dat
  (and the registry of embedded drivers in `protocol.embedded`);
- `aeronio.driver` imports no `client`;
- `aeronio.protocol` imports no `driver`, `client`, `logbuffer` or `counters` (it is what
  everyone builds on: only `_core` and `errors` are below it);
- `aeronio.logbuffer` and `aeronio.counters` import no `driver` or `client`;
- `aeronio.concurrent` (shared-memory structures) imports only `_core` and `errors`; `aeronio.cnc`
  (cnc.dat) only those and `concurrent`; `aeronio.idle` only those; `aeronio.errors` and
  `aeronio._lazy` (lazy exports) nothing;
- `aeronio.archive` is a client of a driver, never part of one: it imports no `driver` (nor
  the top-level `aeronio`, which launches drivers), and nothing below it imports `archive`;
- `aeronio.spark` is on top: it imports no `driver` (it launches drivers with the top level's
  `aeronio.connect`), and of the archive only what the archive package exports (its modules
  re-exported by `aeronio/archive/__init__.py`: the catalog and segment formats, the client,
  the codecs, the context), not the archive's service internals; nothing else imports it;
- the top level knows both sides, and imports no `spark`.
Every import counts: at module level, inside functions and under `TYPE_CHECKING`.
"""

from __future__ import annotations

import ast
from pathlib import Path

from tests.support.python_source import parse

PACKAGE = Path(__file__).parents[2] / "aeronio"

# The layers: aeronio's subpackages, its base modules and the compiled core; any other name
# under aeronio is the top level ("").
LAYERS = {
    "client",
    "driver",
    "protocol",
    "logbuffer",
    "counters",
    "concurrent",
    "archive",
    "spark",
    "cnc",
    "errors",
    "idle",
    "_core",
    "_lazy",
}
MAY_IMPORT = {  # the layers a layer may import, where that is the shorter rule
    "client": {
        "protocol",
        "logbuffer",
        "counters",
        "cnc",
        "concurrent",
        "idle",
        "errors",
        "_core",
    },
    "concurrent": {"_core", "errors"},
    "cnc": {"_core", "errors", "concurrent"},
    "idle": {"_core", "errors"},
    "errors": set(),
    "_lazy": set(),
}
FORBIDDEN = {
    "driver": {"client", "archive", "spark"},
    "protocol": {"driver", "client", "logbuffer", "counters", "archive", "spark"},
    "logbuffer": {"driver", "client", "archive", "spark"},
    "counters": {"driver", "client", "archive", "spark"},
    "archive": {"driver", "", "spark"},  # "": the top-level package
    "spark": {"driver"},
    "": {"spark"},
}
# Edges that break a rule and are being removed (each with whoever removes it).
KNOWN: set[tuple[str, str]] = set()


def imported_modules(tree: ast.Module, module: str, is_package: bool) -> list[tuple[int, str]]:
    """(line, absolute module name) of every import in `tree`, relative ones resolved."""
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found += [(node.lineno, alias.name) for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                parts = module.split(".")
                anchor = parts[: len(parts) - node.level + (1 if is_package else 0)]
                base = ".".join(anchor + ([base] if base else []))
            # `from aeronio import driver` imports the package aeronio.driver
            found += [(node.lineno, f"{base}.{alias.name}") for alias in node.names]
    return found


def layer_of(name: str) -> str | None:
    """The layer of an `aeronio...` name: its first component under aeronio if that is a layer,
    else "" (the top level: its modules and the names the package exports)."""
    parts = name.split(".")
    if parts[0] != "aeronio":
        return None
    return parts[1] if len(parts) > 1 and parts[1] in LAYERS else ""


def exported_modules(package: Path) -> set[str]:
    """The modules of a subpackage (at `package`) that its __init__.py imports from: its
    public ones."""
    init = package / "__init__.py"
    if not init.exists():
        return set()
    name = f"aeronio.{package.name}"
    modules = {name}
    for _, imported in imported_modules(parse(init), name, is_package=True):
        modules.add(".".join(imported.split(".")[:3]))
    return modules


def is_internal(name: str, package: Path) -> bool:
    """Whether `name` (aeronio.archive...) is in a module of `package` that it does not export."""
    parts = name.split(".")
    if len(parts) < 3 or not (package / f"{parts[2]}.py").exists():
        return False  # the package itself, or a name it exports
    return ".".join(parts[:3]) not in exported_modules(package)


def violations(package: Path) -> list[str]:
    """Every forbidden edge in the package at `package` (a directory named aeronio)."""
    found = []
    for path in sorted(package.rglob("*.py")):
        relative = path.relative_to(package.parent).with_suffix("")
        is_package = relative.name == "__init__"
        module = ".".join(relative.parts[:-1] if is_package else relative.parts)
        layer = layer_of(module)
        assert layer is not None
        tree = parse(path)
        for line, name in sorted(imported_modules(tree, module, is_package)):
            target = layer_of(name)
            if target is None or target == layer:
                continue
            allowed = target in MAY_IMPORT.get(layer, LAYERS | {""})
            if layer == "spark" and target == "archive":
                allowed = not is_internal(name, package / "archive")
            if not allowed or target in FORBIDDEN.get(layer, set()):
                where = f"{path.relative_to(package.parent)}:{line}"
                found.append(f"{where}: {layer or 'top level'} -> {name}")
    return found


def test_no_module_imports_across_a_forbidden_edge():
    found = violations(PACKAGE)

    def known(violation: str, file: str, name: str) -> bool:
        return violation.startswith(f"{file}:") and violation.endswith(f" -> {name}")

    assert [v for v in found if not any(known(v, f, n) for f, n in KNOWN)] == []
    stale = [(f, n) for f, n in KNOWN if not any(known(v, f, n) for v in found)]
    assert not stale, f"known edges no longer there (remove them from KNOWN): {stale}"


def test_every_subpackage_is_a_layer():
    """A new subpackage gets its rules here before it gets modules."""
    subpackages = {p.name for p in PACKAGE.iterdir() if (p / "__init__.py").exists()}
    assert subpackages <= LAYERS


def test_the_checker_finds_forbidden_edges(tmp_path):
    package = tmp_path / "aeronio"
    for layer in ("client", "driver", "protocol", "logbuffer", "counters", "archive", "spark"):
        (package / layer).mkdir(parents=True)
        (package / layer / "__init__.py").write_text("")
    (package / "__init__.py").write_text(
        "from aeronio.driver import conductor\nfrom aeronio._run import run\n"  # allowed
        "def spark():\n    from aeronio.spark import source\n"
    )
    (package / "archive" / "__init__.py").write_text(
        "from aeronio.archive.catalog import Catalog\n"
    )
    (package / "archive" / "catalog.py").write_text("")
    (package / "archive" / "conductor.py").write_text("")
    (package / "spark" / "recordings.py").write_text(
        "import aeronio\nfrom aeronio.archive import Catalog, catalog\n"  # allowed
        "from aeronio.archive.catalog import Catalog\nfrom aeronio.client import aeron\n"
        "from aeronio.archive.conductor import X\n"
        "from aeronio.archive import conductor\nfrom aeronio.driver import media_driver\n"
    )
    (package / "errors.py").write_text("from aeronio.protocol import limits\n")
    (package / "idle.py").write_text("from aeronio import _core, errors\nimport aeronio.cnc\n")
    (package / "samples.py").write_text("import aeronio\nfrom aeronio.spark import sink\n")
    (package / "client" / "aeron.py").write_text(
        "import aeronio.protocol.control\n"
        "from aeronio.driver.conductor import COUNTERS_FILE\n"
        "def late():\n    from ..driver import media_driver\n"
        "from aeronio import cli\n"
    )
    (package / "protocol" / "channel.py").write_text(
        "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from aeronio.client import x\n"
    )
    (package / "driver" / "conductor.py").write_text("from aeronio.client.aeron import Aeron\n")
    (package / "logbuffer" / "log_buffers.py").write_text("from . import descriptor\n")
    (package / "counters" / "__init__.py").write_text("from aeronio import driver\n")
    (package / "archive" / "tool.py").write_text(
        "import aeronio\nfrom aeronio.client.aeron import Aeron\n"
        "from aeronio.driver import media_driver\n"
    )
    (package / "driver" / "agent.py").write_text("from aeronio.archive import catalog\n")
    assert violations(package) == [
        "aeronio/__init__.py:4: top level -> aeronio.spark.source",
        "aeronio/archive/tool.py:1: archive -> aeronio",
        "aeronio/archive/tool.py:3: archive -> aeronio.driver.media_driver",
        "aeronio/client/aeron.py:2: client -> aeronio.driver.conductor.COUNTERS_FILE",
        "aeronio/client/aeron.py:4: client -> aeronio.driver.media_driver",
        "aeronio/client/aeron.py:5: client -> aeronio.cli",
        "aeronio/counters/__init__.py:1: counters -> aeronio.driver",
        "aeronio/driver/agent.py:1: driver -> aeronio.archive.catalog",
        "aeronio/driver/conductor.py:1: driver -> aeronio.client.aeron.Aeron",
        "aeronio/errors.py:1: errors -> aeronio.protocol.limits",
        "aeronio/idle.py:2: idle -> aeronio.cnc",
        "aeronio/protocol/channel.py:3: protocol -> aeronio.client.x",
        "aeronio/samples.py:2: top level -> aeronio.spark.sink",
        "aeronio/spark/recordings.py:5: spark -> aeronio.archive.conductor.X",
        "aeronio/spark/recordings.py:6: spark -> aeronio.archive.conductor",
        "aeronio/spark/recordings.py:7: spark -> aeronio.driver.media_driver",
    ]
