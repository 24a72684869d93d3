"""Roles played by current Aeron (1.53: pyaeron's C client and C media driver) in a child process
of the `aeron_c` tests.

Runs on the interpreter of `tests/support/aeron_c.py` (Python 3.12+, pyaeron installed), never
imports aeronio: `python pyaeron_roles.py ROLE JSON-KWARGS`. It talks to the test on stdout, one
`tag payload` line per event (payloads are JSON), and ends its role when its stdin ends. The
payloads of `publish` and `subscribe` come from `payload`, which the tests import too (this module
imports pyaeron only when it runs a role).
"""

from __future__ import annotations

import json
import os
import struct
import sys
import threading
import time
import zlib

POLL_PAUSE_S = 0.0005  # between empty polls: a busy machine must not lose a core to a child


def payload(index: int, size: int) -> bytes:
    """Message `index` of a stream: its index (4 bytes, big-endian) then a pattern of `size`."""
    head = index.to_bytes(4, "big")
    body = bytes((index + i) & 0xFF for i in range(max(0, size - 4)))
    return (head + body)[: max(size, 4)]


def say(tag: str, value: object = None) -> None:
    print(tag if value is None else f"{tag} {json.dumps(value)}", flush=True)


def stdin_closed() -> threading.Event:
    """Set when the test closes this child's stdin (or writes "close")."""
    done = threading.Event()

    def watch() -> None:
        for line in sys.stdin:
            if line.strip() == "close":
                break
        done.set()

    threading.Thread(target=watch, daemon=True).start()
    return done


def connect(pyaeron, dir: str, driver_timeout_ms: int | None = None):
    if driver_timeout_ms is None:
        return pyaeron.Aeron.connect(dir=dir)
    return pyaeron.Aeron.connect(pyaeron.Context(dir=dir, driver_timeout_ms=driver_timeout_ms))


def driver(pyaeron, dir: str, **options) -> None:
    """An Aeron C media driver on `dir` until stdin ends; its directory goes with it."""
    media_driver = pyaeron.MediaDriver(
        dir=dir, threading="shared", dir_delete_on_shutdown=True, **options
    )
    say("ready", {"dir": media_driver.dir, "pid": os.getpid()})
    stdin_closed().wait()
    media_driver.close()
    say("closed")


def publish(
    pyaeron,
    dir: str,
    channel: str,
    stream_id: int,
    count: int,
    sizes: list[int],
    exclusive: bool = False,
    timeout_s: float = 60.0,
) -> None:
    """Offer `count` messages (`payload(i, sizes[i % len(sizes)])`) once connected; stay until
    stdin ends."""
    aeron = connect(pyaeron, dir)
    add = aeron.add_exclusive_publication if exclusive else aeron.add_publication
    publication = add(channel, stream_id)
    say("publication", {"session_id": publication.session_id, "client_id": aeron.client_id})
    publication.await_connected(timeout_s)
    deadline = time.monotonic() + timeout_s
    for i in range(count):
        message = payload(i, sizes[i % len(sizes)])
        while not publication.offer(message):
            if time.monotonic() > deadline:
                say("failed", {"sent": i, "reason": "back-pressured or not connected"})
                return
            time.sleep(POLL_PAUSE_S)
    say("sent", {"count": count, "position": publication.position})
    stdin_closed().wait()
    publication.close()
    aeron.close()


