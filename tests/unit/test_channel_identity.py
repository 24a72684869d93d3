"""Channel identity: the one `host:port` parser, `ChannelUri.canonical_form` (what endpoints,
logs and spies are keyed by) and the archive's stripped channel and recording key.

Every expected string below is what the reference Aeron 1.15.1 gives for the channel
(`UdpChannel.canonicalForm()`, `ArchiveConductor.strippedChannelBuilder` and `makeKey`);
tests/interop/test_channel_identity_java.py checks each row against the jar. The resolver is a
table (sans I/O): `localhost` is 127.0.0.1, as on any host.
"""

from __future__ import annotations

import ipaddress
import itertools

import pytest

from aeronio.driver.channel_endpoints import resolve_host
from aeronio.errors import ChannelUriError
from aeronio.protocol.channel import ChannelUri, split_address

HOSTS = {"localhost": "127.0.0.1"}


def fake_resolve(host: str) -> str:
    """The table's address for a name, an address as itself (IPv6 too)."""
    return HOSTS.get(host) or str(ipaddress.ip_address(host))


# (channel, its canonical form): rows with the same form are one endpoint. `None` in the unique
# id column: a channel that is one endpoint; Aeron numbers the others from 0 in a fresh JVM.
LOCAL_ENDPOINT = "UDP-00000000-0-7f000001-40123"
CANONICAL = [
    ("aeron:udp?endpoint=127.0.0.1:40123", LOCAL_ENDPOINT),
    ("aeron:udp?endpoint=localhost:40123", LOCAL_ENDPOINT),  # resolved, as Aeron 1.15
    ("aeron:udp?mtu=1408|endpoint=127.0.0.1:40123|term-length=64k", LOCAL_ENDPOINT),
    ("aeron:udp?term-length=64k|endpoint=localhost:40123|mtu=1408", LOCAL_ENDPOINT),
    ("aeron:udp?endpoint=127.0.0.1:40123|session-id=5", LOCAL_ENDPOINT),
    ("aeron:udp?endpoint=127.0.0.1:40123|alias=x|ttl=4|reliable=false", LOCAL_ENDPOINT),
    ("aeron-spy:aeron:udp?endpoint=127.0.0.1:40123", LOCAL_ENDPOINT),  # a spy finds it
    ("aeron:udp?endpoint=127.0.0.1:40124", "UDP-00000000-0-7f000001-40124"),
    ("aeron:udp?endpoint=10.0.0.1:40123", "UDP-00000000-0-0a000001-40123"),
    ("aeron:udp?endpoint=127.0.0.1:40123|interface=127.0.0.1", "UDP-7f000001-0-7f000001-40123"),
    (
        "aeron:udp?endpoint=127.0.0.1:40123|interface=localhost:5000",
        "UDP-7f000001-5000-7f000001-40123",
    ),
    # multi-destination-cast: the control address is the local end, whatever the mode
    ("aeron:udp?control=127.0.0.1:40125|control-mode=dynamic", "UDP-7f000001-40125-00000000-0"),
    ("aeron:udp?control=localhost:40125|control-mode=manual", "UDP-7f000001-40125-00000000-0"),
    ("aeron:udp?control=127.0.0.1:40125", "UDP-7f000001-40125-00000000-0"),
    ("aeron:udp?endpoint=127.0.0.1:40125", "UDP-00000000-0-7f000001-40125"),  # not the mdc's
    # a subscription asking a control address to add it: another endpoint than the plain one
    (
        "aeron:udp?endpoint=127.0.0.1:40123|control=127.0.0.1:40125",
        "UDP-7f000001-40125-7f000001-40123",
    ),
    ("aeron:udp?endpoint=[::1]:40123", "UDP-00000000-0-00000000000000000000000000000001-40123"),
    (
        "aeron:udp?endpoint=[0:0:0:0:0:0:0:1]:40123",
        "UDP-00000000-0-00000000000000000000000000000001-40123",
    ),
    ("aeron:udp?endpoint=224.0.1.1:40456|interface=127.0.0.1", "UDP-7f000001-0-e0000101-40456"),
    ("aeron:udp?endpoint=224.0.1.1:40456|interface=localhost", "UDP-7f000001-0-e0000101-40456"),
    ("aeron:udp?endpoint=224.0.1.3:40456|interface=127.0.0.1", "UDP-7f000001-0-e0000103-40456"),
]
# A multi-destination subscription (no endpoint, no control address) is no one endpoint: its
# form ends in a unique id (Aeron's counter; the driver's: the subscription's registration id).
MANUAL = ("aeron:udp?control-mode=manual", "UDP-00000000-0-00000000-0-0")
# Multicast with no interface: the driver sends from the wildcard; Aeron 1.15's form names the
# interface it found instead, which depends on the host (not checked against the jar).
MULTICAST_ANY = ("aeron:udp?endpoint=224.0.1.1:40456", "UDP-00000000-0-e0000101-40456")


@pytest.mark.parametrize(("channel", "form"), [*CANONICAL, MULTICAST_ANY])
def test_canonical_form_is_aerons(channel: str, form: str) -> None:
    assert ChannelUri.parse(channel).canonical_form(fake_resolve) == form


def test_channels_are_one_endpoint_exactly_when_their_forms_are_equal() -> None:
    """Every pair of the table: same form, same endpoint; the groups are as the comments say."""
    forms = {
        channel: ChannelUri.parse(channel).canonical_form(fake_resolve) for channel, _ in CANONICAL
    }
    for (a, expected_a), (b, expected_b) in itertools.combinations(CANONICAL, 2):
        assert (forms[a] == forms[b]) == (expected_a == expected_b), (a, b)
    assert sum(form == LOCAL_ENDPOINT for form in forms.values()) == 7


