"""Tests of aeronio.protocol.channel: Aeron channel URI parsing and validation."""

import copy
import pickle
import re

import pytest
from hypothesis import given
from hypothesis import strategies as st

from aeronio.errors import ChannelUriError, ConfigurationError
from aeronio.protocol.channel import ChannelUri, parse_duration_ns, parse_size

UDP = "aeron:udp?endpoint=localhost:40123"


def bad(text: str, *fragments: str) -> str:
    """Assert that parsing `text` fails with a message containing every fragment."""
    with pytest.raises(ChannelUriError) as info:
        ChannelUri.parse(text)
    message = str(info.value)
    for fragment in fragments:
        assert fragment in message, (fragment, message)
    return message


# --- parsing and printing --------------------------------------------------------------


@pytest.mark.parametrize(
    "text",
    [
        "aeron:ipc",
        "aeron:ipc?term-length=64k|sparse=true",
        "aeron:udp?endpoint=localhost:40123",
        "aeron:udp?endpoint=192.168.0.1:40456|interface=192.168.0.0/24|mtu=1408|ttl=8",
        "aeron:udp?endpoint=[::1]:40123",
        "aeron:udp?endpoint=[fe80::1%eth0]:40123",
        "aeron:udp?control=localhost:40124|control-mode=dynamic",
        "aeron:udp?control-mode=manual",
        "aeron:udp?mtu=8192|endpoint=host.example.com:0|reliable=false",
        "aeron-spy:aeron:udp?endpoint=localhost:40123",
        "aeron:udp?endpoint=a:1|tags=1,2|alias=my=alias|fc=min|gtag=-7",
    ],
)
def test_round_trip(text: str) -> None:
    uri = ChannelUri.parse(text)
    assert str(uri) == text
    assert ChannelUri.parse(str(uri)) == uri
    assert hash(ChannelUri.parse(text)) == hash(uri)
    assert eval(repr(uri), {"ChannelUri": ChannelUri}) == uri


def test_parts() -> None:
    uri = ChannelUri.parse("aeron:udp?endpoint=localhost:40123|mtu=1408")
    assert (uri.prefix, uri.media) == ("", "udp")
    assert dict(uri.params) == {"endpoint": "localhost:40123", "mtu": "1408"}
    assert list(uri.params) == ["endpoint", "mtu"]
    assert uri.is_udp and not uri.is_ipc and not uri.is_spy
    assert uri.get("mtu") == "1408"
    assert uri.get("ttl") is None and uri.get("ttl", "x") == "x"
    assert "mtu" in uri and "ttl" not in uri


def test_ipc_without_params() -> None:
    uri = ChannelUri.parse("aeron:ipc")
    assert uri.is_ipc and not uri.is_udp
    assert dict(uri.params) == {}
    assert uri.term_length is None and uri.session_id is None


def test_spy_prefix() -> None:
    uri = ChannelUri.parse("aeron-spy:aeron:udp?endpoint=localhost:40123|session-id=5")
    assert uri.prefix == "aeron-spy" and uri.is_spy and uri.is_udp
    assert uri.endpoint == "localhost:40123" and uri.session_id == 5
    assert uri != ChannelUri.parse("aeron:udp?endpoint=localhost:40123|session-id=5")
    bad("aeron-spy:aeron:ipc", "aeron-spy", "udp")
    bad("aeron-spy:udp?endpoint=a:1", "aeron:")


def test_equality_ignores_key_order() -> None:
    a = ChannelUri.parse("aeron:udp?endpoint=a:1|mtu=1408")
    b = ChannelUri.parse("aeron:udp?mtu=1408|endpoint=a:1")
    assert a == b and hash(a) == hash(b) and str(a) != str(b)
    assert a != ChannelUri.parse("aeron:udp?endpoint=a:1|mtu=4096")
    assert a != "aeron:udp?endpoint=a:1|mtu=1408"
    assert len({a, b}) == 1


