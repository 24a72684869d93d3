"""The chat demo: a room of two chat servers (or more), each its own process with its own
embedded Aeron driver, the first the room's home. Open the two URLs it prints in two browser
windows and talk; Ctrl-C ends it.

    python examples/chat/demo.py [--servers N] [--transport multicast|mdc] [--seconds S]
"""

from __future__ import annotations

import argparse
import contextlib
import signal
import subprocess
import sys
import time
from pathlib import Path

SERVER = Path(__file__).parent / "server.py"


class Server:
    """A chat server process; `url` once it serves (and `room`, the home's spec)."""

    def __init__(self, *args: str):
        self.proc = subprocess.Popen(  # a session of its own: Ctrl-C reaches the demo alone
            [sys.executable, str(SERVER), *args], stdout=subprocess.PIPE, text=True,
            start_new_session=True,
        )  # fmt: skip
        self.room = ""
        self.url = ""
        for line in self.proc.stdout:
            if line.startswith("room: "):
                self.room = line.split()[1]
            elif line.startswith("chat server "):
                self.url = line.split()[-1]
                return
        raise SystemExit(f"{SERVER.name} {' '.join(args)} ended before it served")

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
        try:
            self.proc.wait(10)
        except subprocess.TimeoutExpired:
            self.proc.kill()


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--servers", type=int, default=2, help="how many (at least 1)")
    parser.add_argument("--transport", choices=["multicast", "mdc"], default="multicast")
    parser.add_argument("--seconds", type=float, help="end after this long (default: Ctrl-C)")
    args = parser.parse_args(argv)
    if args.servers < 1:
        parser.error("--servers: at least 1")
    if args.seconds is not None and not args.seconds > 0:  # 0 waited for Ctrl-C; -1 crashed
        parser.error("--seconds: must be above 0")
    signal.signal(signal.SIGTERM, signal.default_int_handler)  # SIGTERM ends it as Ctrl-C does
    servers: list[Server] = []
    try:
        servers.append(Server("--home", "--name", "server-1", "--transport", args.transport))
        for number in range(2, args.servers + 1):
            servers.append(Server("--join", servers[0].room, "--name", f"server-{number}"))
        for server in servers:
            print(f"open {server.url}", flush=True)
        print(f"room: {servers[0].room}", flush=True)
        print(f"(python {SERVER} --join {servers[0].room} adds a server; Ctrl-C ends the demo)")
        time.sleep(args.seconds) if args.seconds else signal.pause()
    except KeyboardInterrupt:
        pass
    finally:
        for server in reversed(servers):  # the home last: the others leave its room first
            with contextlib.suppress(Exception):
                server.stop()


if __name__ == "__main__":
    main()
