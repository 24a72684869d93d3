"""The layers of the package, enforced on every import (docs/architecture.md, "Layers").

Rules, by the package a module is in:
- `aeronio.client` imports only `protocol`, `logbuffer`, `counters`, `cnc`, `concurrent`, `idle`,
  `errors` and `_core`: a client reaches its driver only through the control protocol and cnc.dat
  (and the registry of embedded drivers in `protocol.embedded`);
- `aeronio.driver` imports no `client`;
- `aeronio.protocol` imports no `driver`, `client`, `logbuffer` or `counters` (it is what
  everyone builds on: only `_core` and `errors` are below it);
- `aeronio.logbuffer` and `aeronio.counters` import no `driver` or `client`;
- `aeronio.concurrent` (shared-memory structures) imports only `_core` and `errors`; `aeronio.cnc`
  (cnc.dat) only those and `concurrent`;
- `aeronio.archive` is a client of a driver, never part of one: it imports no `driver` (nor
  the top-level `aeronio`, which launches drivers), and nothing below it imports `archive`;
- `aeronio.spark` is on top (it may launch drivers for its tasks); nothing else imports it.
Only the top-level modules (`aeronio/__init__.py`, `_connect.py`, `cli.py`) know both sides.
Every import counts: at module level, inside functions and under `TYPE_CHECKING`.
"""

from __future__ import annotations

import ast
from pathlib import Path

PACKAGE = Path(__file__).parents[2] / "aeronio"

CLIENT_MAY_IMPORT = {
    "client",
    "protocol",
    "logbuffer",
    "counters",
    "cnc",
    "concurrent",
    "idle",
    "errors",
    "_core",
}
FORBIDDEN = {
    "driver": {"client", "archive", "spark"},
    "protocol": {"driver", "client", "logbuffer", "counters", "archive", "spark"},
    "logbuffer": {"driver", "client", "archive", "spark"},
    "counters": {"driver", "client", "archive", "spark"},
    "cnc": {"driver", "client", "protocol", "logbuffer", "counters", "archive", "spark"},
    "concurrent": {
        "driver",
        "client",
        "protocol",
        "logbuffer",
        "counters",
        "cnc",
        "archive",
        "spark",
    },
    "archive": {"driver", "", "spark"},  # "": the top-level package
}


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
    """The layer of an `aeronio...` module name (its first component under aeronio; "" for
    the top-level package itself)."""
    parts = name.split(".")
    if parts[0] != "aeronio":
        return None
    return parts[1] if len(parts) > 1 and parts[1] not in _TOP_LEVEL else ""


_TOP_LEVEL = {"connect", "MediaDriver", "_connect", "cli"}  # names of the top-level package


def violations(package: Path) -> list[str]:
    """Every forbidden edge in the package at `package` (a directory named aeronio)."""
    found = []
    for path in sorted(package.rglob("*.py")):
        relative = path.relative_to(package.parent).with_suffix("")
        is_package = relative.name == "__init__"
        module = ".".join(relative.parts[:-1] if is_package else relative.parts)
        layer = layer_of(module)
        if layer is None or layer == "":
            continue  # the top level may import anything
        tree = ast.parse(path.read_text(), str(path))
        for line, name in sorted(imported_modules(tree, module, is_package)):
            target = layer_of(name)
            if target is None or target == layer:
                continue
            allowed = target in CLIENT_MAY_IMPORT if layer == "client" else True
            if not allowed or target in FORBIDDEN.get(layer, set()):
                found.append(f"{path.relative_to(package.parent)}:{line}: {layer} -> {name}")
    return found


def test_no_module_imports_across_a_forbidden_edge():
    assert violations(PACKAGE) == []


def test_the_checker_finds_forbidden_edges(tmp_path):
    package = tmp_path / "aeronio"
    for layer in ("client", "driver", "protocol", "logbuffer", "counters", "archive"):
        (package / layer).mkdir(parents=True)
        (package / layer / "__init__.py").write_text("")
    (package / "__init__.py").write_text("from aeronio.driver import conductor\n")  # allowed
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
        "aeronio/archive/tool.py:1: archive -> aeronio",
        "aeronio/archive/tool.py:3: archive -> aeronio.driver.media_driver",
        "aeronio/client/aeron.py:2: client -> aeronio.driver.conductor.COUNTERS_FILE",
        "aeronio/client/aeron.py:4: client -> aeronio.driver.media_driver",
        "aeronio/client/aeron.py:5: client -> aeronio.cli",
        "aeronio/counters/__init__.py:1: counters -> aeronio.driver",
        "aeronio/driver/agent.py:1: driver -> aeronio.archive.catalog",
        "aeronio/driver/conductor.py:1: driver -> aeronio.client.aeron.Aeron",
        "aeronio/protocol/channel.py:3: protocol -> aeronio.client.x",
    ]