def test_a_multi_destination_subscription_is_its_own_endpoint() -> None:
    uri = ChannelUri.parse(MANUAL[0])
    assert uri.canonical_form(fake_resolve, unique_id=0) == MANUAL[1]
    assert uri.canonical_form(fake_resolve, unique_id=7) != uri.canonical_form(
        fake_resolve, unique_id=8
    )
    with pytest.raises(ChannelUriError, match="unique id"):
        uri.canonical_form(fake_resolve)
    # a channel that is one endpoint ignores the unique id
    assert ChannelUri.parse(CANONICAL[0][0]).canonical_form(fake_resolve, 9) == LOCAL_ENDPOINT


def test_ipc_channels_are_one_medium() -> None:
    forms = {
        ChannelUri.parse(c).canonical_form(fake_resolve)
        for c in ("aeron:ipc", "aeron:ipc?session-id=5|alias=a", "aeron:ipc?term-length=64k")
    }
    assert forms == {"IPC"}


def test_the_drivers_resolver_makes_localhost_its_address() -> None:
    a = ChannelUri.parse("aeron:udp?endpoint=localhost:40123").canonical_form(resolve_host)
    b = ChannelUri.parse("aeron:udp?endpoint=127.0.0.1:40123").canonical_form(resolve_host)
    assert a == b == LOCAL_ENDPOINT


@pytest.mark.parametrize(
    ("value", "address"),
    [
        ("127.0.0.1:40123", ("127.0.0.1", 40123)),
        ("localhost:0", ("localhost", 0)),
        ("host-1.example.com:65535", ("host-1.example.com", 65535)),
        ("[::1]:40123", ("::1", 40123)),
        ("[fe80::1:2]:1", ("fe80::1:2", 1)),
    ],
)
def test_split_address(value: str, address: tuple[str, int]) -> None:
    assert split_address("endpoint", value) == address


@pytest.mark.parametrize(
    "value",
    [
        "127.0.0.1",  # no port
        "::1:40123",  # IPv6 without brackets
        "[::1]",
        "host:65536",
        "host:-1",
        ":40123",
        "[nothex]:1",
        "300.1.1.1:1",
        "a b:1",
        "host:",
    ],
)
def test_split_address_names_the_parameter(value: str) -> None:
    with pytest.raises(ChannelUriError, match=r"^(invalid host in |port in )?control\b"):
        split_address("control", value)


def test_channel_addresses_and_interface() -> None:
    uri = ChannelUri.parse("aeron:udp?endpoint=[::1]:40123|control=localhost:5|interface=[::1]")
    assert uri.address("endpoint") == ("::1", 40123)
    assert uri.address("control") == ("localhost", 5)
    assert uri.interface_address() == ("::1", 0)
    assert ChannelUri.parse("aeron:udp?endpoint=a:1|interface=b:2").interface_address() == ("b", 2)
    assert ChannelUri.parse("aeron:udp?endpoint=a:1").interface_address() is None
    with pytest.raises(ChannelUriError, match="has no control address"):
        ChannelUri.parse("aeron:udp?endpoint=a:1").address("control")


# (channel, the archive's stripped channel, its recording key): Aeron's builder order; the key
# drops session-id and alias (one recording subscription per source, whatever the session).
ARCHIVE = [
    ("aeron:ipc", "aeron:ipc", "aeron:ipc"),
    (
        "aeron:ipc?session-id=5|alias=a|term-length=64k",
        "aeron:ipc?session-id=5|alias=a",
        "aeron:ipc",
    ),
    ("aeron:udp?endpoint=127.0.0.1:40123", *["aeron:udp?endpoint=127.0.0.1:40123"] * 2),
    (
        "aeron:udp?session-id=9|mtu=1408|endpoint=127.0.0.1:40123",
        "aeron:udp?endpoint=127.0.0.1:40123|session-id=9",
        "aeron:udp?endpoint=127.0.0.1:40123",
    ),
    (
        "aeron-spy:aeron:udp?endpoint=127.0.0.1:40123|session-id=10",
        "aeron:udp?endpoint=127.0.0.1:40123|session-id=10",
        "aeron:udp?endpoint=127.0.0.1:40123",
    ),
    (
        "aeron:udp?endpoint=localhost:40123|tags=1,2|alias=x|session-id=7|interface=127.0.0.1",
        "aeron:udp?tags=1,2|endpoint=localhost:40123|interface=127.0.0.1|session-id=7|alias=x",
        "aeron:udp?endpoint=localhost:40123|interface=127.0.0.1|tags=1,2",
    ),
    (
        "aeron:udp?control-mode=dynamic|session-id=3|control=127.0.0.1:40125",
        "aeron:udp?control=127.0.0.1:40125|session-id=3",
        "aeron:udp?control=127.0.0.1:40125",
    ),
    ("aeron:udp?control-mode=manual", "aeron:udp", "aeron:udp"),
]


@pytest.mark.parametrize(("channel", "stripped", "key"), ARCHIVE)
def test_archive_stripped_channel_and_recording_key(channel: str, stripped: str, key: str) -> None:
    uri = ChannelUri.parse(channel)
    assert uri.stripped_channel() == stripped
    assert uri.recording_key() == key
