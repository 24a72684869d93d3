"""Draws the pictures of the concept pages (docs/concepts/*.md) as SVG, with matplotlib.

    python docs/pictures/concepts/draw.py            # rewrites the SVGs beside this script
    python docs/pictures/concepts/draw.py --out DIR  # or writes them to DIR (the tests do)

This script is the pictures' source: every number and name a picture shows that is a fact of
aeronio (frame fields and offsets, log metadata offsets, timers) is read from the package, not
typed here. The output is deterministic for one matplotlib version (text kept as text, a fixed
hash salt, no date), and each SVG is stamped with the sha256 of this script
(tests/unit/test_docs_pictures.py checks the stamps and redraws the pictures).
"""

from __future__ import annotations

import argparse
import hashlib
import io
import struct
from collections.abc import Callable
from pathlib import Path

import matplotlib

matplotlib.use("Agg")

import matplotlib.pyplot as plt  # noqa: E402
from matplotlib.patches import FancyArrowPatch, FancyBboxPatch, Rectangle  # noqa: E402

from aeronio.archive.replay_merge import ReplayMerge  # noqa: E402
from aeronio.driver.context import DriverContext  # noqa: E402
from aeronio.driver.flow_control import DEFAULT_RECEIVER_WINDOW  # noqa: E402
from aeronio.driver.loss_detector import DEFAULT_RETRY_NS  # noqa: E402
from aeronio.driver.receiver_state import SM_TIMEOUT_NS  # noqa: E402
from aeronio.driver.retransmit_handler import DEFAULT_LINGER_NS  # noqa: E402
from aeronio.driver.sender_state import HEARTBEAT_TIMEOUT_NS, SETUP_TIMEOUT_NS  # noqa: E402
from aeronio.logbuffer import descriptor as d  # noqa: E402
from aeronio.protocol import frames  # noqa: E402

HERE = Path(__file__).parent

# -- style -------------------------------------------------------------------------------------

BLUE, GREEN, YELLOW, GREY, PURPLE, RED = (
    "#eef3fb",
    "#e3f4e6",
    "#fdf1d8",
    "#f4f4f4",
    "#f3e9fb",
    "#fbe3e3",
)
DARK_BLUE, DARK_GREEN, DARK_RED = "#3a6ea5", "#3d8b4f", "#b03a3a"
EDGE, TEXT = "#555555", "#222222"
matplotlib.rcParams.update(
    {
        "svg.fonttype": "none",  # text stays text: small, searchable, readable
        "svg.hashsalt": "aeronio-docs",  # stable ids
        "font.family": "sans-serif",
        "font.sans-serif": ["DejaVu Sans", "Helvetica", "Arial"],
        "font.size": 8,
        "text.color": TEXT,
        "hatch.color": "#999999",
        "hatch.linewidth": 0.6,
    }
)
UNIT_IN = 0.1  # one drawing unit is a tenth of an inch


def ms(ns: int) -> str:
    return f"{ns / 1e6:g} ms"


def seconds(ns: int) -> str:
    return f"{ns / 1e9:g} s"


def kib(length: int) -> str:
    return f"{length // 1024} KiB"