def test_immutable_and_picklable() -> None:
    uri = ChannelUri.parse(UDP + "|mtu=1408")
    with pytest.raises(AttributeError):
        uri.media = "ipc"  # type: ignore[misc]
    with pytest.raises(TypeError):
        uri.params["mtu"] = "4096"  # type: ignore[index]
    assert pickle.loads(pickle.dumps(uri)) == uri
    assert copy.deepcopy(uri) == uri


# --- typed accessors -------------------------------------------------------------------


def test_typed_accessors_udp() -> None:
    uri = ChannelUri.parse(
        "aeron:udp?endpoint=224.0.1.1:40456|interface=eth0|control=host:40457|control-mode=dynamic"
        "|term-length=128k|mtu=8k|init-term-id=-10|term-id=-8|term-offset=1024|session-id=-3"
        "|linger=5s|sparse=true|reliable=false|ttl=16|so-sndbuf=64k|so-rcvbuf=2m|rcv-wnd=128k"
        "|nak-delay=100us"
    )
    assert uri.endpoint == "224.0.1.1:40456"
    assert uri.interface == "eth0"
    assert uri.control == "host:40457"
    assert uri.control_mode == "dynamic"
    assert uri.term_length == 128 * 1024
    assert uri.mtu == 8192
    assert (uri.initial_term_id, uri.term_id, uri.term_offset) == (-10, -8, 1024)
    assert uri.session_id == -3
    assert uri.linger_ns == 5_000_000_000
    assert uri.sparse is True and uri.reliable is False
    assert uri.ttl == 16
    assert (uri.so_sndbuf, uri.so_rcvbuf, uri.rcv_wnd) == (65536, 2 * 1024 * 1024, 131072)
    assert uri.nak_delay_ns == 100_000


def test_accessors_absent_are_none() -> None:
    uri = ChannelUri.parse(UDP)
    names = [
        "term_length", "mtu", "initial_term_id", "term_id", "term_offset", "session_id",
        "linger_ns", "sparse", "reliable", "ttl", "so_sndbuf", "so_rcvbuf", "rcv_wnd",
        "nak_delay_ns", "interface", "control", "control_mode",
    ]  # fmt: skip
    assert all(getattr(uri, name) is None for name in names)


def test_ipc_accessors() -> None:
    uri = ChannelUri.parse("aeron:ipc?term-length=65536|mtu=4096|session-id=2147483647")
    assert (uri.term_length, uri.mtu, uri.session_id) == (65536, 4096, 2**31 - 1)
    assert ChannelUri.parse("aeron:ipc?session-id=-2147483648").session_id == -(2**31)


@pytest.mark.parametrize(
    ("value", "ns"),
    [("0", 0), ("250", 250), ("7ns", 7), ("3us", 3_000), ("20ms", 20_000_000),
     ("5s", 5_000_000_000), ("5S", 5_000_000_000), ("2MS", 2_000_000)],
)  # fmt: skip
def test_durations(value: str, ns: int) -> None:
    assert parse_duration_ns("linger", value) == ns
    assert ChannelUri.parse(f"aeron:ipc?linger={value}").linger_ns == ns
    assert ChannelUri.parse(f"{UDP}|nak-delay={value}").nak_delay_ns == ns


@pytest.mark.parametrize(
    ("value", "size"),
    [("4096", 4096), ("64k", 65536), ("64K", 65536), ("2m", 2 << 20), ("1g", 1 << 30)],
)
def test_sizes(value: str, size: int) -> None:
    assert parse_size("so-sndbuf", value) == size
    if size < 2**31:
        uri = ChannelUri.parse(f"{UDP}|so-sndbuf={value}|so-rcvbuf={value}|rcv-wnd={value}")
        assert uri.so_sndbuf == uri.so_rcvbuf == uri.rcv_wnd == size


