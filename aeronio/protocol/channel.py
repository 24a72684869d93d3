"""Aeron channel URIs (Aeron 1.15 conventions): parse, validate and print.

Examples: ``aeron:ipc``, ``aeron:udp?endpoint=localhost:40123|mtu=1408``,
``aeron-spy:aeron:udp?endpoint=localhost:40123``. Every error is a
:class:`~aeronio.errors.ChannelUriError` whose message names the key or value at fault.
"""

from __future__ import annotations

import ipaddress
import re
from collections.abc import Callable, Mapping
from types import MappingProxyType
from typing import Any, Generic, NamedTuple, TypeVar, overload

from aeronio._core import FRAME_ALIGNMENT
from aeronio.errors import AeronError, ChannelUriError
from aeronio.protocol import limits

__all__ = ["ChannelUri", "parse_duration_ns", "parse_size", "split_address"]

SCHEME = "aeron"
SPY_PREFIX = "aeron-spy"
IPC_MEDIA = "ipc"
IPC_CHANNEL = "aeron:ipc"  # also the source identity of every image read from a log
UDP_MEDIA = "udp"
CONTROL_MODES = ("manual", "dynamic")
# The longest channel URI, as Aeron's C driver (AERON_URI_MAX_LENGTH, 4096 with its NUL): every
# message that echoes one (an ImageReady, a counter's label) stays within its buffer.
MAX_URI_LENGTH = 4095

_T = TypeVar("_T")
_Value = str | int | bool | None
Address = tuple[str, int]  # (host, port)
Resolver = Callable[[str], str]  # a host name or address -> its IP address
_INT32_MIN, _INT32_MAX = limits.INT32_MIN, limits.INT32_MAX
_INT64_MIN, _INT64_MAX = -(2**63), 2**63 - 1

# key -> value kind ("int", "size", "duration", "bool", "address" or "str").
_KINDS: dict[str, str] = {
    "term-length": "size", "mtu": "size", "init-term-id": "int", "term-id": "int",
    "term-offset": "int", "session-id": "int", "linger": "duration", "sparse": "bool",
    "reliable": "bool", "ttl": "int", "so-sndbuf": "size", "so-rcvbuf": "size",
    "rcv-wnd": "size", "nak-delay": "duration", "endpoint": "address", "interface": "str",
    "control": "address", "control-mode": "str", "tags": "str", "fc": "str", "gtag": "int",
    "alias": "str", "eos": "bool", "tether": "bool", "group": "bool",
    "spies-simulate-connection": "bool",
}  # fmt: skip
_IPC_KEYS = frozenset(
    {"term-length", "mtu", "init-term-id", "term-id", "term-offset", "session-id", "linger",
     "sparse", "alias", "tags", "eos", "tether"}
)  # fmt: skip
# Inclusive ranges checked with the generic message "<key> <value> must be between lo and hi".
_RANGES: dict[str, tuple[int, int]] = {
    "init-term-id": (_INT32_MIN, _INT32_MAX), "term-id": (_INT32_MIN, _INT32_MAX),
    "session-id": (_INT32_MIN, _INT32_MAX), "ttl": (0, 255), "gtag": (_INT64_MIN, _INT64_MAX),
    "so-sndbuf": (0, _INT32_MAX), "so-rcvbuf": (0, _INT32_MAX), "rcv-wnd": (1, _INT32_MAX),
    "linger": (0, _INT64_MAX), "nak-delay": (0, _INT64_MAX),
}  # fmt: skip
_TERM_IDS = ("init-term-id", "term-id", "term-offset")
# The params the archive keeps, in Aeron's ChannelUriStringBuilder order: of a stripped channel,
# and of the key recording subscriptions are told apart by.
_STRIPPED_KEYS = ("tags", "endpoint", "interface", "control", "session-id", "alias")
_RECORDING_KEYS = ("endpoint", "interface", "control", "tags")