class Canvas:
    """A figure drawn in units of a tenth of an inch, origin at the bottom left."""

    def __init__(self, width: float, height: float):
        self.fig = plt.figure(figsize=(width * UNIT_IN, height * UNIT_IN))
        self.ax = self.fig.add_axes((0, 0, 1, 1))
        self.ax.set_xlim(0, width)
        self.ax.set_ylim(0, height)
        self.ax.set_axis_off()

    def text(self, x, y, s, size=8, ha="center", va="center", **kw):
        self.ax.text(x, y, s, fontsize=size, ha=ha, va=va, **kw)

    def box(self, x, y, w, h, label=None, fc=BLUE, ec=EDGE, size=8, round=False, lw=0.8, **kw):
        if round:
            style = "round,pad=0,rounding_size=0.8"
            patch = FancyBboxPatch((x, y), w, h, boxstyle=style, fc=fc, ec=ec, lw=lw, **kw)
        else:
            patch = Rectangle((x, y), w, h, fc=fc, ec=ec, lw=lw, **kw)
        self.ax.add_patch(patch)
        if label is not None:
            self.text(x + w / 2, y + h / 2, label, size=size)

    def arrow(self, start, end, color=EDGE, lw=0.9, style="-|>", ls="-", rad=0.0, **kw):
        self.ax.add_patch(
            FancyArrowPatch(
                start,
                end,
                arrowstyle=style,
                mutation_scale=8,
                color=color,
                lw=lw,
                ls=ls,
                connectionstyle=f"arc3,rad={rad}",
                shrinkA=0,
                shrinkB=0,
                **kw,
            )
        )

    def line(self, xs, ys, color=EDGE, lw=0.8, ls="-"):
        self.ax.plot(xs, ys, color=color, lw=lw, ls=ls, solid_capstyle="butt")

    def span(self, x1, x2, y, label, above=True, size=7, color=EDGE):
        """A dimension line |<-- label -->| from x1 to x2 at height y."""
        self.arrow((x1, y), (x2, y), color=color, style="|-|", lw=0.7)
        self.text((x1 + x2) / 2, y + (0.9 if above else -0.9), label, size=size, color=color)

    def mark(self, x, y1, y2, label, color=DARK_BLUE, size=7, above=True, lw=1.2):
        """A position: a vertical tick from y1 to y2 with its name at the end."""
        self.line([x, x], [y1, y2], color=color, lw=lw)
        y = y2 + 0.8 if above else y1 - 0.8
        self.text(x, y, label, size=size, color=color, va="bottom" if above else "top")

    def svg(self) -> bytes:
        out = io.BytesIO()
        self.fig.savefig(out, format="svg", metadata={"Date": None, "Creator": None})
        plt.close(self.fig)
        return out.getvalue()


# -- log buffers ---------------------------------------------------------------------------------


def log_buffer() -> Canvas:
    """The file: three terms and the metadata; tail counters point at each term's tail."""
    c = Canvas(90, 34)
    y, h = 4, 7
    starts = [2, 25, 48]
    width = 23
    for i, x in enumerate(starts):
        c.box(x, y, width, h, fc="white")
        c.text(x + width * (0.75 if i == 0 else 0.5), y + h / 2, f"term {i}", size=8)
        c.text(x, y - 1.2, "0" if i == 0 else f"{i}T", size=7)
    # frames written in term 0 (the active term), up to its tail
    x = starts[0]
    for frame in (2.0, 1.2, 3.4, 1.6, 2.4, 1.0, 1.8):
        c.box(x, y, frame, h, fc=GREEN, lw=0.5)
        x += frame
    tail0 = x
    c.box(71, y, 17, h, "metadata\n4096 bytes", fc=YELLOW)
    c.text(71, y - 1.2, "3T", size=7)
    c.text(88, y - 1.2, "3T + 4096", size=7, ha="right")

    # the metadata's fields, enlarged
    fields = [
        (d.TERM_TAIL_COUNTERS_OFFSET, "tail\ncounter 0"),
        (d.TERM_TAIL_COUNTERS_OFFSET + 8, "tail\ncounter 1"),
        (d.TERM_TAIL_COUNTERS_OFFSET + 16, "tail\ncounter 2"),
        (d.LOG_ACTIVE_TERM_COUNT_OFFSET, "active\nterm count"),
        (d.LOG_END_OF_STREAM_POSITION_OFFSET, "end of\nstream"),
        (d.LOG_IS_CONNECTED_OFFSET, "is\nconnected"),
        (d.LOG_INITIAL_TERM_ID_OFFSET, "initial\nterm id"),
        (d.LOG_MTU_LENGTH_OFFSET, "mtu"),
        (d.LOG_TERM_LENGTH_OFFSET, "term\nlength"),
        (d.LOG_DEFAULT_FRAME_HEADER_OFFSET, "default\nframe header"),
    ]
    top, cell_h, cell_w = 22, 6, 8.6
    for i, (offset, name) in enumerate(fields):
        cx = 2 + i * cell_w
        c.box(cx, top, cell_w, cell_h, name, fc=YELLOW, size=6.5)
        c.text(cx + 0.3, top + cell_h + 0.9, f"@{offset}", size=6.5, ha="left")
    c.text(
        2,
        top + cell_h + 3,
        "the metadata's fields at their byte offsets (some of them)",
        size=7.5,
        ha="left",
    )
    # tail counters: where the next append goes in each term (term id in the high 32 bits)
    for i, target in enumerate((tail0, starts[1], starts[2])):
        c.arrow((2 + i * cell_w + cell_w / 2, top), (target, y + h), color=DARK_BLUE, lw=0.8)
    c.text(tail0, y - 1.2, "tail: the next append", size=6.5, color=DARK_BLUE)
    c.text(
        88,
        y + h + 2,
        "the file (T = term length): frames (green) in the active term",
        size=7.5,
        ha="right",
    )
    return c


