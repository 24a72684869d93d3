"""examples/chat end to end: chat servers as processes (each its own embedded driver) forming
one room over UDP, talked to over their WebSockets and in chromium.

What is checked: every server shows every entry once, in one order (positions increasing, each
text once); a server that joins late shows the whole history first, then live entries, with no
gap and no duplicate; bad input is refused with a message and the room goes on.
"""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import aiohttp
import msgspec
import pytest

import aeronio
from tests.support.child import Child
from tests.support.ports import free_ports

CHAT = Path(__file__).parents[2] / "examples" / "chat"
pytestmark = pytest.mark.slow


def server(*args: str) -> tuple[Child, str, str]:
    """A chat server process, its URL and (for a home) its room's spec; stopped if it does not
    say them."""
    child = Child([sys.executable, str(CHAT / "server.py"), *args], "chat server")
    try:
        room = child.expect("room: ", 60) if "--home" in args else ""  # a process start, loaded
        url = child.expect("chat server ", 60).split()[-1]
    except BaseException:
        child.stop()
        raise
    return child, url, room


async def talk(
    url: str, user: str
) -> tuple[aiohttp.ClientSession, aiohttp.ClientWebSocketResponse]:
    session = aiohttp.ClientSession()
    socket = await session.ws_connect(f"{url}ws?user={user}")
    return session, socket


async def receive(socket, count: int, timeout: float = 60) -> tuple[dict, list[dict]]:
    """The history message and the next `count` live entries."""
    async with asyncio.timeout(timeout):
        history = json.loads((await socket.receive()).data)
        assert history["type"] == "history"
        live = []
        while len(live) < count:
            message = json.loads((await socket.receive()).data)
            assert message["type"] == "entry", message
            live.append(message["entry"])
    return history, live


def in_one_order(entries: list[dict]) -> None:
    positions = [entry["position"] for entry in entries]
    assert positions == sorted(set(positions)), "positions increase, none twice"


async def entries_until(
    socket, text: str | Callable[[str], bool], timeout: float = 60
) -> list[dict]:
    """Live entries up to and with the first whose text is `text` (or passes it)."""
    wanted = text if callable(text) else text.__eq__
    got = []
    async with asyncio.timeout(timeout):
        while not got or not wanted(got[-1]["text"]):
            message = json.loads((await socket.receive()).data)
            assert message["type"] == "entry", message
            got.append(message["entry"])
    return got


@pytest.mark.parametrize("transport", ["multicast", "mdc"])
async def test_two_servers_talk_and_a_late_joiner_shows_the_history_first(transport):
    """Alice on the home and Bob on a second server say 300 lines each at once: both see the
    600 in one order. While Alice goes on talking, a third server joins: Carol on it gets the
    history (several terms of the room stream, replayed) and then the live entries, and the
    whole is exactly what Alice saw: no gap, no duplicate at the merge."""
    home, home_url, room = server("--home", "--name", "one", "--transport", transport)
    two = late = None
    sessions = []
    try:
        two, two_url, _ = server("--join", room, "--name", "two")
        (s1, alice), (s2, bob) = await talk(home_url, "alice"), await talk(two_url, "bob")
        sessions += [s1, s2]
        line = "." * 100  # 600 entries fill more than a term (64 KiB) of the room stream
        said = {("alice", f"a{i}{line}") for i in range(300)}
        said |= {("bob", f"b{i}{line}") for i in range(300)}

        async def say(socket, user):
            for i in range(300):
                await socket.send_json({"text": f"{user[0]}{i}{line}"})

        seen = await asyncio.gather(
            receive(alice, 600), receive(bob, 600), say(alice, "alice"), say(bob, "bob")
        )
        (history_a, live_a), (history_b, live_b) = seen[0], seen[1]
        assert history_a["entries"] == history_b["entries"] == []
        assert live_a == live_b, "both servers show the room in one order"
        in_one_order(live_a)
        assert {(e["user"], e["text"]) for e in live_a} == said and len(live_a) == 600
        assert {e["server"] for e in live_a} == {"one", "two"}
        assert live_a[-1]["position"] > 65536

        async def chatter():
            for i in range(10_000):
                await alice.send_json({"text": f"meanwhile {i}"})
                await asyncio.sleep(0.005)

        talking = asyncio.create_task(chatter())
        late, late_url, _ = await asyncio.to_thread(server, "--join", room, "--name", "three")
        s3, carol = await talk(late_url, "carol")
        sessions.append(s3)
        history_c = json.loads((await carol.receive()).data)
        assert history_c["type"] == "history" and history_c["server"] == "three"
        # Alice's lines keep coming: live ones for Carol too, before she says hello
        live_c = await entries_until(carol, lambda text: text.startswith("meanwhile"))
        await carol.send_json({"text": "hello from three"})
        live_c += await entries_until(carol, "hello from three")
        talking.cancel()
        after_a = await entries_until(alice, "hello from three")
        assert history_c["entries"][:600] == live_a, "the history first, as the others saw it"
        assert history_c["entries"] + live_c == live_a + after_a, "no gap, no duplicate"
        assert live_c[-1]["server"] == "three"
        in_one_order(live_a + after_a)
        for part in (history_c["entries"][600:], live_c):  # the merge met a busy room
            assert any(e["text"].startswith("meanwhile") for e in part)
    finally:
        for session in sessions:
            await session.close()
        for child in (late, two, home):
            if child is not None:
                child.stop()
    for child in (late, two, home):
        assert child.wait() == 128 + 15, child.describe()  # SIGTERM: closed, then exited