_INT_RE = re.compile(r"[+-]?[0-9]+")
_SIZE_RE = re.compile(r"([0-9]+)([kmg]?)", re.IGNORECASE)
_DURATION_RE = re.compile(r"([0-9]+)(ns|us|ms|s)?", re.IGNORECASE)
_SIZE_UNITS = {"": 1, "k": 1024, "m": 1024**2, "g": 1024**3}
_DURATION_UNITS = {"": 1, "ns": 1, "us": 1_000, "ms": 1_000_000, "s": 1_000_000_000}
_ADDRESS_RE = re.compile(r"\[([^\[\]]+)\]:([0-9]+)|([^:\[\]]+):([0-9]+)")
_LABEL = r"[A-Za-z0-9](?:[A-Za-z0-9_-]*[A-Za-z0-9])?"
_HOSTNAME_RE = re.compile(rf"{_LABEL}(?:\.{_LABEL})*")
_FC_GROUP_RE = re.compile(r"g:([+-]?[0-9]+)?(?:/([0-9]+))?")
_FC_STRATEGIES = ("max", "min", "tagged")


def _to_int(key: str, value: str, digits: str) -> int:
    try:
        return int(digits)
    except ValueError:  # more digits than int() accepts
        raise ChannelUriError(f"{key} {value[:40]!r}... is out of range") from None


def parse_size(key: str, value: str) -> int:
    """Parse an Aeron size: bytes, or with a ``k``/``m``/``g`` suffix (x1024), e.g. ``64k``."""
    m = _SIZE_RE.fullmatch(value)
    if m is None:
        raise ChannelUriError(f"invalid size for {key}: {value!r}")
    return _to_int(key, value, m[1]) * _SIZE_UNITS[m[2].lower()]


def parse_duration_ns(key: str, value: str) -> int:
    """Parse an Aeron duration in ns: a plain ns count, or with ``ns``/``us``/``ms``/``s``."""
    m = _DURATION_RE.fullmatch(value)
    if m is None:
        raise ChannelUriError(f"invalid duration for {key}: {value!r}")
    return _to_int(key, value, m[1]) * _DURATION_UNITS[(m[2] or "").lower()]


def _parse_int(key: str, value: str) -> int:
    if _INT_RE.fullmatch(value) is None:
        raise ChannelUriError(f"invalid integer for {key}: {value!r}")
    return _to_int(key, value, value)


def _parse_bool(key: str, value: str) -> bool:
    if value not in ("true", "false"):
        raise ChannelUriError(f"invalid boolean for {key}: {value!r} (expected 'true' or 'false')")
    return value == "true"


def split_address(key: str, value: str) -> Address:
    """``host:port`` or ``[ipv6]:port`` as (host, port), the IPv6 host without its brackets: the
    one parser of channel addresses. ChannelUriError naming `key` when `value` is neither."""
    m = _ADDRESS_RE.fullmatch(value)
    if m is None:
        raise ChannelUriError(f"{key} {value!r} must be host:port or [ipv6]:port")
    ipv6, port6, host, port = m.groups()
    try:
        if ipv6 is not None:
            ipaddress.IPv6Address(ipv6)
        elif re.fullmatch(r"[0-9.]+", host):
            ipaddress.IPv4Address(host)
        elif _HOSTNAME_RE.fullmatch(host) is None:
            raise ValueError(host)
    except ValueError:
        raise ChannelUriError(f"invalid host in {key}: {value!r}") from None
    if int(port6 or port) > 65535:
        raise ChannelUriError(f"port in {key} {value!r} must be between 0 and 65535")
    return ipv6 or host, int(port6 or port)


def _check_address(key: str, value: str) -> str:
    split_address(key, value)
    return value


_PARSERS = {
    "int": _parse_int, "size": parse_size, "duration": parse_duration_ns, "bool": _parse_bool,
    "address": _check_address, "str": lambda key, value: value,
}  # fmt: skip


def _format(value: str | int | bool) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    return str(value)