@pytest.mark.parametrize("value", ["", "k", "-1", "1.5k", "12x", "1kb", " 1", "0x10"])
def test_bad_size(value: str) -> None:
    with pytest.raises(ChannelUriError, match="so-sndbuf"):
        parse_size("so-sndbuf", value)


@pytest.mark.parametrize("value", ["", "s", "-1s", "5h", "1.5s", "5 s", "5sec", "1_000"])
def test_bad_duration(value: str) -> None:
    with pytest.raises(ChannelUriError, match="linger"):
        parse_duration_ns("linger", value)


# --- term ids and offsets --------------------------------------------------------------


def test_negative_term_ids() -> None:
    uri = ChannelUri.parse("aeron:ipc?init-term-id=-2147483648|term-id=-2147483647|term-offset=0")
    assert (uri.initial_term_id, uri.term_id, uri.term_offset) == (-(2**31), -(2**31) + 1, 0)


@pytest.mark.parametrize(
    ("given", "missing"),
    [("init-term-id=1", "term-id, term-offset"), ("term-id=1", "init-term-id, term-offset"),
     ("term-offset=0", "init-term-id, term-id"), ("init-term-id=1|term-id=2", "term-offset"),
     ("term-id=1|term-offset=0", "init-term-id")],
)  # fmt: skip
def test_term_ids_all_or_nothing(given: str, missing: str) -> None:
    bad(f"aeron:ipc?{given}", "init-term-id, term-id and term-offset", f"missing {missing}")


def test_term_offset_rules() -> None:
    ok = "aeron:ipc?term-length=65536|init-term-id=0|term-id=0|term-offset="
    assert ChannelUri.parse(ok + "65536").term_offset == 65536
    no_length = "aeron:ipc?init-term-id=0|term-id=0|term-offset=1073741824"
    assert ChannelUri.parse(no_length).term_offset == 1 << 30
    bad(ok + "65568", "term-offset 65568", "multiple of 32", "between 0 and 65536")
    bad(ok + "33", "term-offset 33", "multiple of 32")
    bad(ok + "-32", "term-offset -32")
    bad("aeron:ipc?init-term-id=0|term-id=0|term-offset=1073741856", "term-offset", "1073741824")


def test_term_offset_takes_no_size_suffix() -> None:
    # term-offset is a plain integer (only term-length, mtu and buffers take size suffixes).
    bad("aeron:ipc?init-term-id=0|term-id=0|term-offset=1k", "invalid integer for term-offset")


@pytest.mark.parametrize("key", ["init-term-id", "term-id", "session-id"])
def test_int32_ranges(key: str) -> None:
    ids = "init-term-id=0|term-id=0|term-offset=0"
    ids = "|".join(p for p in ids.split("|") if not p.startswith(key + "="))
    sep = "|" + ids if key != "session-id" else ""
    bad(f"aeron:ipc?{key}=2147483648{sep}", f"{key} 2147483648", "-2147483648 and 2147483647")
    bad(f"aeron:ipc?{key}=-2147483649{sep}", f"{key} -2147483649")
    bad(f"aeron:ipc?{key}=abc{sep}", f"invalid integer for {key}: 'abc'")


# --- validation errors -----------------------------------------------------------------


def test_error_is_configuration_error() -> None:
    assert issubclass(ChannelUriError, ConfigurationError)
    with pytest.raises(ValueError):
        ChannelUri.parse("aeron:tcp")


def test_unknown_key() -> None:
    message = bad("aeron:ipc?foo=1", "'foo'")
    assert message == "unknown channel parameter 'foo' in aeron:ipc?foo=1"


@pytest.mark.parametrize(
    "param",
    ["reliable=true", "ttl=1", "so-sndbuf=1k", "so-rcvbuf=1k", "rcv-wnd=1k", "nak-delay=1ms",
     "endpoint=a:1", "interface=eth0", "control=a:1", "control-mode=manual", "fc=min", "gtag=1",
     "group=true", "spies-simulate-connection=true"],
)  # fmt: skip
def test_udp_only_key_on_ipc(param: str) -> None:
    key = param.partition("=")[0]
    bad(f"aeron:ipc?{param}", f"'{key}'", "ipc")