def term_rotation() -> Canvas:
    """Four rotations: active term count % 3 is the active partition, its id initial + count."""
    initial = 1005
    rows = 4
    c = Canvas(90, 9 * rows + 8)
    width, h = 20, 5
    colours = {
        0: (BLUE, "active: appended to"),
        1: (GREEN, "previous: being read"),
        2: (GREY, "older: cleaned behind the readers"),
    }
    for count in range(rows):
        y = 9 * (rows - 1 - count) + 6
        c.text(2, y + h / 2 + 1, f"active term count {count}", size=7.5, ha="left")
        c.text(
            2,
            y + h / 2 - 1.4,
            f"active term id {initial + count}",
            size=7,
            ha="left",
            color=DARK_BLUE,
        )
        for partition in range(d.PARTITION_COUNT):
            age = (count - partition) % d.PARTITION_COUNT  # 0: active, 1: previous, 2: older
            term_id = initial + count - age
            fc, _ = colours[age]
            if count - age < 0:
                fc = "white"  # never written yet
            x = 26 + partition * (width + 1.5)
            c.box(
                x,
                y,
                width,
                h,
                f"term {partition}: id {term_id}",
                fc=fc,
                size=7.5,
                lw=1.6 if age == 0 else 0.8,
                ec=DARK_BLUE if age == 0 else EDGE,
            )
    c.text(
        2,
        9 * rows + 5.5,
        f"initial term id {initial}: the active term is term (active term count % 3), "
        "its id initial term id + active term count",
        size=7.5,
        ha="left",
    )
    for i, (fc, label) in enumerate([*colours.values(), ("white", "not written yet")]):
        x = 2 + i * 22
        c.box(x, 1, 2, 2, fc=fc)
        c.text(x + 2.8, 2, label, size=7, ha="left")
    return c


def frame_layout() -> Canvas:
    """One frame's anatomy, then a term: fragments, PAD, rotation."""
    c = Canvas(90, 40)
    # (a) a 100-byte message
    scale = 0.42  # units per byte
    x0, y, h = 6, 26, 5
    header = d.HEADER_LENGTH
    length = header + 100
    aligned = d.align(length, d.FRAME_ALIGNMENT)
    c.box(x0, y, header * scale, h, "header\n32 B", fc=BLUE, size=7)
    c.box(x0 + header * scale, y, 100 * scale, h, "payload: 100 bytes", fc=GREEN, size=7)
    c.box(x0 + length * scale, y, (aligned - length) * scale, h, fc="white", hatch="////")
    c.text(x0 + aligned * scale + 0.8, y + h / 2, "alignment padding\n(zeros)", size=6.5, ha="left")
    for offset in range(0, aligned + 1, d.FRAME_ALIGNMENT):
        c.text(x0 + offset * scale, y + h + 1.2, str(offset), size=6.5)
    c.span(x0, x0 + length * scale, y + h + 3.8, f"frame length {length}")
    c.span(
        x0,
        x0 + aligned * scale,
        y - 3.4,
        f"aligned length {aligned}: the next frame's offset",
        above=False,
    )
    c.text(2, 37.5, "a 100-byte message", size=8, ha="left")

    # (b) a term: frames, a fragmented message, a PAD at the end; the next term
    y, h = 6, 6
    c.text(
        2,
        16,
        "a term: whole frames, a message fragmented at mtu, a PAD to the end",
        size=8,
        ha="left",
    )
    spans = [
        (3, "B E", GREEN),
        (10, "B", GREEN),
        (10, "", GREEN),
        (3.5, "E", GREEN),
        (3, "B E", GREEN),
        (3, "B E", GREEN),
        (2.6, "B E", GREEN),
        (9.5, "PAD", GREY),
    ]
    x = 2
    for w, label, fc in spans:
        c.box(x, y, w, h, label, fc=fc, size=7, lw=0.6)
        x += w
    c.span(
        2 + 3,
        2 + 3 + 10 + 10 + 3.5,
        y + h + 1.6,
        "one message over three frames (B ... E)",
        size=6.5,
    )
    end = x
    c.text(end - 4.75, y - 1.4, "offer: ADMIN_ACTION", size=6.5, color=DARK_RED)
    c.line([end, end], [y - 1, y + h + 1], lw=1.4)
    c.text(end + 0.5, y - 1.4, "term end", size=6.5, ha="left")
    c.box(end + 4, y, 20, h, fc="white")
    c.box(end + 4, y, 5, h, "B E", fc=GREEN, size=7, lw=0.6)
    c.text(end + 14, y + h / 2, "next term", size=7)
    c.arrow((end - 4.75, y + h), (end + 6.5, y + h), rad=-0.5, color=DARK_RED, lw=0.8)
    c.text(
        end + 7.5, y + h + 1.8, "the message that did not fit", size=6.5, color=DARK_RED, ha="left"
    )
    return c