def _validate(prefix: str, media: str, params: Mapping[str, str]) -> dict[str, Any]:
    """Check prefix, media and params; return the typed values by key."""
    if prefix not in ("", SPY_PREFIX):
        raise ChannelUriError(f"unknown channel URI prefix {prefix!r} (expected {SPY_PREFIX!r})")
    if media not in (IPC_MEDIA, UDP_MEDIA):
        raise ChannelUriError(f"unknown media {media!r} (expected 'ipc' or 'udp')")
    if prefix == SPY_PREFIX and media != UDP_MEDIA:
        raise ChannelUriError(f"{SPY_PREFIX} prefix requires udp media, not {media!r}")
    for key, value in params.items():
        if not isinstance(key, str) or not isinstance(value, str):
            raise ChannelUriError(f"channel parameter {key!r}={value!r} must be str=str")
        if key not in _KINDS:
            raise ChannelUriError(f"unknown channel parameter {key!r}")
        if media == IPC_MEDIA and key not in _IPC_KEYS:
            raise ChannelUriError(f"channel parameter {key!r} is not valid for ipc (udp only)")
        if not value:
            raise ChannelUriError(f"empty value for channel parameter {key!r}")
        if "|" in value:
            raise ChannelUriError(f"value of channel parameter {key!r} must not contain '|'")
    typed = {key: _PARSERS[_KINDS[key]](key, value) for key, value in params.items()}

    for key, (lo, hi) in _RANGES.items():
        if key in typed and not lo <= typed[key] <= hi:
            raise ChannelUriError(f"{key} {params[key]} must be between {lo} and {hi}")
    if "tags" in typed:
        _check_tags(typed["tags"])
    term_length = typed.get("term-length")
    if term_length is not None:
        limits.check_term_length(term_length, "term-length", ChannelUriError, params["term-length"])
    if "mtu" in typed:
        limits.check_mtu(typed["mtu"], "mtu", ChannelUriError, params["mtu"])
    missing = [key for key in _TERM_IDS if key not in typed]
    if 0 < len(missing) < len(_TERM_IDS):
        raise ChannelUriError(
            "init-term-id, term-id and term-offset must be given together; "
            f"missing {', '.join(missing)}"
        )
    offset = typed.get("term-offset")
    limit = limits.TERM_MAX_LENGTH if term_length is None else term_length
    if offset is not None and not (0 <= offset <= limit and offset % FRAME_ALIGNMENT == 0):
        raise ChannelUriError(
            f"term-offset {params['term-offset']} must be a multiple of {FRAME_ALIGNMENT} "
            f"between 0 and {limit}"
        )
    endpoint = typed.get("endpoint")
    group = multicast_group(endpoint) if endpoint is not None else None
    if group is not None and group.packed[-1] % 2 == 0:
        raise ChannelUriError(
            f"endpoint {endpoint!r} is a multicast group with an even last byte: the data group "
            "must be odd (its control group is the next, even, address)"
        )
    if group is not None and not (group + 1).is_multicast:
        raise ChannelUriError(
            f"endpoint {endpoint!r}: its control group {group + 1} is not multicast"
        )
    control = typed.get("control")
    if control is not None and multicast_group(control) is not None:
        raise ChannelUriError(
            f"control {control!r} is a multicast group: a control address is where a "
            "multi-destination-cast publication takes status messages, a unicast host:port"
        )
    if "fc" in typed:
        parse_flow_control(typed["fc"])
    mode = typed.get("control-mode")
    if mode is not None and mode not in CONTROL_MODES:
        raise ChannelUriError(f"control-mode {mode!r} must be 'manual' or 'dynamic'")
    if mode == "dynamic" and "control" not in typed:
        raise ChannelUriError("control-mode=dynamic requires a control address")
    if media == UDP_MEDIA and not ("endpoint" in typed or "control" in typed or mode == "manual"):
        raise ChannelUriError("udp channel requires an endpoint (or a control address for MDC)")
    return typed


def _check_tags(tags: str) -> None:
    """`tags=<channel tag>[,<entity tag>]`: 64-bit integers (either may be empty), as Aeron's."""
    parts = tags.split(",")
    if len(parts) > 2 or not all(
        not part or (_INT_RE.fullmatch(part) and _INT64_MIN <= int(part) <= _INT64_MAX)
        for part in parts
    ):
        raise ChannelUriError(
            f"tags {tags!r} must be <channel tag>[,<entity tag>], each a 64-bit integer"
        )


class FlowControlSpec(NamedTuple):
    """A publication's ``fc=`` value: the strategy and its options (None/0: the default)."""

    strategy: str  # max, min or tagged
    timeout_ns: int | None = None
    group_tag: int | None = None
    min_group_size: int = 0


