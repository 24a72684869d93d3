"""aeronio: Aeron's log buffers, media driver and protocol for Python, with an asyncio API.

The public names below are imported on first use (PEP 562), so `import aeronio.protocol.channel`
loads the channel module and what it needs, not the driver and the client."""

from __future__ import annotations

import importlib
import importlib.metadata
from typing import TYPE_CHECKING

from aeronio import _lazy

try:
    __version__ = importlib.metadata.version("aeronio")
except importlib.metadata.PackageNotFoundError:  # a source tree that was never installed
    __version__ = "0+unknown"

try:  # the compiled core first: say how to build it if it is missing
    importlib.import_module("aeronio._core")
except ModuleNotFoundError as error:
    if error.name != "aeronio._core":
        raise
    raise ImportError(
        "aeronio's compiled core (aeronio._core) is not built: install the package with "
        "`pip install .` (or `pip install -e .` in a checkout), or build it in place with "
        "`python setup.py build_ext --inplace` (needs Cython and a C compiler)"
    ) from None

# The public names: type checkers see these imports, the run time imports each from the table
# below on first use (tests/unit/test_package.py keeps the imports, the table and __all__ equal).
if TYPE_CHECKING:
    from aeronio._connect import connect
    from aeronio._core import (
        BufferClaim,
        FragmentAssembler,
        FragmentBatch,
        Header,
        Message,
    )
    from aeronio._run import run
    from aeronio.client.aeron import Aeron
    from aeronio.client.publication import (
        ADMIN_ACTION,
        BACK_PRESSURED,
        CLOSED,
        MAX_POSITION_EXCEEDED,
        NOT_CONNECTED,
        ExclusivePublication,
        Publication,
    )
    from aeronio.client.subscription import (
        ControlledPollAction,
        Image,
        Subscription,
    )
    from aeronio.driver.context import DriverContext
    from aeronio.driver.media_driver import MediaDriver
    from aeronio.errors import (
        AeronError,
        ChannelUriError,
        ClaimError,
        ClientTimeoutError,
        ConfigurationError,
        DriverError,
        DriverNotFoundError,
        DriverTimeoutError,
        ImageUnavailableError,
        MaxPositionExceededError,
        MessageTooLargeError,
        OfferBatchTimeoutError,
        PublicationClosedError,
        StorageSpaceError,
        SubscriptionClosedError,
    )
    from aeronio.idle import (
        BackoffIdleStrategy,
        BusySpinIdleStrategy,
        NotifyingIdleStrategy,
        YieldingIdleStrategy,
    )

__all__ = [
    "ADMIN_ACTION",
    "Aeron",
    "AeronError",
    "BACK_PRESSURED",
    "BackoffIdleStrategy",
    "BufferClaim",
    "BusySpinIdleStrategy",
    "CLOSED",
    "ChannelUriError",
    "ClaimError",
    "ClientTimeoutError",
    "ConfigurationError",
    "ControlledPollAction",
    "DriverContext",
    "DriverError",
    "DriverNotFoundError",
    "DriverTimeoutError",
    "ExclusivePublication",
    "FragmentAssembler",
    "FragmentBatch",
    "Header",
    "Image",
    "ImageUnavailableError",
    "MAX_POSITION_EXCEEDED",
    "MaxPositionExceededError",
    "MediaDriver",
    "Message",
    "MessageTooLargeError",
    "OfferBatchTimeoutError",
    "NOT_CONNECTED",
    "NotifyingIdleStrategy",
    "Publication",
    "PublicationClosedError",
    "StorageSpaceError",
    "Subscription",
    "SubscriptionClosedError",
    "YieldingIdleStrategy",
    "connect",
    "run",
]

if not TYPE_CHECKING:  # a type checker sees the imports above, not a catch-all __getattr__
    __getattr__, __dir__ = _lazy.exports(
        __name__,
        {
            "aeronio._connect": ("connect",),
            "aeronio._core": (
                "BufferClaim",
                "FragmentAssembler",
                "FragmentBatch",
                "Header",
                "Message",
            ),
            "aeronio._run": ("run",),
            "aeronio.client.aeron": ("Aeron",),
            "aeronio.client.publication": (
                "ADMIN_ACTION",
                "BACK_PRESSURED",
                "CLOSED",
                "MAX_POSITION_EXCEEDED",
                "NOT_CONNECTED",
                "ExclusivePublication",
                "Publication",
            ),
            "aeronio.client.subscription": ("ControlledPollAction", "Image", "Subscription"),
            "aeronio.driver.context": ("DriverContext",),
            "aeronio.driver.media_driver": ("MediaDriver",),
            "aeronio.errors": (
                "AeronError",
                "ChannelUriError",
                "ClaimError",
                "ClientTimeoutError",
                "ConfigurationError",
                "DriverError",
                "DriverNotFoundError",
                "DriverTimeoutError",
                "ImageUnavailableError",
                "MaxPositionExceededError",
                "MessageTooLargeError",
                "OfferBatchTimeoutError",
                "PublicationClosedError",
                "StorageSpaceError",
                "SubscriptionClosedError",
            ),
            "aeronio.idle": (
                "BackoffIdleStrategy",
                "BusySpinIdleStrategy",
                "NotifyingIdleStrategy",
                "YieldingIdleStrategy",
            ),
        },
    )