def subscribe(
    pyaeron, dir: str, channel: str, stream_id: int, count: int, timeout_s: float = 60.0
) -> None:
    """Receive `count` messages; say each image that comes and goes, then what was received:
    how many, a CRC-32 of them in order (each as its length, 4 bytes, then its bytes), whether
    their indexes ran 0, 1, 2, ...; stay (saying image events) until stdin ends."""
    events: list[tuple[str, dict]] = []

    def on_available(subscription, image) -> None:
        events.append(("image-available", _image(image)))

    def on_unavailable(subscription, image) -> None:
        events.append(("image-unavailable", _image(image)))

    aeron = connect(pyaeron, dir)
    subscription = aeron.add_subscription(
        channel, stream_id, available_image=on_available, unavailable_image=on_unavailable
    )
    say("subscribed", {"client_id": aeron.client_id})
    received = {"count": 0, "crc": 0, "in_order": True}

    def on_message(buffer, header) -> None:
        data = bytes(buffer)
        if int.from_bytes(data[:4], "big") != received["count"]:
            received["in_order"] = False
        received["crc"] = zlib.crc32(len(data).to_bytes(4, "big") + data, received["crc"])
        received["count"] += 1

    done = stdin_closed()
    deadline = time.monotonic() + timeout_s
    reported = False
    while not done.is_set():
        work = subscription.poll(on_message, 256)
        while events:
            say(*events.pop(0))
        if not reported and received["count"] >= count:
            say("received", received)
            reported = True
        if not reported and time.monotonic() > deadline:
            say("failed", received)
            reported = True
        if not work:
            time.sleep(POLL_PAUSE_S)
    subscription.close()
    aeron.close()


def _image(image) -> dict:
    return {"session_id": image.session_id, "source_identity": image.source_identity}


def attach(pyaeron, dir: str) -> None:
    """A client that only lives (for liveness tests): says its client id, stays until stdin
    ends."""
    aeron = connect(pyaeron, dir)
    say("attached", {"client_id": aeron.client_id, "pid": os.getpid()})
    stdin_closed().wait()
    aeron.close()


def add_publication_error(pyaeron, dir: str, channel: str, stream_id: int = 1) -> None:
    """Try to add a publication on `channel`; say the error (or that none came)."""
    aeron = connect(pyaeron, dir)
    try:
        aeron.add_publication(channel, stream_id)
    except pyaeron.AeronError as e:
        say("error", {"message": str(e)})
    else:
        say("no-error")
    aeron.close()


def add_publications(pyaeron, dir: str, adds: list[list]) -> None:
    """Add the publications of `adds` (each [channel, stream id, exclusive]) in turn, keeping
    those added; say what each was answered (its session id and position, or the error's
    message), then stay until stdin ends."""
    aeron = connect(pyaeron, dir)
    answers: list[dict] = []
    publications = []
    for channel, stream_id, exclusive in adds:
        add = aeron.add_exclusive_publication if exclusive else aeron.add_publication
        try:
            publication = add(channel, stream_id)
        except pyaeron.AeronError as e:
            answers.append({"error": str(e)})
        else:
            publications.append(publication)
            answers.append({"session_id": publication.session_id, "position": publication.position})
    say("answered", answers)
    stdin_closed().wait()
    aeron.close()


