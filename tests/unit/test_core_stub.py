"""aeronio/_core.pyi, the types of the compiled core, in step with it: the same public names, the
same members in each class (properties as properties, methods as methods), the same parameters
where the module shows them (Cython's binding functions and embedded signatures) and the
constructors' as the Cython source has them (the module does not show those), the same values
of the constants."""

from __future__ import annotations

import ast
import importlib
import inspect
import re
import subprocess
import sys
from pathlib import Path

import pytest

from aeronio import _core
from tests.support.python_source import parse

ROOT = Path(__file__).parents[2]
STUB = parse(ROOT / "aeronio" / "_core.pyi")
CYTHON = "\n".join(
    path.read_text()
    for pattern in ("*.pyx", "*.pxi")
    for path in (ROOT / "cython_core").glob(pattern)
)

# What Cython gives every extension type (construction, pickling, its C method table): no API.
CYTHON_MEMBERS = {
    "__doc__", "__new__", "__pyx_vtable__", "__reduce__", "__reduce_cython__", "__setstate__",
    "__setstate_cython__",
}  # fmt: skip
# A buffer's special methods: the stub declares __buffer__ (PEP 688, so type checkers take the
# type as a Buffer on every Python), not __release_buffer__; CPython shows both only from 3.12.
HIDDEN_BUFFER_SLOTS = {"__release_buffer__"} | (
    {"__buffer__"} if sys.version_info < (3, 12) else set()
)
# Methods whose parameters the compiled module does not show (a special method without a
# docstring carries no embedded signature; Completed.__next__ is replaced in C). From 3.13
# CPython shows them all: a method of no arguments has the signature (self, /).
NOT_SHOWN = {
    "Completed.__await__", "Completed.__next__", "MessageBatches.__aiter__",
    "MessageBatches.__anext__", "MessageIterator.__aiter__", "MessageIterator.__anext__",
    "MessageViews.__aiter__", "MessageViews.__anext__", "SubscriptionBase.__anext__",
} if sys.version_info < (3, 13) else set()  # fmt: skip


def declared(body: list[ast.stmt]) -> dict[str, list[ast.stmt]]:
    """The names a stub body declares (overloads and a property's setter under one name)."""
    names: dict[str, list[ast.stmt]] = {}
    for node in body:
        if isinstance(node, ast.FunctionDef | ast.ClassDef):
            names.setdefault(node.name, []).append(node)
        elif isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name):
            names.setdefault(node.target.id, []).append(node)
        elif isinstance(node, ast.Assign):
            for target in node.targets:
                assert isinstance(target, ast.Name)
                names.setdefault(target.id, []).append(node)
        elif isinstance(node, ast.ImportFrom):  # `import X as X` re-exports X
            for alias in node.names:
                if alias.asname == alias.name:
                    names.setdefault(alias.name, []).append(node)
    return names


MODULE = declared(STUB.body)
CLASSES = {name: nodes[0] for name, nodes in MODULE.items() if isinstance(nodes[0], ast.ClassDef)}
RUNTIME_CLASSES = sorted(
    name
    for name, value in vars(_core).items()
    if inspect.isclass(value) and value.__module__ == _core.__name__
)


def public(name: str) -> bool:
    return not name.startswith("_")


def decorators(node: ast.stmt) -> set[str]:
    if not isinstance(node, ast.FunctionDef):
        return set()
    return {ast.unparse(d).split(".")[0] for d in node.decorator_list}


def is_attribute(nodes: list[ast.stmt]) -> bool:
    """A property or an attribute in the stub (a data descriptor of the extension type)."""
    return isinstance(nodes[0], ast.AnnAssign) or "property" in decorators(nodes[0])


# -- parameters, as (kind, name, default) -------------------------------------------------------


class Marker:
    def __init__(self, name: str):
        self.name = name

    def __repr__(self) -> str:
        return self.name


NO_DEFAULT = Marker("no default")
UNKNOWN = Marker("...")  # a default the stub leaves out


def _literal(node: ast.expr | None) -> object:
    if node is None:
        return NO_DEFAULT
    try:
        return ast.literal_eval(node)
    except ValueError:
        return UNKNOWN


def stub_parameters(function: ast.FunctionDef) -> list[tuple[str, str, object]]:
    args = function.args
    positional = args.posonlyargs + args.args
    defaults = [None] * (len(positional) - len(args.defaults)) + list(args.defaults)
    found = [("", a.arg, _literal(d)) for a, d in zip(positional, defaults, strict=True)]
    if args.vararg:
        found.append(("*", args.vararg.arg, NO_DEFAULT))
    found += [
        ("kw", a.arg, _literal(d)) for a, d in zip(args.kwonlyargs, args.kw_defaults, strict=True)
    ]
    if args.kwarg:
        found.append(("**", args.kwarg.arg, NO_DEFAULT))
    return found


