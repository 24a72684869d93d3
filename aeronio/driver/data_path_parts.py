"""What the driver's DataPath is made of: the sockets, senders and watched positions there are
now. The conductor makes a new DataPath from them whenever they change (and at each timer tick);
this is the one place a DataPath is constructed."""

from __future__ import annotations

from dataclasses import dataclass

from aeronio._core import (
    ControlReceiver,
    DatagramReceiver,
    DatagramSender,
    DataPath,
    DutySchedule,
    ImageRouter,
    MappedLog,
    PublicationSender,
)
from aeronio.driver.sender_state import Position


@dataclass(frozen=True, kw_only=True)
class DataPathParts:
    """The parts of a DataPath (see its docstring in cython_core/data_path.pxi); add to them
    with `dataclasses.replace`."""

    controls: tuple[tuple[int, DatagramReceiver, ControlReceiver], ...] = ()
    """(fd, its receiver, its ControlReceiver) per control socket (the send endpoints')."""
    receivers: tuple[tuple[int, DatagramReceiver, ImageRouter], ...] = ()
    """(fd, its receiver, its endpoint's ImageRouter) per data socket (the receive
    endpoints')."""
    senders: tuple[tuple[PublicationSender, DatagramSender], ...] = ()
    """(data sender, its endpoint's datagram sender) per network publication."""
    counters: tuple[Position, ...] = ()
    """Positions whose moves give bookkeeping (the core watches the 8 bytes at each one's
    `offset` of its `buffer`)."""
    logs: tuple[MappedLog, ...] = ()
    """Logs whose producer positions' moves give bookkeeping."""
    windows: tuple[int, ...] = ()
    """The windows the bookkeeping keeps open (publications' term windows, images' receiver
    windows): the schedule's backlog that makes it due (`DutySchedule.keep_open`)."""

    def data_path(
        self, *, previous: DataPath | None, commands: tuple | None, schedule: DutySchedule
    ) -> DataPath:
        """The DataPath of these parts, replacing `previous` (positions it watched start from
        what it saw); `commands`: (AtomicBuffer, tail offset, head offset) of the to-driver ring
        buffer, whose unread records are urgent; `schedule`: told what each do_work saw."""
        schedule.keep_open(self.windows)
        return DataPath(
            controls=self.controls,
            receivers=self.receivers,
            senders=self.senders,
            counters=self.counters,
            logs=self.logs,
            previous=previous,
            commands=commands,
            schedule=schedule,
        )