class CClient:
    """Aeron's C client through ctypes, for what pyaeron has no API for: started on `dir`;
    `call` raises Aeron's error message for a negative result, `until` polls a condition."""

    def __init__(self, pyaeron, dir: str, error_frames: list | None = None) -> None:
        """`error_frames`: where the client's publication error frame handler puts each frame
        (`_error_frame`)."""
        import ctypes

        self.c = c = ctypes.CDLL(pyaeron._pyaeron.__file__)
        c.aeron_errmsg.restype = ctypes.c_char_p
        context, self.aeron = ctypes.c_void_p(), ctypes.c_void_p()
        self.call("aeron_context_init", ctypes.byref(context))
        self.call("aeron_context_set_dir", context, dir.encode())
        if error_frames is not None:
            handler = ctypes.CFUNCTYPE(None, ctypes.c_void_p, ctypes.c_void_p)
            self._on_error_frame = handler(
                lambda _, frame: error_frames.append(_error_frame(frame))
            )
            self.call("aeron_context_set_publication_error_frame_handler", context,
                      self._on_error_frame, None)  # fmt: skip
        self.call("aeron_init", ctypes.byref(self.aeron), context)
        self.call("aeron_start", self.aeron)

    def call(self, name: str, *args) -> int:
        result = getattr(self.c, name)(*args)
        if result < 0:
            raise RuntimeError(f"{name}: {self.c.aeron_errmsg().decode()}")
        return result

    def until(self, condition, what: str) -> None:
        deadline = time.monotonic() + 30
        while not condition():
            if time.monotonic() > deadline:
                raise TimeoutError(what)
            time.sleep(POLL_PAUSE_S)

    def subscribe(self, channel: str, stream_id: int):
        """A subscription of `channel` and `stream_id`, once the driver made it."""
        import ctypes

        pending, subscription = ctypes.c_void_p(), ctypes.c_void_p()
        self.call("aeron_async_add_subscription", ctypes.byref(pending), self.aeron,
                  channel.encode(), stream_id, None, None, None, None)  # fmt: skip
        self.until(lambda: self.call("aeron_async_add_subscription_poll",
                                     ctypes.byref(subscription), pending),
                   "the subscription")  # fmt: skip
        return subscription

    def first_image(self, subscription) -> tuple:
        """The subscription's first image, once it has one, retained: (image, session id)."""
        import ctypes

        self.c.aeron_subscription_image_at_index.restype = ctypes.c_void_p
        self.until(lambda: self.call("aeron_subscription_image_count", subscription) >= 1,
                   "an image")  # fmt: skip
        image = ctypes.c_void_p(self.c.aeron_subscription_image_at_index(subscription, 0))
        self.call("aeron_subscription_image_retain", subscription, image)
        constants = (ctypes.c_int64 * 9)()  # aeron_image_constants_t: session id @56
        self.call("aeron_image_constants", image, constants)
        return image, ctypes.c_int32.from_buffer(constants, 56).value

    def watch_gone(self, subscription, image, timeout_s: float) -> dict:
        """Wait up to `timeout_s` for the subscription's images to go: whether they went, and
        whether `image` says its publication was revoked."""
        import ctypes

        self.c.aeron_image_is_publication_revoked.restype = ctypes.c_bool
        deadline = time.monotonic() + timeout_s
        count = lambda: self.call("aeron_subscription_image_count", subscription)  # noqa: E731
        while count() and time.monotonic() < deadline:
            time.sleep(POLL_PAUSE_S)
        return {
            "image_gone": count() == 0,
            "image_revoked": bool(self.c.aeron_image_is_publication_revoked(image)),
        }

    def ipc_pair(self, stream_id: int):
        """An IPC subscription of `stream_id` and an exclusive publication of it, once the
        subscription has the publication's image: (subscription, publication, image), the image
        retained."""
        import ctypes

        subscription = self.subscribe("aeron:ipc", stream_id)
        pending, publication = ctypes.c_void_p(), ctypes.c_void_p()
        self.call("aeron_async_add_exclusive_publication", ctypes.byref(pending), self.aeron,
                  b"aeron:ipc", stream_id)  # fmt: skip
        self.until(lambda: self.call("aeron_async_add_exclusive_publication_poll",
                                     ctypes.byref(publication), pending),
                   "the publication")  # fmt: skip
        image, _ = self.first_image(subscription)
        return subscription, publication, image

    def close(self) -> None:
        self.call("aeron_close", self.aeron)


def _error_frame(address: int) -> dict:
    """The fields of an aeron_publication_error_values_t (packed on 4 bytes; its message at 68)."""
    import ctypes

    fields = ctypes.string_at(address, 68)
    (registration_id, destination_registration_id, session_id, stream_id, receiver_id, group_tag,
     address_type, source_port, source_address, error_code, length) = struct.unpack(
        "<qqiiqqhH16sii", fields)  # fmt: skip
    return {
        "registration_id": registration_id,
        "destination_registration_id": destination_registration_id,
        "session_id": session_id,
        "stream_id": stream_id,
        "receiver_id": receiver_id,
        "group_tag": group_tag,
        "address_type": address_type,
        "source_port": source_port,
        "source_address": source_address.hex(),
        "error_code": error_code,
        "error_message": ctypes.string_at(address + 68, length).decode(),
    }