KINDS = {
    inspect.Parameter.POSITIONAL_ONLY: "",
    inspect.Parameter.POSITIONAL_OR_KEYWORD: "",
    inspect.Parameter.VAR_POSITIONAL: "*",
    inspect.Parameter.KEYWORD_ONLY: "kw",
    inspect.Parameter.VAR_KEYWORD: "**",
}


def runtime_parameters(function: object) -> list[tuple[str, str, object]] | None:
    """From the signature Cython's binding functions carry, else from the one embedsignature
    writes at the top of the docstring; None where neither is there."""
    try:
        signature = inspect.signature(function)  # type: ignore[arg-type]
    except (TypeError, ValueError):
        first_line = (getattr(function, "__doc__", None) or "").split("\n")[0]
        if not re.match(r"\w+\(.*\)( -> .+)?$", first_line):
            return None
        parsed = parse(f"def {first_line}: pass").body[0]
        assert isinstance(parsed, ast.FunctionDef)
        return stub_parameters(parsed)
    return [
        (
            KINDS[p.kind],
            p.name,
            NO_DEFAULT if p.default is inspect.Parameter.empty else p.default,
        )
        for p in signature.parameters.values()
    ]


def same_parameters(stub: list, runtime: list, overload: bool = False) -> bool:
    """Kinds and names equal; defaults present alike (unless an overload, which may leave one
    out), and equal where the stub writes one."""
    return len(stub) == len(runtime) and all(
        s[:2] == r[:2]
        and (overload or (s[2] is NO_DEFAULT) == (r[2] is NO_DEFAULT))
        and (s[2] in (NO_DEFAULT, UNKNOWN) or r[2] is UNKNOWN or s[2] == r[2])
        for s, r in zip(stub, runtime, strict=True)
    )


def constructors_in_source() -> dict[str, list[tuple[str, str, object]] | None]:
    """Each `cdef class`'s constructor parameters (past self), from its `__init__` or else its
    `__cinit__`; None when it takes none, or anything (`*args, **kwargs`: a Python subclass's
    __init__ says what)."""
    found: dict[str, list[tuple[str, str, object]] | None] = {}
    for match in re.finditer(r"^cdef class (\w+).*?:\n(.*?)(?=^\S|\Z)", CYTHON, re.M | re.S):
        name, body = match.groups()
        methods = dict(
            re.findall(r"^    def (__init__|__cinit__)\(\s*self,?(.*?)\):", body, re.M | re.S)
        )
        text = methods.get("__init__", methods.get("__cinit__", ""))
        parameters = []
        for parameter in filter(None, (p.strip() for p in text.split(","))):
            stars, pname, default = re.fullmatch(
                r"(\*{0,2})(?:[\w.]+\s+)*(\w+)\s*(?:=\s*(.+))?", parameter, re.S
            ).groups()
            value = NO_DEFAULT
            if default is not None:
                value = ast.literal_eval(parse(default).body[0].value)
            parameters.append((stars, pname, value))
        anything = [p[0] for p in parameters] == ["*", "**"]
        found[name] = None if not parameters or anything else parameters
    return found


# -- the tests ---------------------------------------------------------------------------------


def test_the_stub_declares_every_public_name_of_the_module_and_no_other():
    runtime = {name for name in dir(_core) if public(name)}
    stub = {name for name in MODULE if public(name)}
    assert not runtime - stub, f"in aeronio._core, not in _core.pyi: {sorted(runtime - stub)}"
    assert not stub - runtime, f"in _core.pyi, not in aeronio._core: {sorted(stub - runtime)}"


def test_names_the_stub_re_exports_are_the_modules():
    for node in STUB.body:
        if isinstance(node, ast.ImportFrom) and node.module:
            source = importlib.import_module(node.module)
            for alias in node.names:
                if alias.asname == alias.name:
                    assert getattr(_core, alias.name) is getattr(source, alias.name)


def test_the_constants_have_the_modules_values():
    checked = 0
    for name, nodes in MODULE.items():
        node = nodes[0]
        if public(name) and isinstance(node, ast.AnnAssign) and node.value is not None:
            assert getattr(_core, name) == ast.literal_eval(node.value), name
            checked += 1
    assert checked == sum(isinstance(getattr(_core, n), int) for n in dir(_core) if public(n))


def test_every_class_of_the_source_is_a_class_of_the_module():
    assert set(constructors_in_source()) == set(RUNTIME_CLASSES)