# -- positions ------------------------------------------------------------------------------------


def positions() -> Canvas:
    """IPC: the slowest subscriber limits the publisher. UDP: the sender and the receiver's
    status messages limit it."""
    c = Canvas(90, 62)

    def axis(y, x1=4, x2=86):
        c.arrow((x1, y), (x2, y), lw=0.8)
        c.text(x2, y - 1.3, "position", size=6.5, ha="right")

    # (a) IPC
    c.text(2, 59.5, "aeron:ipc: one log, read by the subscribers", size=8, ha="left")
    y = 48
    axis(y)
    slowest, faster, pub, lmt = 22, 34, 44, 62
    c.box(4, y, slowest - 4, 2.2, fc=GREY, hatch="////")
    c.text((4 + slowest) / 2, y + 3.4, "cleaned (zeroed)", size=6.5)
    c.box(slowest, y, pub - slowest, 2.2, fc=GREEN)
    c.box(pub, y, lmt - pub, 2.2, fc="white", ls="--")
    c.mark(slowest, y - 2, y + 2.2, "slowest\nsub-pos", above=False)
    c.mark(faster, y - 2, y + 2.2, "sub-pos", above=False, color=DARK_GREEN)
    c.mark(pub, y - 2, y + 2.2, "pub-pos\n(tail)", above=False)
    c.mark(lmt, y - 2, y + 4, "pub-lmt", color=DARK_RED)
    c.text((pub + lmt) / 2, y + 1.1, "may append", size=6.5)
    c.span(slowest, lmt, y + 7.2, "term window: half a term by default")

    # (b) UDP, to scale against a term of `term` units
    term = 36
    c.text(2, 35.5, "aeron:udp: the sender's log and the receiver's image", size=8, ha="left")
    y = 24
    axis(y)
    snd, pub = 42, 52
    sub, rcv, hwm = 24, 32, 38
    plmt, slmt = snd + term // 2, sub + term // 2
    c.box(4, y, snd - term - 4, 2.2, fc=GREY, hatch="////")
    c.box(snd - term, y, term, 2.2, fc=BLUE)
    c.text(snd - term / 2, y + 1.1, "sent: a term kept for retransmits", size=6.5)
    c.box(snd, y, pub - snd, 2.2, fc=GREEN)
    c.text((snd + pub) / 2, y + 1.1, "to send", size=6.5)
    c.mark(snd, y - 2, y + 2.2, "snd-pos", color=DARK_BLUE, above=False)
    c.mark(pub, y - 2, y + 2.2, "pub-pos", above=False)
    c.mark(slmt, y - 0.5, y + 4, "snd-lmt", color=DARK_RED)
    c.mark(plmt, y - 0.5, y + 4, "pub-lmt", color=DARK_RED)
    c.span(snd, plmt, y + 8.2, "term window (half a term)")
    c.text(2, y + 4.4, "sender's\ndriver", size=7, ha="left")

    y = 6
    axis(y)
    c.box(4, y, sub - 4, 2.2, fc=GREY, hatch="////")
    c.box(sub, y, rcv - sub, 2.2, fc=GREEN)
    c.box(rcv, y, 2.5, 2.2, fc=RED)
    c.box(rcv + 2.5, y, hwm - rcv - 2.5, 2.2, fc=GREEN)
    c.text(rcv + 1.25, y - 1.2, "gap: NAK", size=6.5, color=DARK_RED, va="top")
    c.mark(sub, y - 2, y + 4, "sub-pos\n(slowest)", color=DARK_GREEN)
    c.mark(rcv, y - 2, y + 4, "rcv-pos", color=DARK_BLUE)
    c.mark(hwm, y - 2, y + 4, "rcv-hwm", color=DARK_BLUE)
    c.mark(sub + term, y - 0.5, y + 4, "sub-pos + a term:\nbeyond, dropped", color=DARK_RED)
    c.text(2, y + 4.4, "receiver's\ndriver", size=7, ha="left")
    c.line([sub, sub], [y + 5.8, 24 - 0.5], ls=":", color=DARK_GREEN)
    c.span(
        sub, slmt, 16.4, f"receiver window: min({kib(DEFAULT_RECEIVER_WINDOW)}, term/2)", size=6.5
    )
    c.text(sub - 0.6, 14.8, "status message:\nconsumption", size=6.5, ha="right", color=DARK_GREEN)
    return c