def test_session_id_message() -> None:
    bad("aeron:ipc?session-id=abc", "invalid integer for session-id: 'abc'")
    bad("aeron:ipc?session-id=1.0", "session-id")
    bad("aeron:ipc?session-id= 1", "session-id")


@pytest.mark.parametrize("value", ["1000", "32k", "65535", "98304", "2g", "0"])
def test_bad_term_length(value: str) -> None:
    bad(
        f"aeron:ipc?term-length={value}",
        f"term-length {value} must be a power of two between 65536 and 1073741824",
    )


@pytest.mark.parametrize("value", ["64k", "1g", "1073741824", "65536"])
def test_good_term_length(value: str) -> None:
    assert ChannelUri.parse(f"aeron:ipc?term-length={value}").term_length == parse_size("", value)


@pytest.mark.parametrize("value", ["100", "32", "0", "65505", "65536", "1000", "64k"])
def test_bad_mtu(value: str) -> None:
    bad(f"aeron:ipc?mtu={value}", f"mtu {value} must be a multiple of 32 between 64 and 65504")


@pytest.mark.parametrize("value", ["64", "1408", "65504", "8k"])
def test_good_mtu(value: str) -> None:
    assert ChannelUri.parse(f"aeron:ipc?mtu={value}").mtu == parse_size("", value)


@pytest.mark.parametrize("key", ["sparse", "reliable", "eos", "tether", "group"])
@pytest.mark.parametrize("value", ["yes", "1", "True", "TRUE", "on"])
def test_bad_boolean(key: str, value: str) -> None:
    bad(f"{UDP}|{key}={value}", f"invalid boolean for {key}: '{value}'")


def test_ttl_range() -> None:
    assert ChannelUri.parse(f"{UDP}|ttl=0").ttl == 0
    assert ChannelUri.parse(f"{UDP}|ttl=255").ttl == 255
    bad(f"{UDP}|ttl=256", "ttl 256 must be between 0 and 255")
    bad(f"{UDP}|ttl=-1", "ttl -1")


def test_buffer_ranges() -> None:
    bad(f"{UDP}|rcv-wnd=0", "rcv-wnd 0")
    bad(f"{UDP}|so-sndbuf=2g", "so-sndbuf 2g")
    bad(f"{UDP}|so-rcvbuf=1x", "invalid size for so-rcvbuf: '1x'")
    assert ChannelUri.parse(f"{UDP}|so-sndbuf=0").so_sndbuf == 0


def test_tags_are_a_channel_tag_and_an_entity_tag_of_64_bits() -> None:
    for tags in ("5", "-1,9", ",9", "5,", f"{2**63 - 1},{-(2**63)}"):
        assert ChannelUri.parse(f"aeron:ipc?tags={tags}").get("tags") == tags
    for tags in ("1,abc", "x", "1,2,3", f"{2**63}", "1,0x10"):
        bad(f"aeron:ipc?tags={tags}", f"tags '{tags}' must be <channel tag>[,<entity tag>]")


def test_duration_errors_name_key() -> None:
    bad("aeron:ipc?linger=5h", "invalid duration for linger: '5h'")
    bad(f"{UDP}|nak-delay=-1", "invalid duration for nak-delay")
    bad("aeron:ipc?linger=9999999999s", "linger 9999999999s")
    bad("aeron:ipc?linger=" + "9" * 5000, "linger")


def test_control_mode() -> None:
    assert ChannelUri.parse("aeron:udp?control-mode=manual").control_mode == "manual"
    bad(f"{UDP}|control-mode=static", "control-mode 'static'", "manual", "dynamic")
    bad("aeron:udp?control-mode=dynamic", "control-mode=dynamic", "control")