@pytest.mark.parametrize("name", RUNTIME_CLASSES)
def test_each_class_has_the_same_members_and_bases_as_in_the_module(name: str):
    cls = getattr(_core, name)
    members = declared(CLASSES[name].body)
    hidden = CYTHON_MEMBERS | HIDDEN_BUFFER_SLOTS
    runtime = {n for n in vars(cls) if n not in hidden and (public(n) or n[:2] == "__")}
    assert not runtime - set(members), f"{name}: not in the stub: {sorted(runtime - set(members))}"
    extra = set(members) - {"__init__"} - HIDDEN_BUFFER_SLOTS - set(vars(cls))
    assert not extra, f"{name}: in the stub, not in the module: {sorted(extra)}"
    for member, nodes in members.items():
        if member != "__init__" and member not in HIDDEN_BUFFER_SLOTS:
            descriptor = inspect.isdatadescriptor(vars(cls)[member])
            assert is_attribute(nodes) == descriptor, f"{name}.{member}: property or method?"
    stub_bases = [ast.unparse(b) for b in CLASSES[name].bases if ast.unparse(b) in CLASSES]
    assert stub_bases == [b.__name__ for b in cls.__bases__ if b is not object]


def methods() -> list[str]:
    found = [name for name, nodes in MODULE.items() if isinstance(nodes[0], ast.FunctionDef)]
    for cls, node in CLASSES.items():
        for member, nodes in declared(node.body).items():
            if member == "__init__" or is_attribute(nodes) or cls not in RUNTIME_CLASSES:
                continue
            if member not in HIDDEN_BUFFER_SLOTS:
                found.append(f"{cls}.{member}")
    return sorted(found)


@pytest.mark.parametrize("qualified", methods())
def test_each_function_has_the_modules_parameters_where_it_shows_them(qualified: str):
    *owner, name = qualified.split(".")
    scope = CLASSES[owner[0]].body if owner else STUB.body
    runtime_object = getattr(getattr(_core, owner[0]) if owner else _core, name)
    runtime = runtime_parameters(runtime_object)
    if runtime is None:
        assert qualified in NOT_SHOWN, f"{qualified} shows no signature now: take it off NOT_SHOWN"
        return
    assert qualified not in NOT_SHOWN, f"{qualified} shows its signature: take it off NOT_SHOWN"
    for node in declared(scope)[name]:
        assert isinstance(node, ast.FunctionDef)
        stub = stub_parameters(node)
        if "classmethod" in decorators(node):  # the module's is bound to its class
            stub = stub[1:]
        overload = "overload" in decorators(node)
        assert same_parameters(stub, runtime, overload), f"{qualified}: {stub} != {runtime}"


@pytest.mark.parametrize("name", RUNTIME_CLASSES)
def test_each_constructor_has_the_parameters_of_the_cython_source(name: str):
    source = constructors_in_source()[name]
    init = declared(CLASSES[name].body).get("__init__")
    if init is None:
        assert source is None, f"{name}({source}): not in the stub"
        return
    assert isinstance(init[0], ast.FunctionDef)
    stub = stub_parameters(init[0])[1:]  # past self
    assert source is not None and same_parameters(stub, source), f"{name}: {stub} != {source}"


# What mypy's stubtest cannot see in a Cython module: constructors (`__cinit__`: the test above
# compares them with the source), the pickling helpers and doctest table Cython adds, and before
# 3.12 a buffer's __buffer__ (HIDDEN_BUFFER_SLOTS).
STUBTEST_ALLOWLIST = r"""
aeronio\._core\.\w+\.__init__
aeronio\._core\.(\w+\.)?__(reduce|setstate)_cython__
aeronio\._core\.__test__
""" + (r"aeronio\._core\.\w+\.__buffer__" + "\n" if sys.version_info < (3, 12) else "")


@pytest.mark.slow
def test_mypys_stubtest_finds_the_stub_true_to_the_module(tmp_path: Path):
    """mypy's own comparison of a stub with its module: on top of the above, the types of the
    constants and defaults, final classes, and what mypy makes of each name. Extension types
    are disjoint bases (no class can derive from two): not marked in the stub."""
    allowlist = tmp_path / "allowlist"
    allowlist.write_text(STUBTEST_ALLOWLIST)
    result = subprocess.run(
        [sys.executable, "-m", "mypy.stubtest", "aeronio._core", "--concise",
         "--ignore-disjoint-bases", "--allowlist", str(allowlist)],
        capture_output=True, text=True, cwd=ROOT, timeout=600,
    )  # fmt: skip
    assert result.returncode == 0, result.stdout + result.stderr