def parse_flow_control(fc: str) -> FlowControlSpec:
    """Aeron's ``fc=`` grammar: ``max``, ``min[,t:<timeout>][,g:/<group-min-size>]`` or
    ``tagged,g:<tag>[/<group-min-size>][,t:<timeout>]``; ChannelUriError naming fc if bad."""
    name, *options = fc.split(",")
    if name not in _FC_STRATEGIES:
        raise ChannelUriError(
            f"unknown flow control strategy {name!r} in fc (expected max, min or tagged)"
        )
    spec = FlowControlSpec(name)
    seen: set[str] = set()
    for option in options:
        key = option[:2]
        group = _FC_GROUP_RE.fullmatch(option) if key == "g:" else None
        if name == "max" or not (key == "t:" or (group and any(group.groups()))):
            raise ChannelUriError(f"bad option {option!r} in fc {fc!r}")
        if key in seen:
            raise ChannelUriError(f"duplicate option {key!r} in fc {fc!r}")
        seen.add(key)
        if group is None:
            spec = spec._replace(timeout_ns=parse_duration_ns("fc", option[2:]))
            continue
        tag, size = group.groups()
        if tag is not None:
            if name != "tagged":
                raise ChannelUriError(f"fc {name!r} takes no group tag: {option!r} in {fc!r}")
            if not _INT64_MIN <= int(tag) <= _INT64_MAX:
                raise ChannelUriError(f"group tag {tag} in fc {fc!r} is not an int64")
            spec = spec._replace(group_tag=int(tag))
        if size is not None:
            if int(size) > limits.INT32_MAX:
                raise ChannelUriError(f"group minimum size {size} in fc {fc!r} is too large")
            spec = spec._replace(min_group_size=int(size))
    if name == "tagged" and spec.group_tag is None:
        raise ChannelUriError(f"fc 'tagged' requires a group tag g:<tag> in {fc!r}")
    return spec


def multicast_group(address: str) -> ipaddress.IPv4Address | None:
    """The IPv4 multicast group of a `host:port` address, None when it is not one."""
    try:
        ip = ipaddress.IPv4Address(split_address("endpoint", address)[0])
    except (ChannelUriError, ValueError):
        return None
    return ip if ip.is_multicast else None


def _uri_text(prefix: str, media: str, params: Mapping[str, str]) -> str:
    text = (f"{prefix}:" if prefix else "") + f"{SCHEME}:{media}"
    return text + ("?" + "|".join(f"{k}={v}" for k, v in params.items()) if params else "")


def _hex_address(address: Address, resolve: Resolver) -> str:
    """`<IP address in hex>-<port>`, as ``UdpChannel.canonicalise`` writes an address."""
    host, port = address
    return f"{ipaddress.ip_address(resolve(host)).packed.hex()}-{port}"


class _Param(Generic[_T]):
    """Read-only accessor for the validated value of one key (None when absent)."""

    def __init__(self, key: str):
        self.key = key
        self.__doc__ = f"validated value of {key!r}, or None"

    @overload
    def __get__(self, obj: None, owner: type) -> _Param[_T]: ...
    @overload
    def __get__(self, obj: ChannelUri, owner: type) -> _T | None: ...
    def __get__(self, obj: ChannelUri | None, owner: type) -> _Param[_T] | _T | None:
        return self if obj is None else obj._values.get(self.key)