async def test_bad_input_is_refused_with_a_message_and_the_room_goes_on():
    """Bad names and messages from browsers are refused with a message; posts that are no
    posts, sent straight to the home's sequencer, are logged and dropped; another session on the
    room's multicast group is not the room. The room goes on; nothing crashes."""
    home, url, room = server("--home", "--name", "one")
    session = aiohttp.ClientSession()
    try:
        nobody = await session.ws_connect(f"{url}ws?user=")
        refused = json.loads((await nobody.receive()).data)
        assert refused == {"type": "error", "message": "user: 1 to 32 characters"}
        socket = await session.ws_connect(f"{url}ws?user=dave")
        assert json.loads((await socket.receive()).data)["entries"] == []
        for bad, why in (("not json", "not sent: "), (json.dumps({"text": "x" * 1001}), "text:")):
            await socket.send_str(bad)
            message = json.loads((await socket.receive()).data)
            assert message["type"] == "error" and why in message["message"], message
        host, posts_port, room_port = room.split(":")[:3]
        async with aeronio.connect() as aeron:
            rogue = await aeron.add_publication(f"aeron:udp?endpoint={host}:{posts_port}", 1001)
            await rogue.offer(b"\xff garbage", timeout=10)
            await rogue.offer(msgspec.json.encode({"user": "", "text": "x", "server": "?"}))
            await rogue.offer(msgspec.json.encode({"user": "u", "text": "x", "server": "s" * 40}))
            intruder = await aeron.add_publication(
                f"aeron:udp?endpoint=224.0.1.21:{room_port}|interface={host}", 1002
            )
            await intruder.offer(b"\xff not an entry", timeout=10)
            await intruder.offer(
                msgspec.json.encode({"user": "x", "text": "fake", "server": "x", "at": 0})
            )
            async with asyncio.timeout(10):
                while home.stderr.count("dropped a post") < 3:
                    await asyncio.sleep(0.05)
            await socket.send_json({"text": "still here"})
            async with asyncio.timeout(10):
                message = json.loads((await socket.receive()).data)
        assert message["entry"]["text"] == "still here"
    finally:
        await session.close()
        home.stop()
    assert home.wait() == 128 + 15, home.describe()
    assert home.stderr.count("dropped a post") == 3, home.describe()


