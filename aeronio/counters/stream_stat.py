"""Per-stream positions and backlogs from a driver's counters (Aeron's StreamStat and
BacklogStat), with the memory each stream's log takes.

Rules
- A stream is a (session id, stream id) pair; its counters are the driver's stream counters
  (labels `<kind>: <registration id> <session id> <stream id> <channel>`, see
  driver/stream_counters.py): pub-pos, pub-lmt, snd-pos, snd-lmt of a publication, rcv-hwm and
  rcv-pos of an image, one sub-pos per subscriber.
- Backlogs: the sender's is pub-pos - snd-pos (written, not yet sent); the receiver's is
  rcv-hwm - rcv-pos (received, not yet contiguous); a subscriber's is what it has left to read,
  rcv-pos - sub-pos on an image and pub-pos - sub-pos on an IPC log.
- A log's memory: its file's length (mapped) and its allocated blocks (taken).
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass, field

from aeronio.counters.counters_file import CountersReader
from aeronio.protocol import layout

_LABEL = re.compile(
    r"^(pub-lmt|pub-pos \(sampled\)|snd-pos|snd-lmt|rcv-hwm|rcv-pos|sub-pos): "
    r"(-?\d+) (-?\d+) (-?\d+) (.*?)( @-?\d+)?$"
)
_KIND = {"pub-pos (sampled)": "pub-pos"}


@dataclass
class Stream:
    """What the counters say of one stream."""

    session_id: int
    stream_id: int
    channel: str = ""
    positions: dict[str, int] = field(default_factory=dict)  # pub-pos, snd-pos, rcv-hwm, ...
    subscribers: dict[int, int] = field(default_factory=dict)  # subscription id -> sub-pos
    logs: list[tuple[str, int, int]] = field(default_factory=list)  # (file, mapped, taken)

    def backlogs(self) -> dict[str, int]:
        """Sender, receiver and each subscriber's backlog, where the counters allow."""
        p = self.positions
        out = {}
        if "pub-pos" in p and "snd-pos" in p:
            out["sender"] = p["pub-pos"] - p["snd-pos"]
        if "rcv-hwm" in p and "rcv-pos" in p:
            out["receiver"] = p["rcv-hwm"] - p["rcv-pos"]
        read_from = p.get("rcv-pos", p.get("pub-pos"))
        if read_from is not None:
            for subscription_id, position in self.subscribers.items():
                out[f"sub {subscription_id}"] = read_from - position
        return out


def streams(reader: CountersReader, driver_dir: str) -> list[Stream]:
    """Every stream the counters show, by session and stream id."""
    found: dict[tuple[int, int], Stream] = {}
    for info in reader.for_each():
        match = _LABEL.match(info.label)
        if match is None:
            continue
        kind, registration, session, stream_id, channel, _ = match.groups()
        kind = _KIND.get(kind, kind)
        key = (int(session), int(stream_id))
        stream = found.setdefault(key, Stream(*key))
        if kind == "sub-pos":
            stream.subscribers[int(registration)] = info.value
            continue
        stream.positions[kind] = info.value
        if kind in ("pub-pos", "rcv-pos"):
            stream.channel = stream.channel or channel
            log = (layout.publication_log if kind == "pub-pos" else layout.image_log)(
                driver_dir, int(registration)
            )
            try:
                st = os.stat(log)
            except OSError:
                continue
            stream.logs.append((log, st.st_size, st.st_blocks * 512))
    return sorted(found.values(), key=lambda s: (s.stream_id, s.session_id))


def format_streams(found: list[Stream]) -> list[str]:
    """StreamStat-style lines: one block per stream."""
    lines = []
    for s in found:
        lines.append(f"session {s.session_id} stream {s.stream_id} {s.channel}".rstrip())
        shown = ["pub-pos", "pub-lmt", "snd-pos", "snd-lmt", "rcv-hwm", "rcv-pos"]
        positions = [f"{k} {s.positions[k]:,}" for k in shown if k in s.positions]
        positions += [f"sub-pos({sub}) {pos:,}" for sub, pos in sorted(s.subscribers.items())]
        lines.append("  " + ", ".join(positions))
        backlogs = s.backlogs()
        if backlogs:
            lines.append("  backlog: " + ", ".join(f"{k} {v:,}" for k, v in backlogs.items()))
        for path, mapped, taken in s.logs:
            lines.append(f"  log {path}: {mapped / 1e6:.1f} MB mapped, {taken / 1e6:.1f} MB taken")
    return lines