def commands_1_53(pyaeron, dir: str, static_type_id: int, registration_id: int) -> None:
    """Aeron's C client adds the static counter of `static_type_id` and `registration_id` twice,
    removes a manual multi-destination-cast destination by id and closes that publication, and
    asks twice for the next session id of stream 8 (it asks the driver only if the driver's
    "Control protocol version" system counter, id 43, says 1.0.0 or later; else it makes a
    random one); says what it was answered, then stays until stdin ends."""
    import ctypes

    client = CClient(pyaeron, dir)
    c, call, aeron = client.c, client.call, client.aeron
    c.aeron_async_destination_get_registration_id.restype = ctypes.c_int64
    p, key, label = ctypes.c_void_p, b"\x07", b"a static counter"

    def until(poll, *args) -> None:
        client.until(lambda: call(poll, *args), poll)

    counters = []
    for _ in range(2):
        pending, counter = p(), p()
        call("aeron_async_add_static_counter", ctypes.byref(pending), aeron, static_type_id,
             key, ctypes.c_size_t(len(key)), label, ctypes.c_size_t(len(label)),
             ctypes.c_int64(registration_id))  # fmt: skip
        until("aeron_async_add_counter_poll", ctypes.byref(counter), pending)
        constants = (ctypes.c_int64 * 3)()  # aeron_counter_constants_t: counter id @16
        call("aeron_counter_constants", counter, constants)
        counters.append(ctypes.c_int32.from_buffer(constants, 16).value)
    pending, mdc = p(), p()
    call("aeron_async_add_publication", ctypes.byref(pending), aeron,
         b"aeron:udp?control=127.0.0.1:0|control-mode=manual", 8)  # fmt: skip
    until("aeron_async_add_publication_poll", ctypes.byref(mdc), pending)
    destination = p()
    call("aeron_publication_async_add_destination", ctypes.byref(destination), aeron, mdc,
         b"aeron:udp?endpoint=127.0.0.1:9")  # fmt: skip
    registration_id = c.aeron_async_destination_get_registration_id(destination)
    until("aeron_publication_async_destination_poll", destination)
    call("aeron_publication_async_remove_destination_by_id", ctypes.byref(destination), aeron,
         mdc, ctypes.c_int64(registration_id))  # fmt: skip
    until("aeron_publication_async_destination_poll", destination)
    call("aeron_publication_close", mdc, None, None)
    session_ids = []
    for _ in range(2):
        pending, session_id = p(), ctypes.c_int32()
        call("aeron_async_next_session_id", ctypes.byref(pending), aeron, 8)
        until("aeron_async_next_session_id_poll", ctypes.byref(session_id), pending)
        session_ids.append(session_id.value)
    say("answered", {"counter_ids": counters, "session_ids": session_ids})
    stdin_closed().wait()
    client.close()


def revoke_ipc(pyaeron, dir: str, stream_id: int, count: int, timeout_s: float) -> None:
    """Subscribe to IPC `stream_id`, offer `count` messages on an exclusive publication of it
    without reading them, revoke the publication (aeron_exclusive_publication_revoke), then wait
    up to `timeout_s` for the image to go, still unread; say whether it went and whether the
    image says it was revoked."""
    import ctypes

    client = CClient(pyaeron, dir)
    c, call, until = client.c, client.call, client.until
    c.aeron_exclusive_publication_offer.restype = ctypes.c_int64
    subscription, publication, image = client.ipc_pair(stream_id)
    message = b"x" * 100
    for _ in range(count):
        until(lambda: c.aeron_exclusive_publication_offer(publication, message, len(message),
                                                          None, None) > 0, "an offer")  # fmt: skip
    call("aeron_exclusive_publication_revoke", publication, None, None)
    say("revoked", client.watch_gone(subscription, image, timeout_s))
    stdin_closed().wait()
    client.close()


