"""ClientProxy's answers that carry text: cut to fit a message of the broadcast buffer."""

from aeronio.driver.client_proxy import MAX_ERROR_LENGTH, ClientProxy
from aeronio.protocol import control as p


def test_an_error_quoting_a_long_argument_is_cut_to_fit_a_response():
    """An ErrorResponse over MAX_ERROR_LENGTH characters is cut, saying how much more there
    was; one that fits goes whole."""
    sent: list[p.Response] = []
    long = "destination 'aeron:ipc?alias=" + "x" * 100_000 + "' is refused"
    ClientProxy.error(sent.append, 7, p.INVALID_CHANNEL, long)
    ClientProxy.error(sent.append, 8, p.INVALID_CHANNEL, "short")
    assert sent == [
        p.ErrorResponse(
            7,
            p.INVALID_CHANNEL,
            long[:MAX_ERROR_LENGTH] + f"... ({len(long) - MAX_ERROR_LENGTH} more)",
        ),
        p.ErrorResponse(8, p.INVALID_CHANNEL, "short"),
    ]