# -- the driver -----------------------------------------------------------------------------------


def driver() -> Canvas:
    """The driver's one agent on the event loop, what it serves and what wakes it."""
    ctx = DriverContext(dir="/unused")
    c = Canvas(90, 48)
    # the client side
    c.box(2, 18, 24, 28, fc=GREY, round=True)
    c.text(14, 43.8, "application process", size=8)
    c.box(
        4,
        32,
        20,
        8,
        "Aeron client\n(commands, heartbeat,\nresponses: cnc.dat)",
        fc=YELLOW,
        size=6.8,
    )
    c.box(
        4,
        20,
        20,
        9,
        "Publication,\nSubscription, Image\n(LogAppender, ImageReader)",
        fc=BLUE,
        size=6.8,
    )
    c.box(
        2,
        2,
        24,
        9,
        "shared memory: logs,\ncnc.dat (ring buffer,\nbroadcast, counters)",
        fc=GREEN,
        size=6.8,
    )
    c.arrow((14, 20), (14, 11), style="<|-|>")
    c.text(14.8, 15.5, "append, read", size=6.5, ha="left")

    # the driver
    c.box(32, 2, 56, 44, fc="white", round=True)
    c.text(58, 43.8, "MediaDriver: one task on the event loop (AgentRunner)", size=8)
    c.box(35, 32, 44, 9, fc=BLUE)
    c.text(57, 38.8, "1. DataPath (C), every duty cycle", size=7.5)
    c.text(
        57,
        34.6,
        "poll(2); recvmmsg -> ImageRouter writes into images;\n"
        "PublicationSender: new data from the log -> sendmmsg",
        size=6.5,
    )
    c.box(35, 17, 44, 13, fc=YELLOW)
    c.text(57, 27.8, "2. DriverConductor (Python), when due", size=7.5)
    c.text(
        57,
        22.2,
        "commands (cnc.dat's ring buffer); control frames;\n"
        "SETUP, heartbeats, retransmits (SenderStateMachine);\n"
        "rcv-pos, NAKs, status messages (ReceiverStateMachine);\n"
        "publisher limits, cleaning",
        size=6.5,
    )
    c.box(35, 7, 44, 8, fc=PURPLE)
    c.text(57, 12.8, f"3. timer, every {seconds(ctx.timer_interval_ns)}", size=7.5)
    c.text(
        57,
        9.4,
        "client and image liveness, unblocking, lingering\n"
        "publications, pub-pos sample, driver heartbeat",
        size=6.5,
    )
    c.text(
        57,
        4.4,
        f"idle: after {ctx.conductor_idle_spins} idle duty cycles it parks until "
        "woken or its next deadline",
        size=6.5,
    )

    # what connects them
    c.arrow((24, 36), (35, 24), color=DARK_BLUE)
    c.text(28.8, 36.2, "commands", size=6.5, color=DARK_BLUE, rotation=-45)
    c.arrow((26, 6.5), (32, 6.5), style="<|-|>")
    c.arrow((79, 36.5), (89.5, 36.5), style="<|-|>")
    c.text(84.5, 37.4, "UDP", size=6.5, va="bottom")
    return c


# -- the wire protocol -----------------------------------------------------------------------------