def revoke_publication(pyaeron, dir: str, channel: str, stream_id: int, count: int) -> None:
    """Add an exclusive publication of `channel` and `stream_id`; once connected, offer `count`
    messages, say its session id, and revoke it when told "revoke" on stdin (then say so); stay
    until stdin ends."""
    import ctypes

    client = CClient(pyaeron, dir)
    c, call, until, aeron = client.c, client.call, client.until, client.aeron
    c.aeron_exclusive_publication_offer.restype = ctypes.c_int64
    c.aeron_exclusive_publication_is_connected.restype = ctypes.c_bool
    pending, publication = ctypes.c_void_p(), ctypes.c_void_p()
    call("aeron_async_add_exclusive_publication", ctypes.byref(pending), aeron, channel.encode(),
         stream_id)  # fmt: skip
    until(lambda: call("aeron_async_add_exclusive_publication_poll", ctypes.byref(publication),
                       pending), "the publication")  # fmt: skip
    until(lambda: c.aeron_exclusive_publication_is_connected(publication), "a subscriber")
    message = b"x" * 100
    for _ in range(count):
        until(lambda: c.aeron_exclusive_publication_offer(publication, message, len(message),
                                                          None, None) > 0, "an offer")  # fmt: skip
    constants = (ctypes.c_int64 * 12)()  # aeron_publication_constants_t: session id @68
    call("aeron_exclusive_publication_constants", publication, constants)
    say("offered", {"session_id": ctypes.c_int32.from_buffer(constants, 68).value})
    for line in sys.stdin:
        if line.strip() == "revoke":
            break
    call("aeron_exclusive_publication_revoke", publication, None, None)
    say("revoked")
    stdin_closed().wait()
    client.close()


def watch_image(pyaeron, dir: str, channel: str, stream_id: int, timeout_s: float) -> None:
    """Subscribe to `channel` and `stream_id` and read nothing; once an image came, say its
    session id, then wait up to `timeout_s` for it to go; say whether it went and whether it
    says its publication was revoked (aeron_image_is_publication_revoked)."""
    client = CClient(pyaeron, dir)
    subscription = client.subscribe(channel, stream_id)
    image, session_id = client.first_image(subscription)
    say("image", {"session_id": session_id})
    say("watched", client.watch_gone(subscription, image, timeout_s))
    client.call("aeron_subscription_image_release", subscription, image)
    stdin_closed().wait()
    client.close()


def _local_sockaddrs(client: CClient, function: str, handle) -> list[str]:
    """What `function` (aeron_subscription_local_sockaddrs, aeron_publication_local_sockaddrs)
    finds for `handle`: up to 4 addresses."""
    import ctypes

    class Iovec(ctypes.Structure):  # aeron_iovec_t
        _fields_ = [("iov_base", ctypes.c_void_p), ("iov_len", ctypes.c_size_t)]

    buffers = [ctypes.create_string_buffer(128) for _ in range(4)]
    vector = (Iovec * len(buffers))(*(Iovec(ctypes.addressof(b), len(b)) for b in buffers))
    found = client.call(function, handle, vector, ctypes.c_size_t(len(buffers)))
    return [buffer.value.decode() for buffer in buffers[:found]]


