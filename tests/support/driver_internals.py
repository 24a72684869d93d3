"""The one place the tests reach into a driver's internals: the conductor of an embedded driver
(the one `aeronio.connect()` launched for a client) or of a MediaDriver, and its UDP media. When
the driver's wiring changes, this module changes, not the tests (tests/unit/test_test_hygiene.py
keeps it so)."""

from __future__ import annotations

from typing import Any

from aeronio.client.aeron import Aeron
from aeronio.driver.conductor import DriverConductor
from aeronio.driver.udp_media import UdpMedia


def conductor(of: Aeron | Any) -> DriverConductor:
    """The conductor of `of`: a client's own embedded driver, or a MediaDriver."""
    driver = of._owned_driver if isinstance(of, Aeron) else of
    assert driver is not None and driver.conductor is not None, f"{of} runs no driver of its own"
    return driver.conductor


def udp_media(of: Aeron | Any) -> UdpMedia:
    """The UDP media of `of`'s conductor: its network publications, send and receive endpoints,
    and the duty cycle that runs them (`do_work`)."""
    return conductor(of).udp