def headers() -> Canvas:
    """Each frame's header as 32-bit rows, from the codec tables of aeronio.protocol.frames."""
    tables = [
        ("DATA 0x01 / PAD 0x00", frames.DATA_FIELDS, ""),
        ("SETUP 0x05", frames.SETUP_FIELDS, ""),
        ("SM 0x03", frames.SM_FIELDS, "application feedback (optional) ..."),
        ("NAK 0x02", frames.NAK_FIELDS, ""),
        ("RTTM 0x06", frames.RTTM_FIELDS, ""),
    ]
    row_h, col_w = 2.3, 6.6
    width = 4 * col_w
    c = Canvas(90, 62)
    places = [(4, 60), (33.5, 60), (63, 60), (4, 28.5), (33.5, 28.5)]
    for (title, fields, tail), (x0, top) in zip(tables, places, strict=True):
        offset, cells = 0, []
        for name, code, _ in fields:
            size = struct.calcsize("<" + code)
            cells.append((offset, size, name))
            offset += size
        c.text(x0 + width / 2, top, f"{title}: {offset} bytes", size=7.5)
        y_top = top - 1.6
        for byte in range(4):
            c.text(
                x0 + (byte + 0.5) * col_w,
                y_top + 0.1,
                str(byte),
                size=5.5,
                color="#777777",
                va="bottom",
            )
        for start, size, name in cells:
            row, column = divmod(start, 4)
            rows = max(1, size // 4)
            w = min(size, 4) * col_w
            y = y_top - (row + rows) * row_h
            fc = YELLOW if row < 2 else BLUE
            c.box(x0 + column * col_w, y, w, rows * row_h, fc=fc, lw=0.6)
            label = name.replace("_", " ")
            c.text(
                x0 + column * col_w + w / 2,
                y + rows * row_h / 2,
                label,
                size=6 if w < col_w * 2 else 6.5,
            )
        for row in range(offset // 4):
            c.text(
                x0 - 0.6,
                y_top - (row + 0.5) * row_h,
                str(row * 4),
                size=5.5,
                ha="right",
                color="#777777",
            )
        if tail:
            y = y_top - (offset // 4 + 1) * row_h
            c.box(x0, y, width, row_h, tail, fc="white", ls="--", size=6)
    notes = [
        "little-endian; offsets in bytes;",
        "yellow: the common header",
        "",
        "flags:",
        f"  DATA: B 0x{frames.BEGIN_FRAG_FLAG:02x}, E 0x{frames.END_FRAG_FLAG:02x}, "
        f"EOS 0x{frames.EOS_FLAG:02x}",
        f"  SM: setup-eliciting 0x{frames.SM_SETUP_FLAG:02x}",
        f"  RTTM: reply wanted 0x{frames.RTTM_REPLY_FLAG:02x}",
        "",
        "heartbeat: a DATA header,",
        "  frame length 0",
        "PAD: a DATA header of type 0 whose",
        "  frame length runs to the term end",
    ]
    c.text(63, 26.5, "\n".join(notes), size=6.5, ha="left", va="top", linespacing=1.4)
    return c


def session() -> Canvas:
    """A unicast session between a sender and a receiver, from SETUP to end of stream."""
    ctx = DriverContext(dir="/unused")
    c = Canvas(90, 63)
    snd, rcv = 12, 48
    top = 57
    for x, name in (
        (snd, "sender\n(publication's driver)"),
        (rcv, "receiver\n(subscription's driver)"),
    ):
        c.box(x - 9, top, 18, 5, name, fc=YELLOW, size=7)
        c.line([x, x], [6.5, top], ls=":", lw=0.7)

    y = top - 3

    def message(label, to_receiver=True, note="", lost=False, color=EDGE, step=4.5):
        nonlocal y
        start, end = (snd, rcv) if to_receiver else (rcv, snd)
        if lost:
            end = (snd + rcv) / 2 + 4
        c.arrow((start, y), (end, y - 1.2), color=color)
        if lost:
            c.text(end + 0.5, y - 1.2, "x", size=9, color=DARK_RED)
        c.text((snd + rcv) / 2, y + 0.9, label, size=6.8, color=color)
        if note:
            c.text(rcv + 3, y - 0.4, note, size=6.5, ha="left", va="center")
        y -= step

    message("SETUP", note=f"repeated every {ms(SETUP_TIMEOUT_NS)} until a status message comes")
    message(
        "SM (status message)",
        False,
        "connected: snd-lmt = consumption + receiver window",
        color=DARK_GREEN,
    )
    message("DATA  frames from snd-pos", note="up to min(snd-lmt, mtu, term end) per datagram")
    message("DATA", lost=True, note="lost on the way", color=DARK_RED)
    message("DATA", note="the receiver sees the gap (rcv-hwm > rcv-pos)")
    message(
        "NAK  term id, offset, length",
        False,
        f"unicast: at once; again every {ms(DEFAULT_RETRY_NS)} while open",
        color=DARK_RED,
    )
    message(
        "DATA  (retransmit)",
        note=f"NAKs of that range ignored for {ms(DEFAULT_LINGER_NS)}",
        color=DARK_RED,
    )
    message(
        "SM",
        False,
        f"every {ms(SM_TIMEOUT_NS)}, or when a quarter window was consumed",
        color=DARK_GREEN,
    )
    c.text(snd - 1, y + 1.6, "no data", size=6.5, ha="right", color="#777777")
    message(
        "heartbeat  (DATA header, frame length 0)",
        note=f"after {ms(HEARTBEAT_TIMEOUT_NS)} without data; tells where the stream ends",
    )
    message("SM", False, "the receiver keeps answering", color=DARK_GREEN)
    c.text(snd - 1, y + 1.6, "closed", size=6.5, ha="right", color="#777777")
    message("heartbeat with EOS flag", note="once everything was sent: the image ends when rebuilt")
    c.text(
        snd,
        6,
        f"lingers {seconds(ctx.publication_linger_ns)},\nthen its log goes",
        size=6.5,
        va="top",
    )
    c.text(rcv, 6, "image unavailable\nto the subscribers", size=6.5, va="top")
    return c


# -- the archive ----------------------------------------------------------------------------------


def recording() -> Canvas:
    """A log's terms copied verbatim into segment files (a segment of two terms here)."""
    c = Canvas(90, 40)
    term_w, h = 20, 5
    y_log, y_seg = 27, 7
    c.text(
        2,
        37.5,
        "the recorded stream's log (its image in the archive's driver), term length T",
        size=8,
        ha="left",
    )
    for partition, label in enumerate(("id n, then n+3", "id n+1", "id n+2")):
        x = 6 + partition * (term_w + 1)
        c.box(x, y_log, term_w, h, f"term {partition}: {label}", fc=GREEN, size=7)
    c.box(6 + 3 * (term_w + 1), y_log, 6, h, "meta", fc=YELLOW, size=7)
    c.text(2, 19.5, "segment files: segment length 2T here (128 MiB by default)", size=8, ha="left")
    seg_w = 2 * term_w
    rec = 6 + seg_w + 3 + term_w * 0.7
    for index in range(2):
        x = 6 + index * (seg_w + 3)
        c.box(x, y_seg, seg_w, h, fc="white")
        filled = seg_w if index == 0 else rec - x
        c.box(x, y_seg, filled, h, fc=GREEN, lw=0.5)
        c.line([x + term_w, x + term_w], [y_seg, y_seg + h], lw=0.5)
        c.text(x + seg_w / 2, y_seg + h + 1.4, f"0-{index}.rec", size=7.5, weight="bold")
        c.text(x, y_seg - 1.4, f"{2 * index}T" if index else "0", size=6.5)
        c.text(x + seg_w, y_seg - 1.4, f"{2 * index + 2}T", size=6.5)
    targets = [6 + term_w / 2, 6 + term_w * 1.5, 6 + seg_w + 3 + term_w / 2]
    for partition, target in enumerate(targets):
        x = 6 + partition * (term_w + 1) + term_w / 2
        c.arrow((x, y_log), (target, y_seg + h + 2.8), color=DARK_BLUE, lw=0.8)
    c.arrow(
        (6 + term_w * 0.8, y_log),
        (6 + seg_w + 3 + term_w * 1.5, y_seg + h + 2.8),
        color=DARK_BLUE,
        lw=0.8,
        ls="--",
    )
    c.text(
        88,
        34.6,
        "block_poll: whole frames (PADs too), never across a term;\n"
        "written by the recorder thread, then rec-pos moves",
        size=6.5,
        ha="right",
        color=DARK_BLUE,
    )
    c.mark(rec, y_seg - 0.5, y_seg + h + 0.5, "rec-pos", color=DARK_RED, above=False)
    c.text(
        2,
        1.2,
        "recording 0 from position 0: segment i holds positions [2iT, 2(i+1)T)",
        size=7,
        ha="left",
    )
    return c


def replay_merge() -> Canvas:
    """ReplayMerge: the image's position catches up with the recording, then joins live."""
    threshold = ReplayMerge(24_000).live_add_threshold / 1000  # a term of 24 units
    c = Canvas(90, 44)
    # left: who sends what to the one subscription
    c.box(2, 30, 22, 7, "live publication\n(session s)", fc=YELLOW, size=7)
    c.box(
        2,
        14,
        22,
        9,
        "archive replay:\nexclusive publication,\nsession s, recorded positions",
        fc=PURPLE,
        size=7,
    )
    c.box(32, 20, 14, 12, "subscription\ncontrol-mode=\nmanual:\none image", fc=BLUE, size=7)
    c.arrow((24, 33.5), (32, 29), color=DARK_GREEN)
    c.text(28, 34.5, "live dest.", size=6.5, color=DARK_GREEN)
    c.arrow((24, 18.5), (32, 23), color=DARK_BLUE)
    c.text(28, 17, "replay dest.", size=6.5, color=DARK_BLUE)
    c.text(
        2,
        41,
        "each frame is taken once, from whichever destination brings it first",
        size=7,
        ha="left",
    )

    # right: positions over time (a sketch: the threshold is ReplayMerge's, against a term of 24)
    x0, y0, w, h = 54, 6, 33, 31
    c.arrow((x0, y0), (x0 + w, y0), lw=0.8)
    c.arrow((x0, y0), (x0, y0 + h), lw=0.8)
    c.text(x0 + w, y0 - 1.4, "time", size=6.5, ha="right")
    c.text(x0 - 1, y0 + h, "position", size=6.5, ha="right", va="top")

    def recorded(t: float) -> float:
        return 14 + 0.5 * t

    def image(t: float) -> float:
        return min(2 + 1.4 * t, recorded(t))

    times = [t / 2 for t in range(0, 61)]
    scale = 0.8
    c.ax.plot(
        [x0 + t for t in times], [y0 + recorded(t) * scale for t in times], color=DARK_GREEN, lw=1.2
    )
    c.ax.plot(
        [x0 + t for t in times],
        [y0 + image(t) * scale for t in times],
        color=DARK_BLUE,
        lw=1.2,
        ls="--",
    )
    add = next(t for t in times if recorded(t) - image(t) <= threshold)
    target = recorded(add)
    join = next(t for t in times if image(t) >= target)
    c.line([x0 + add, x0 + add], [y0, y0 + h - 3], ls=":", color=DARK_GREEN)
    c.text(x0 + add, y0 + h - 2.2, "add live", size=6.5, color=DARK_GREEN, ha="right")
    c.line([x0 + join, x0 + join], [y0, y0 + h - 3], ls=":", color=DARK_RED)
    c.text(x0 + join, y0 + h - 2.2, "stop replay", size=6.5, color=DARK_RED, ha="left")
    c.line([x0, x0 + join], [y0 + target * scale] * 2, ls=":", lw=0.6)
    c.text(x0 + 0.5, y0 + target * scale + 0.9, "join target", size=6, ha="left")
    c.arrow(
        (x0 + add + 0.8, y0 + image(add) * scale),
        (x0 + add + 0.8, y0 + recorded(add) * scale),
        style="|-|",
        lw=0.7,
    )
    c.text(x0 + add + 1.6, y0 + image(add) * scale, "≤ term/4", size=6, ha="left")
    c.text(
        x0 + w - 1,
        y0 + recorded(28) * scale + 1.6,
        "recorded (live)",
        size=6.5,
        color=DARK_GREEN,
        ha="right",
    )
    c.text(x0 + 5, y0 + image(4) * scale, "image", size=6.5, color=DARK_BLUE, ha="left")
    return c


PICTURES: dict[str, Callable[[], Canvas]] = {
    "log_buffer.svg": log_buffer,
    "term_rotation.svg": term_rotation,
    "frame_layout.svg": frame_layout,
    "positions.svg": positions,
    "driver.svg": driver,
    "headers.svg": headers,
    "session.svg": session,
    "recording.svg": recording,
    "replay_merge.svg": replay_merge,
}


def stamp() -> str:
    digest = hashlib.sha256(Path(__file__).read_bytes()).hexdigest()
    return f"<!-- source sha256: {digest}; matplotlib {matplotlib.__version__} -->"


def draw(out: Path, only: list[str] | None = None) -> list[Path]:
    """Write every picture (or those named) into `out`; returns the files written."""
    out.mkdir(parents=True, exist_ok=True)
    written = []
    for name, picture in PICTURES.items():
        if only and name not in only:
            continue
        declaration, rest = picture().svg().decode().split("\n", 1)
        path = out / name
        path.write_text(f"{declaration}\n{stamp()}\n{rest}")
        written.append(path)
    return written


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=HERE, help="where to write (default: here)")
    parser.add_argument("names", nargs="*", help="only these pictures (e.g. headers.svg)")
    args = parser.parse_args()
    for path in draw(args.out, args.names):
        print(path)


if __name__ == "__main__":
    main()
