"""A client of a driver's cnc.dat as Aeron's clients are, for the tests of the driver's side:
commands written to the to-driver ring buffer, responses read from the broadcast buffer."""

from aeronio.cnc import CncFile
from aeronio.concurrent.broadcast import CopyBroadcastReceiver
from aeronio.counters import CountersReader
from aeronio.protocol import control as p
from tests.support.procs import await_until

TIMEOUT_S = 30


class RingClient:
    """A client as Aeron's: its id from the ring buffer's correlation counter, commands written to
    the ring buffer, responses read from the broadcast buffer (no doorbell rung)."""

    def __init__(self, dir: str):
        self.cnc = CncFile.map(dir)
        self.receiver = CopyBroadcastReceiver(self.cnc.to_clients_buffer)
        self.counters = CountersReader.of(self.cnc)
        self.client_id = self.next_id()
        self.seen: list[p.Response] = []

    def next_id(self) -> int:
        return self.cnc.to_driver.next_correlation_id()

    def write(self, msg_type_id: int, payload: bytes) -> None:
        assert self.cnc.to_driver.write(msg_type_id, payload)

    def send(self, command: p.Command) -> None:
        self.write(*p.encode(command))

    def poll(self) -> list[p.Response]:
        """Every response seen so far (those transmitted since, read now)."""
        while self.receiver.receive(
            lambda type_id, payload: self.seen.append(p.decode_response(type_id, payload))
        ):
            pass
        return self.seen

    async def expect(self, match, what: str) -> p.Response:
        """The first response seen for which `match(response)` holds."""

        def found():
            self.poll()
            return next((r for r in self.seen if match(r)), None)

        return await await_until(found, TIMEOUT_S, what)

    async def answer(self, correlation_id: int) -> p.Response:
        """The answer to the command of `correlation_id`: not an image's notice, which carries
        its image's id (an IPC image's is its publication's, the first add's correlation id)."""
        return await self.expect(
            lambda r: (
                getattr(r, "correlation_id", None) == correlation_id
                and not isinstance(r, p.ImageReady | p.ImageUnavailable)
            ),
            f"the answer to {correlation_id}",
        )

    def close(self) -> None:
        self.counters.close()
        self.cnc.close()
