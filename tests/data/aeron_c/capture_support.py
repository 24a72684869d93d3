"""What the capture scripts beside this one share (each runs as a script, with pyaeron, so this
module is on its path)."""

import time


def wait(condition, what: str, timeout: float = 10.0) -> None:
    """Poll `condition` until it holds; TimeoutError naming `what` after `timeout` seconds."""
    deadline = time.monotonic() + timeout
    while not condition():
        if time.monotonic() > deadline:
            raise TimeoutError(what)
        time.sleep(0.01)