class ChannelUri:
    """An immutable, validated Aeron channel URI.

    Equality and hashing ignore the order of params; ``str()`` keeps it.
    """

    __slots__ = ("prefix", "media", "params", "_values", "_text")
    prefix: str
    media: str
    params: Mapping[str, str]
    _values: dict[str, Any]  # the typed values of the params, by key
    _text: str

    def __init__(self, media: str, params: Mapping[str, str] | None = None, prefix: str = ""):
        params = dict(params or {})
        text = _uri_text(prefix, media, params)
        if len(text) > MAX_URI_LENGTH:
            raise ChannelUriError(
                f"channel URI of {len(text)} characters is longer than {MAX_URI_LENGTH} "
                f"(Aeron's limit): {text[:80]}..."
            )
        try:
            values = _validate(prefix, media, params)
        except ChannelUriError as e:
            raise ChannelUriError(f"{e} in {text}") from None
        object.__setattr__(self, "prefix", prefix)
        object.__setattr__(self, "media", media)
        object.__setattr__(self, "params", MappingProxyType(params))
        object.__setattr__(self, "_values", values)
        object.__setattr__(self, "_text", text)

    @classmethod
    def parse(cls, text: str) -> ChannelUri:
        """Parse and validate ``[aeron-spy:]aeron:<media>[?key=value|key=value...]``."""
        if not isinstance(text, str):
            raise ChannelUriError(f"channel URI must be a str, not {type(text).__name__}")
        prefix, rest = "", text
        if rest.startswith(SPY_PREFIX + ":"):
            prefix, rest = SPY_PREFIX, rest[len(SPY_PREFIX) + 1 :]
        if not rest.startswith(SCHEME + ":"):
            raise ChannelUriError(f"channel URI must start with 'aeron:': {text!r}")
        media, has_query, query = rest[len(SCHEME) + 1 :].partition("?")
        params: dict[str, str] = {}
        if has_query:
            if not query:
                raise ChannelUriError(f"empty parameter list in {text}")
            for item in query.split("|"):
                key, has_eq, value = item.partition("=")
                if not item:
                    raise ChannelUriError(f"empty channel parameter in {text}")
                if not has_eq:
                    raise ChannelUriError(f"channel parameter {item!r} has no '=' in {text}")
                if not key:
                    raise ChannelUriError(f"empty key in channel parameter {item!r} in {text}")
                if key in params:
                    raise ChannelUriError(f"duplicate channel parameter {key!r} in {text}")
                params[key] = value
        return cls(media, params, prefix)

    @classmethod
    def build(cls, media: str, *, prefix: str = "", **params: _Value) -> ChannelUri:
        """Build from keywords (``term_length="64k"`` -> ``term-length=64k``); None is skipped."""
        items = {k.replace("_", "-"): _format(v) for k, v in params.items() if v is not None}
        return cls(media, items, prefix)

    def with_params(self, **params: _Value) -> ChannelUri:
        """A copy with params set (keywords as in :meth:`build`); None removes a param."""
        merged = dict(self.params)
        for k, v in params.items():
            if v is None:
                merged.pop(k.replace("_", "-"), None)
            else:
                merged[k.replace("_", "-")] = _format(v)
        return ChannelUri(self.media, merged, self.prefix)

    def get(self, key: str, default: str | None = None) -> str | None:
        """The raw string value of ``key``, or ``default``."""
        return self.params.get(key, default)

    def __contains__(self, key: object) -> bool:
        return key in self.params

    def __setattr__(self, name: str, value: object) -> None:
        raise AttributeError(f"ChannelUri is immutable; cannot set {name!r}")

    def __str__(self) -> str:
        return self._text

    def __reduce__(self) -> tuple[Any, tuple[str]]:
        return (ChannelUri.parse, (self._text,))

    def __repr__(self) -> str:
        return f"ChannelUri.parse({self._text!r})"

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, ChannelUri):
            return NotImplemented
        return (self.prefix, self.media, self.params) == (other.prefix, other.media, other.params)

    def __hash__(self) -> int:
        return hash((self.prefix, self.media, frozenset(self.params.items())))

    @property
    def is_ipc(self) -> bool:
        return self.media == IPC_MEDIA

    @property
    def is_udp(self) -> bool:
        return self.media == UDP_MEDIA

    @property
    def is_spy(self) -> bool:
        return self.prefix == SPY_PREFIX

    @property
    def is_multicast(self) -> bool:
        """A udp channel whose endpoint is an IPv4 multicast (data) group."""
        return self.endpoint is not None and multicast_group(self.endpoint) is not None

    @property
    def is_multi_destination(self) -> bool:
        """No endpoint, but a control address or control-mode=manual: a multi-destination-cast
        publication's channel, or (control-mode=manual alone) a multi-destination
        subscription's."""
        return (
            self.is_udp
            and self.endpoint is None
            and (self.control is not None or self.control_mode == "manual")
        )

    @property
    def multicast_control(self) -> Address:
        """The control group of a multicast channel: the data group's next address."""
        host, port = self.address("endpoint")
        return str(ipaddress.IPv4Address(host) + 1), port

    def address(self, key: str) -> Address:
        """The (host, port) of address param `key` (``endpoint`` or ``control``);
        ChannelUriError naming it when the channel has none."""
        value = self.params.get(key)
        if value is None:
            raise ChannelUriError(f"{self} has no {key} address")
        return split_address(key, value)

    def interface_address(self) -> Address | None:
        """The local address `interface=` names (``host``, ``host:port``, ``[ipv6]`` or
        ``[ipv6]:port``; port 0 when not given), None without one."""
        value = self.interface
        if value is None:
            return None
        if _ADDRESS_RE.fullmatch(value):
            return split_address("interface", value)
        return value.removeprefix("[").removesuffix("]"), 0

    def canonical_form(self, resolve: Resolver, unique_id: int | None = None) -> str:
        """The identity of the channel's media endpoint, what Aeron 1.15's
        ``UdpChannel.canonicalForm()`` gives: ``UDP-<local>-<port>-<remote>-<port>``, each
        address resolved by `resolve` (host -> IP address) and in hex. Local is the interface
        (multicast, unicast) or the control address (multi-destination-cast), else the
        wildcard 0.0.0.0:0; remote is the endpoint, else the wildcard. Params that do not
        make another endpoint (order, mtu, session-id, ...) do not count. A udp channel with
        neither endpoint nor control address (a multi-destination subscription's) is no one
        endpoint: `unique_id` (its registration id) is appended. ``IPC`` for ipc."""
        if self.is_ipc:
            return "IPC"
        wildcard = ("0.0.0.0", 0)
        remote = wildcard if self.endpoint is None else self.address("endpoint")
        if self.control is not None and not self.is_multicast:
            local_key, local = "control", self.address("control")
        else:
            local_key, local = "interface", self.interface_address() or wildcard
        local_hex = self._hex_address(local_key, local, resolve)
        form = f"UDP-{local_hex}-{self._hex_address('endpoint', remote, resolve)}"
        if self.endpoint is None and self.control is None:
            if unique_id is None:
                raise ChannelUriError(f"{self} is no one endpoint: its form needs a unique id")
            form += f"-{unique_id}"
        return form

    def _hex_address(self, key: str, address: Address, resolve: Resolver) -> str:
        """`_hex_address`; an address `resolve` refuses (AeronError) is named by its key."""
        try:
            return _hex_address(address, resolve)
        except AeronError as e:
            raise AeronError(f"{key} {self.params.get(key)!r} of {self}: {e}") from None

    def stripped_channel(self) -> str:
        """The archive's stripped channel (the catalog's ``strippedChannel``, Aeron 1.15's
        ``ArchiveConductor.strippedChannelBuilder``): the media and the params that name the
        source, in ``ChannelUriStringBuilder``'s order; no spy prefix."""
        return _uri_text("", self.media, {k: self.params[k] for k in _STRIPPED_KEYS if k in self})

    def recording_key(self) -> str:
        """What the archive tells recording subscriptions apart by (with the stream id; Aeron
        1.15's ``ArchiveConductor.makeKey``): the media, endpoint, interface, control and tags
        (session-id and alias do not make another recording subscription)."""
        return _uri_text("", self.media, {k: self.params[k] for k in _RECORDING_KEYS if k in self})

    # Typed accessors: validated values, None when the key is absent.
    term_length = _Param[int]("term-length")
    mtu = _Param[int]("mtu")
    initial_term_id = _Param[int]("init-term-id")
    term_id = _Param[int]("term-id")
    term_offset = _Param[int]("term-offset")
    session_id = _Param[int]("session-id")
    linger_ns = _Param[int]("linger")
    sparse = _Param[bool]("sparse")
    reliable = _Param[bool]("reliable")
    ttl = _Param[int]("ttl")
    so_sndbuf = _Param[int]("so-sndbuf")
    so_rcvbuf = _Param[int]("so-rcvbuf")
    rcv_wnd = _Param[int]("rcv-wnd")
    nak_delay_ns = _Param[int]("nak-delay")
    endpoint = _Param[str]("endpoint")
    interface = _Param[str]("interface")
    control = _Param[str]("control")
    control_mode = _Param[str]("control-mode")
    fc = _Param[str]("fc")
    spies_simulate_connection = _Param[bool]("spies-simulate-connection")
    gtag = _Param[int]("gtag")