def test_a_multicast_control_address_is_refused() -> None:
    """No sender takes status messages on a group: its receivers would never connect."""
    for channel in (
        "aeron:udp?control=224.0.1.2:40124|control-mode=manual",
        "aeron:udp?endpoint=127.0.0.1:40123|control=239.1.2.3:40124",
    ):
        bad(channel, "control '2", "is a multicast group", "unicast host:port")
    assert ChannelUri.parse("aeron:udp?control=10.1.2.4:40124").control == "10.1.2.4:40124"


@pytest.mark.parametrize(
    "endpoint",
    ["localhost", "localhost:", ":40123", "localhost:port", "localhost:65536", "::1:40123",
     "[::1]", "[::g]:1", "[1.2.3.4]:1", "256.1.1.1:1", "1.2.3:1", "-bad-:1", "a..b:1",
     "a b:1", "host:-1"],
)  # fmt: skip
def test_bad_endpoint(endpoint: str) -> None:
    bad(f"aeron:udp?endpoint={endpoint}", "endpoint", repr(endpoint))
    bad(f"aeron:udp?control={endpoint}", "control", repr(endpoint))


@pytest.mark.parametrize(
    "endpoint", ["localhost:0", "localhost:65535", "10.0.0.1:40123", "[::1]:1", "my_host-1.lan:9"]
)
def test_good_endpoint(endpoint: str) -> None:
    assert ChannelUri.parse(f"aeron:udp?endpoint={endpoint}").endpoint == endpoint


def test_udp_requires_endpoint_or_control() -> None:
    bad("aeron:udp", "endpoint")
    bad("aeron:udp?mtu=1408", "endpoint")
    assert ChannelUri.parse("aeron:udp?control=localhost:40124").control == "localhost:40124"


@pytest.mark.parametrize(
    ("text", "fragments"),
    [
        ("", ("aeron:",)),
        ("udp?endpoint=a:1", ("aeron:",)),
        ("aeron", ("aeron:",)),
        ("Aeron:ipc", ("aeron:",)),
        ("aeron:tcp", ("media 'tcp'",)),
        ("aeron:", ("media ''",)),
        ("aeron:?mtu=1408", ("media ''",)),
        ("aeron:IPC", ("media 'IPC'",)),
        ("aeron:ipc?", ("empty parameter list",)),
        ("aeron:ipc?mtu=1408|", ("empty channel parameter",)),
        ("aeron:ipc?mtu=1408||sparse=true", ("empty channel parameter",)),
        ("aeron:ipc?sparse", ("'sparse'", "no '='")),
        ("aeron:ipc?=1", ("empty key",)),
        ("aeron:ipc?mtu=", ("empty value", "'mtu'")),
        ("aeron:ipc?mtu=1408|mtu=4096", ("duplicate", "'mtu'")),
        ("aeron:ipc?Mtu=1408", ("unknown channel parameter 'Mtu'",)),
        ("aeron:ipc?mtu =1408", ("unknown channel parameter 'mtu '",)),
    ],
)
def test_structural_errors(text: str, fragments: tuple[str, ...]) -> None:
    bad(text, *fragments)


def test_not_a_string() -> None:
    with pytest.raises(ChannelUriError, match="str"):
        ChannelUri.parse(b"aeron:ipc")  # type: ignore[arg-type]


def test_error_message_includes_uri() -> None:
    text = "aeron:ipc?term-length=1000"
    assert bad(text).endswith(f" in {text}")


# --- build and with_params -------------------------------------------------------------