@pytest.mark.parametrize(
    ("args", "status", "said"),
    [
        (["--home", "--port", "99999"], 2, "server.py: error: --port: 0 to 65535, not 99999"),
        (["--home", "--host", "nosuch.invalid"], 2, "server.py: error: --host nosuch.invalid: "),
        (
            ["--join", "SPEC"],  # a room no home serves, its ports chosen in the test
            1,
            "server.py: no room's home answers on aeron:udp?endpoint=127.0.0.1:",
        ),
    ],
    ids=["port", "host", "no home"],
)
def test_bad_flags_and_an_absent_home_are_one_line(args, status, said):
    """One line, not a traceback (an ExceptionGroup of the web server's bind, an OSError of a
    probe's bind, a TimeoutError of an offer "not connected at position 0")."""
    spec = "127.0.0.1:{}:{}:{}:multicast".format(*free_ports(3))
    args = [spec if arg == "SPEC" else arg for arg in args]
    ran = subprocess.run(
        [sys.executable, str(CHAT / "server.py"), *args],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert ran.returncode == status, ran.stderr
    assert ran.stderr.splitlines()[-1].startswith(said), ran.stderr
    assert "Traceback" not in ran.stderr


def test_a_browser_too_far_behind_is_dropped_and_the_others_go_on():
    """The room never waits for a browser: one that falls `backlog` entries behind is dropped
    (its writer closes the socket), the others still get every entry."""
    sys.path.insert(0, str(CHAT))
    try:
        from server import Room
    finally:
        sys.path.remove(str(CHAT))

    async def scenario():
        room = Room(backlog=5)
        _, slow = room.join()
        _, fast = room.join()
        for i in range(8):
            room.add({"text": str(i)})
            while not fast.empty():
                fast.get_nowait()
        assert [slow.get_nowait()["text"] for _ in range(5)] == list("01234")
        assert slow.get_nowait() is None and slow.empty()  # then the end: nothing after
        assert room.browsers == {fast}

    asyncio.run(scenario())


def test_demo_rooms_two_browsers_and_a_late_server_shows_the_history(browser, artifacts):
    """The one command: two URLs; two pages talk; a server added late shows the history."""
    demo = Child([sys.executable, str(CHAT / "demo.py")], "chat demo")
    late = None
    try:
        urls = [demo.expect("open ", 60).strip(), demo.expect("open ", 30).strip()]
        room = demo.expect("room: ", 30).strip()
        alice, bob = browser.new_page(), browser.new_page()
        alice.goto(f"{urls[0]}?user=alice")
        bob.goto(urls[1])
        bob.fill("#user", "bob")
        bob.click("#who button")
        for page in (alice, bob):
            page.wait_for_selector("#status[data-state=joined]")
        alice.fill("#text", "hello from alice")
        alice.press("#text", "Enter")
        bob.wait_for_selector("#messages li:has-text('hello from alice')")
        bob.fill("#text", "hi alice, bob here")
        bob.click("#send")
        alice.wait_for_selector("#messages li:has-text('bob here')")
        expected = ["alice: hello from alice via server-1", "bob: hi alice, bob here via server-2"]
        for page in (alice, bob):
            assert texts(page) == expected
        alice.screenshot(path=str(artifacts / "chat-alice.png"))

        late, late_url, _ = server("--join", room, "--name", "server-3")
        carol = browser.new_page()
        carol.goto(f"{late_url}?user=carol")
        carol.wait_for_selector("#status[data-state=joined]")
        assert texts(carol) == expected, "history first"
        assert "carol on server-3: 2 earlier" in carol.inner_text("#status")
        carol.fill("#text", "carol, late but all caught up")
        carol.press("#text", "Enter")
        for page in (alice, bob, carol):
            page.wait_for_selector("#messages li:has-text('all caught up')")
            assert texts(page)[-1] == "carol: carol, late but all caught up via server-3"
            assert positions(page) == sorted(set(positions(page)))
        carol.screenshot(path=str(artifacts / "chat-late-joiner.png"))
    finally:
        if late is not None:
            late.stop()
        demo.stop()


def test_a_line_typed_while_the_page_is_disconnected_stays_and_says_so(browser):
    """The server gone, the page rejoins after a pause with its form still up: a line sent then
    is refused in the page, kept in its box (before, the closed socket threw it away and the
    box was cleared, with no word), and the rejoin is tried until it works."""
    home, url, _ = server("--home", "--name", "one")
    try:
        page = browser.new_page()
        page.goto(f"{url}?user=alice")
        page.wait_for_selector("#status[data-state=joined]")
        home.stop()
        page.wait_for_selector("#status:has-text('joining again')")
        page.fill("#text", "said while away")
        page.press("#text", "Enter")
        assert page.input_value("#text") == "said while away"
        assert page.inner_text("#error").startswith("not sent: not connected (joining again)")
        # A rejoin that fails (nothing listens) is tried again, as the page says: before, the
        # page gave up after one, its form still up, still saying it was joining again.
        page.wait_for_selector("#status:has-text('(1006): joining again')", timeout=15_000)
    finally:
        home.stop()


def texts(page) -> list[str]:
    """The entries shown: `user: text via server` (the time left out)."""
    return page.eval_on_selector_all(
        "#messages li",
        "items => items.map(i => ['.user', '.text', '.server']"
        ".map(part => i.querySelector(part).textContent).join(''))",
    )


def positions(page) -> list[int]:
    return [int(p) for p in page.eval_on_selector_all("li", "i => i.map(x => x.dataset.position)")]
