"""A client that refuses an image's log as it maps it (as one whose log is not a log buffer
would), for the tests of what it does then."""

from __future__ import annotations

import pytest

from aeronio.client.aeron import Aeron


def refuse_the_next_log(monkeypatch: pytest.MonkeyPatch, aeron: Aeron) -> list:
    """Make `aeron`'s client refuse the log of the next image it is told of once the list
    returned is armed (given an item): the list is then that log's file."""
    conductor = aeron._conductor
    map_image = conductor._on_image_ready
    refused_logs: list = []

    def refuse(log_file):
        raise ValueError(f"{log_file} is refused here")

    def on_image_ready(ready):
        if refused_logs == [None]:
            refused_logs[0] = ready.log_file
            with monkeypatch.context() as patch:
                patch.setattr(conductor, "_map_log", refuse)
                map_image(ready)
        else:
            map_image(ready)

    monkeypatch.setattr(conductor, "_on_image_ready", on_image_ready)
    return refused_logs