def test_build() -> None:
    uri = ChannelUri.build("udp", endpoint="localhost:40123", term_length="64k", sparse=True)
    assert str(uri) == "aeron:udp?endpoint=localhost:40123|term-length=64k|sparse=true"
    assert uri.term_length == 65536 and uri.sparse is True
    assert str(ChannelUri.build("ipc")) == "aeron:ipc"
    assert str(ChannelUri.build("ipc", session_id=None, mtu=4096)) == "aeron:ipc?mtu=4096"
    spy = ChannelUri.build("udp", prefix="aeron-spy", endpoint="a:1")
    assert str(spy) == "aeron-spy:aeron:udp?endpoint=a:1" and spy.is_spy
    with pytest.raises(ChannelUriError, match="'foo'"):
        ChannelUri.build("ipc", foo=1)
    with pytest.raises(ChannelUriError, match="'tags'"):
        ChannelUri.build("ipc", tags="1|2")
    with pytest.raises(ChannelUriError, match="prefix 'spy'"):
        ChannelUri.build("udp", prefix="spy", endpoint="a:1")


def test_constructor_validates() -> None:
    assert ChannelUri("ipc", {"mtu": "4096"}).mtu == 4096
    with pytest.raises(ChannelUriError, match="mtu 100"):
        ChannelUri("ipc", {"mtu": "100"})
    with pytest.raises(ChannelUriError, match="'mtu'"):
        ChannelUri("ipc", {"mtu": 4096})  # type: ignore[dict-item]


def test_with_params() -> None:
    uri = ChannelUri.parse("aeron:udp?endpoint=a:1|mtu=1408")
    changed = uri.with_params(mtu=4096, session_id=7)
    assert str(changed) == "aeron:udp?endpoint=a:1|mtu=4096|session-id=7"
    assert str(changed.with_params(mtu=None)) == "aeron:udp?endpoint=a:1|session-id=7"
    assert str(uri) == "aeron:udp?endpoint=a:1|mtu=1408"
    with pytest.raises(ChannelUriError, match="endpoint"):
        uri.with_params(endpoint=None)


# --- one-to-many -------------------------------------------------------------------------


def test_multicast_data_groups_are_odd_and_control_is_the_next_address() -> None:
    uri = ChannelUri.parse("aeron:udp?endpoint=224.10.9.7:4050")
    assert uri.is_multicast and not uri.is_multi_destination
    assert uri.multicast_control == ("224.10.9.8", 4050)
    last = ChannelUri.parse("aeron:udp?endpoint=224.0.0.255:1")
    assert last.multicast_control == ("224.0.1.0", 1)
    assert not ChannelUri.parse("aeron:udp?endpoint=10.0.0.1:1").is_multicast
    assert not ChannelUri.parse("aeron:udp?endpoint=localhost:1").is_multicast
    bad("aeron:udp?endpoint=224.10.9.8:4050", "endpoint '224.10.9.8:4050' is a multicast group "
        "with an even last byte")  # fmt: skip
    bad("aeron:udp?endpoint=239.255.255.255:4050", "control group 240.0.0.0 is not multicast")


def test_multi_destination_cast_channels() -> None:
    manual = ChannelUri.parse("aeron:udp?control=10.0.0.1:4050|control-mode=manual")
    dynamic = ChannelUri.parse("aeron:udp?control=10.0.0.1:4050|control-mode=dynamic")
    assert manual.is_multi_destination and dynamic.is_multi_destination
    assert not manual.is_multicast
    subscription = ChannelUri.parse("aeron:udp?endpoint=10.0.0.2:4051|control=10.0.0.1:4050")
    assert not subscription.is_multi_destination


def test_flow_control_is_checked_when_parsed() -> None:
    assert ChannelUri.parse("aeron:udp?endpoint=224.1.1.1:1|fc=tagged,g:7/3,t:2s").fc == (
        "tagged,g:7/3,t:2s"
    )
    bad("aeron:udp?endpoint=224.1.1.1:1|fc=tagged", "fc 'tagged' requires a group tag")
    bad("aeron:udp?endpoint=224.1.1.1:1|fc=fastest", "unknown flow control strategy 'fastest'")


# --- property-based --------------------------------------------------------------------


def _valid_ipv4(octets: tuple[int, ...]) -> str:
    """A multicast group only as a data group may be: odd, with a multicast control group."""
    a, b, c, d = octets
    if 224 <= a <= 239:
        d = min(d | 1, 253) if (a, b, c) == (239, 255, 255) else d | 1
    return f"{a}.{b}.{c}.{d}"


