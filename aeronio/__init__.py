"""aeronio: Aeron's log buffers, media driver and protocol for Python, with an asyncio API."""

import importlib
import importlib.metadata

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
from aeronio._connect import connect
from aeronio._core import BufferClaim, FragmentAssembler, FragmentBatch, Header, Message
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
from aeronio.client.subscription import ControlledPollAction, Image, Subscription
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
    "BACK_PRESSURED",
    "CLOSED",
    "MAX_POSITION_EXCEEDED",
    "NOT_CONNECTED",
    "Aeron",
    "AeronError",
    "BackoffIdleStrategy",
    "BufferClaim",
    "BusySpinIdleStrategy",
    "ChannelUriError",
    "ClaimError",
    "ClientTimeoutError",
    "ConfigurationError",
    "ControlledPollAction",
    "DriverContext",
    "DriverError",
    "DriverNotFoundError",
    "DriverTimeoutError",
    "ImageUnavailableError",
    "ExclusivePublication",
    "FragmentAssembler",
    "FragmentBatch",
    "Header",
    "Image",
    "MaxPositionExceededError",
    "MediaDriver",
    "Message",
    "MessageTooLargeError",
    "NotifyingIdleStrategy",
    "Publication",
    "PublicationClosedError",
    "StorageSpaceError",
    "SubscriptionClosedError",
    "Subscription",
    "YieldingIdleStrategy",
    "connect",
    "run",
]
__version__ = "0.1.0"