def channel_status(pyaeron, dir: str, channel: str, stream_id: int) -> None:
    """Aeron's C client subscribes on `channel` (its endpoint's port may be 0) and publishes to
    the first local address the subscription finds (aeron_subscription_local_sockaddrs; to
    `channel` if none); says the channel status each reads (aeron_*_channel_status), the local
    addresses each finds and the message the subscription received from the publication, then
    stays until stdin ends."""
    import ctypes

    client = CClient(pyaeron, dir)
    c, call, until, aeron = client.c, client.call, client.until, client.aeron
    c.aeron_subscription_channel_status.restype = ctypes.c_int64
    c.aeron_publication_channel_status.restype = ctypes.c_int64
    c.aeron_publication_offer.restype = ctypes.c_int64
    p = ctypes.c_void_p
    subscription = client.subscribe(channel, stream_id)
    subscription_addresses = _local_sockaddrs(
        client, "aeron_subscription_local_sockaddrs", subscription
    )
    target = subscription_addresses[:1]
    uri = (f"aeron:udp?endpoint={target[0]}" if target else channel).encode()
    pending, publication = p(), p()
    call("aeron_async_add_publication", ctypes.byref(pending), aeron, uri, stream_id)
    until(lambda: call("aeron_async_add_publication_poll", ctypes.byref(publication), pending),
          "the publication")  # fmt: skip
    message = b"to the bound port"
    until(lambda: c.aeron_publication_offer(publication, message, len(message), None, None) > 0,
          "an offer")  # fmt: skip
    received: list[bytes] = []
    handler_type = ctypes.CFUNCTYPE(None, p, p, ctypes.c_size_t, p)
    handler = handler_type(
        lambda _, data, length, __: received.append(ctypes.string_at(data, length))
    )
    until(lambda: call("aeron_subscription_poll", subscription, handler, None, 10) > 0,
          "the message")  # fmt: skip
    say("status", {
        "subscription": c.aeron_subscription_channel_status(subscription),
        "publication": c.aeron_publication_channel_status(publication),
        "subscription_addresses": subscription_addresses,
        "publication_addresses": _local_sockaddrs(
            client, "aeron_publication_local_sockaddrs", publication
        ),
        "received": received[0].decode(),
    })  # fmt: skip


def reject_ipc_image(pyaeron, dir: str, stream_id: int, reason: str) -> None:
    """Subscribe to IPC `stream_id` and add an exclusive publication of it, the publication
    error frame handler set; reject the image (aeron_image_reject); say the frames the handler
    got once the image went, whether the publication was connected then, and the publication's
    registration id, once the image came back (the driver's cool-down over)."""
    import ctypes

    frames: list[dict] = []
    client = CClient(pyaeron, dir, frames)
    c, call, until = client.c, client.call, client.until
    c.aeron_exclusive_publication_is_connected.restype = ctypes.c_bool
    subscription, publication, image = client.ipc_pair(stream_id)
    constants = (ctypes.c_int64 * 16)()  # aeron_publication_constants_t: registration id @8
    call("aeron_exclusive_publication_constants", publication, constants)
    call("aeron_image_reject", image, reason.encode())
    until(lambda: call("aeron_subscription_image_count", subscription) == 0, "the image to go")
    until(lambda: frames, "the error frame")
    connected = c.aeron_exclusive_publication_is_connected(publication)
    call("aeron_subscription_image_release", subscription, image)
    until(lambda: call("aeron_subscription_image_count", subscription) == 1, "the image again")
    say("rejected", {"frames": frames, "connected": connected, "registration_id": constants[1]})
    stdin_closed().wait()
    client.close()


def reject_image(pyaeron, dir: str, channel: str, stream_id: int, reason: str) -> None:
    """Subscribe to `channel` and `stream_id`; reject the first image (aeron_image_reject) and
    say its session id; then stay until stdin ends."""
    client = CClient(pyaeron, dir)
    subscription = client.subscribe(channel, stream_id)
    say("subscribed")
    image, session_id = client.first_image(subscription)
    client.call("aeron_image_reject", image, reason.encode())
    say("rejected", {"session_id": session_id})
    client.call("aeron_subscription_image_release", subscription, image)
    stdin_closed().wait()
    client.close()