_hosts = st.one_of(
    st.sampled_from(["localhost", "host.example.com", "my-host"]),
    st.tuples(*[st.integers(0, 255)] * 4).map(_valid_ipv4),
    st.sampled_from(["[::1]", "[fe80::1]", "[2001:db8::42]"]),
)
_addresses = st.builds(lambda h, p: f"{h}:{p}", _hosts, st.integers(0, 65535))
_pow2 = st.integers(16, 30).map(lambda e: 1 << e)
_optional = {
    "term-length": _pow2.map(str),
    "mtu": st.integers(2, 2047).map(lambda n: str(n * 32)),
    "session-id": st.integers(-(2**31), 2**31 - 1).map(str),
    "linger": st.builds(lambda n, u: f"{n}{u}", st.integers(0, 10**6), st.sampled_from(
        ["", "ns", "us", "ms", "s"])),
    "sparse": st.sampled_from(["true", "false"]),
    "reliable": st.sampled_from(["true", "false"]),
    "ttl": st.integers(0, 255).map(str),
    "so-sndbuf": st.builds(lambda n, u: f"{n}{u}", st.integers(0, 1023), st.sampled_from(
        ["", "k", "m", "K", "M"])),
    "nak-delay": st.integers(0, 10**9).map(str),
    "interface": st.sampled_from(["eth0", "192.168.1.0/24"]),
    "alias": st.text(st.characters(codec="utf-8", exclude_characters="|"), min_size=1),
    "tags": st.sampled_from(["1", "1,2", "100,200"]),
    "gtag": st.integers(-(2**63), 2**63 - 1).map(str),
}  # fmt: skip


@st.composite
def udp_uris(draw: st.DrawFn) -> str:
    params = {"endpoint": draw(_addresses)}
    for key in draw(st.lists(st.sampled_from(sorted(_optional)), unique=True)):
        params[key] = draw(_optional[key])
    if draw(st.booleans()):
        term_length = int(params.get("term-length", 1 << 30))
        params["init-term-id"] = str(draw(st.integers(-(2**31), 2**31 - 1)))
        params["term-id"] = str(draw(st.integers(-(2**31), 2**31 - 1)))
        params["term-offset"] = str(draw(st.integers(0, term_length // 32)) * 32)
    items = draw(st.permutations(list(params.items())))
    prefix = draw(st.sampled_from(["", "aeron-spy:"]))
    return prefix + "aeron:udp?" + "|".join(f"{k}={v}" for k, v in items)


@given(udp_uris())
def test_round_trip_property(text: str) -> None:
    uri = ChannelUri.parse(text)
    assert str(uri) == text
    again = ChannelUri.parse(str(uri))
    assert again == uri and hash(again) == hash(uri)
    assert ChannelUri(uri.media, uri.params, uri.prefix) == uri
    assert uri.is_spy == text.startswith("aeron-spy:")
    if "session-id" in uri:
        assert uri.session_id == int(uri.params["session-id"])


@given(st.integers(0, 10**12), st.sampled_from(["", "k", "m", "g", "K", "M", "G"]))
def test_size_property(n: int, unit: str) -> None:
    assert parse_size("rcv-wnd", f"{n}{unit}") == n * 1024 ** "_kmg".index(unit.lower() or "_")


_fuzz_alphabet = st.sampled_from(list("aeron:ipudsy-?|=kmgt0123456789.[]") + ["term-length"])


@given(st.lists(_fuzz_alphabet).map("".join), st.sampled_from(["", "aeron:", "aeron:udp?"]))
def test_only_channel_uri_errors(body: str, head: str) -> None:
    try:
        uri = ChannelUri.parse(head + body)
    except ChannelUriError as e:
        assert re.search(r"\S", str(e))
    else:
        assert str(uri) == head + body
