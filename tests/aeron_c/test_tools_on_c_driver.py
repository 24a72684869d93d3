"""aeronio's tools read the directory of Aeron's C media driver (1.53) as they read aeronio's: its
cnc.dat (counters, heartbeat, error log) and loss report."""

import re

from tests.support.procs import aeronio_cmd

UDP = "aeron:udp?endpoint=127.0.0.1:{port}"
COUNT, SIZE = 100, 100
POSITION = COUNT * 160  # each 100-byte message takes a 32-byte header, aligned to 32


def test_stat_errors_streams_and_loss_read_a_c_drivers_directory(aeron_c, free_port):
    dir = aeron_c.new_dir()
    driver = aeron_c.pyaeron("driver", dir=dir)
    driver_pid = driver.expect_json("ready", 30)["pid"]
    channel = UDP.format(port=free_port)
    subscriber = aeron_c.pyaeron("subscribe", dir=dir, channel=channel, stream_id=7, count=COUNT)
    subscriber.expect("subscribed", 30)
    publisher = aeron_c.pyaeron(
        "publish", dir=dir, channel=channel, stream_id=7, count=COUNT, sizes=[SIZE]
    )
    assert publisher.expect_json("sent", 60)["position"] == POSITION
    assert subscriber.expect_json("received", 60)["in_order"]
    failing = aeron_c.pyaeron("add_publication_error", dir=dir, channel="aeron:udp?endpoint=nope")
    assert "endpoint=nope" in failing.expect_json("error", 30)["message"]

    stat = aeronio_cmd("stat", "--dir", dir)
    assert stat.returncode == 0, stat.stderr
    lines = stat.stdout.splitlines()
    assert re.match(
        rf"\S+ - aeronio stat \(CnC 0\.2\.0\), pid {driver_pid}, heartbeat age", lines[0]
    )
    assert not any("NOT RUNNING" in line for line in lines)
    values = {label.strip(): int(value.replace(",", "")) for value, label in _counters(lines)}
    assert values["Bytes sent"] >= POSITION and values["Bytes received"] >= POSITION
    assert any(label.startswith("sub-pos") for label in values)

    errors = aeronio_cmd("errors", "--dir", dir)
    assert errors.returncode == 0, errors.stderr
    assert "endpoint=nope" in errors.stdout and "1 distinct errors observed." in errors.stdout

    streams = aeronio_cmd("streams", "--dir", dir)
    assert streams.returncode == 0, streams.stderr
    assert re.search(rf"session -?\d+ stream 7 {re.escape(channel)}", streams.stdout)
    assert f"rcv-pos {POSITION:,}" in streams.stdout

    loss = aeronio_cmd("loss", "--dir", dir)
    assert loss.returncode == 0, loss.stderr
    assert "0 entries read" in loss.stdout

    for child in (publisher, subscriber):
        child.release()
        child.wait(30)
    driver.release()
    driver.expect("closed", 30)
    assert aeronio_cmd("stat", "--dir", dir).returncode != 0  # the driver took its directory


def _counters(lines: list[str]) -> list[tuple[str, str]]:
    """(value, label) of each counter line `  id:      value - label`."""
    return [m.groups() for line in lines if (m := re.match(r"\s*\d+:\s+([\d,-]+) - (.*)", line))]