def request_termination(pyaeron, dir: str, token: str) -> None:
    """Ask the driver of `dir` to terminate as Aeron's tools do (aeron_context_request_driver_
    termination: a TERMINATE_DRIVER naming a client id of its own, through ctypes: pyaeron has
    no API for it); say that it was asked."""
    import ctypes

    c = ctypes.CDLL(pyaeron._pyaeron.__file__)
    data = token.encode()
    if c.aeron_context_request_driver_termination(dir.encode(), data, len(data)) != 1:
        raise RuntimeError(f"no termination request written to {dir}")
    say("requested")


def tagged(tag: str, index: int) -> bytes:
    """Message `index` of the publisher `tag` in the tagged roles (aeronio's too)."""
    return f"{tag}:{index}:".encode() + bytes(index % 300)


def check_tagged(data: bytes, next_index: dict[str, int]) -> str | None:
    """Count a tagged message in `next_index` (tag -> next expected index); an error, if any."""
    tag, _, rest = data.partition(b":")
    index = int(rest.partition(b":")[0] or -1)
    expected = next_index.get(tag.decode(errors="replace"))
    if expected is None or index != expected or data != tagged(tag.decode(), index):
        return f"{data[:40]!r}: expected index {expected}"
    next_index[tag.decode()] = index + 1
    return None


def publish_tagged(pyaeron, dir: str, channel: str, stream_id: int, tag: str, count: int) -> None:
    """Once connected and told "go" on stdin, offer `count` tagged messages; stay until stdin
    ends."""
    aeron = connect(pyaeron, dir)
    publication = aeron.add_publication(channel, stream_id)
    publication.await_connected(60)
    say("connected", {"session_id": publication.session_id})
    sys.stdin.readline()
    for i in range(count):
        while not publication.offer(tagged(tag, i)):
            time.sleep(POLL_PAUSE_S)
    say("sent", {"count": count})
    stdin_closed().wait()
    publication.close()
    aeron.close()


def subscribe_tagged(
    pyaeron, dir: str, channel: str, stream_id: int, counts: dict[str, int], timeout_s: float = 60
) -> None:
    """Receive every tagged message of `counts` (tag -> count), checking each publisher's
    order; say what was received (tag -> count, errors)."""
    aeron = connect(pyaeron, dir)
    subscription = aeron.add_subscription(channel, stream_id)
    say("subscribed")
    next_index = dict.fromkeys(counts, 0)
    errors: list[str] = []

    def on_message(buffer, header) -> None:
        error = check_tagged(bytes(buffer), next_index)
        if error is not None and len(errors) < 10:
            errors.append(error)

    deadline = time.monotonic() + timeout_s
    while next_index != counts and not errors and time.monotonic() < deadline:
        if not subscription.poll(on_message, 256):
            time.sleep(POLL_PAUSE_S)
    say("received", {"counts": next_index, "errors": errors})
    stdin_closed().wait()
    subscription.close()
    aeron.close()


ROLES = {
    "publish_tagged": publish_tagged,
    "subscribe_tagged": subscribe_tagged,
    "driver": driver,
    "publish": publish,
    "subscribe": subscribe,
    "attach": attach,
    "add_publication_error": add_publication_error,
    "add_publications": add_publications,
    "commands_1_53": commands_1_53,
    "request_termination": request_termination,
    "revoke_ipc": revoke_ipc,
    "revoke_publication": revoke_publication,
    "watch_image": watch_image,
    "channel_status": channel_status,
    "reject_ipc_image": reject_ipc_image,
    "reject_image": reject_image,
}


def main() -> None:
    import pyaeron

    role, kwargs = sys.argv[1], json.loads(sys.argv[2])
    try:
        ROLES[role](pyaeron, **kwargs)
    except Exception as e:  # say it on stdout too: the test waits for lines, not for stderr
        say("exception", {"type": type(e).__name__, "message": str(e)})
        raise


if __name__ == "__main__":
    main()
