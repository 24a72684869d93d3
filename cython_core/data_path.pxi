# DataPath: the driver's per-message work in one C call per duty cycle (Aeron's sender and
# receiver agents in their steady state), telling the conductor's DutySchedule what it saw.

cdef extern from "<stdlib.h>" nogil:
    long long llabs(long long value)

cdef inline timespec _linger_step(int work) noexcept nogil:
    """The wait before a lingering data path's next pass, after a pass that did `work`."""
    cdef timespec step
    step.tv_sec = 0
    if work >= MAX_DATAGRAMS_PER_SEND:
        step.tv_nsec = 0
    elif work >= _LINGER_BATCH:
        step.tv_nsec = _LINGER_BATCH_STEP_NS
    else:
        step.tv_nsec = _LINGER_STEP_NS
    return step


cdef class DataPath:
    """One `do_work(now_ns)`: new data of the publications whose senders allow it sent from
    their logs, or a heartbeat after a quiet spell (PublicationSender); a poll(2) over the
    sockets; the data sockets with input drained (recvmmsg), their data packets rebuilt into
    images and their heartbeats taken (ImageRouter); the images' status messages sent, the one
    their subscribers' consumption made due (past a quarter of the window) or the periodic one,
    and if one went, the control sockets read again (an endpoint of this process hears it at
    once). A status message read moves the limit of a unicast publication's sender at once
    (PublicationSender.on_status_message), and the window it opens is sent in the same call:
    neither reaction waits for a Python duty cycle (which takes the status message after).
    Python is needed only for what is left; the conductor's DutySchedule decides when, from
    what each do_work tells it (`schedule`): its work, whether something is urgent, how far the
    watched positions moved (`moved`), its next deadline (`next_deadline_ns`). An idle
    stream's heartbeats and status messages need no Python, and count as no work;
    `deadline_ns` says when the next is due.

    Urgent: what a control socket's ControlReceiver or a data socket's router left
    (`slow_datagrams(receiver)`: status messages that are no repeat, NAKs; SETUPs, EOS, unknown
    sessions; their socket is not read again until they are taken), an image's data from a
    sender new to it (`sources_changed`), a gap an image's data or heartbeat opened or a
    retransmit filled (`gaps_changed`: the receiver position moves, and a gap is NAKed at once,
    as Aeron NAKs a unicast gap), commands in the to-driver ring buffer (its tail past its
    head). `moved`: how far the watched positions moved (subscriber positions, receiver
    high-water marks, sender positions, producer positions), which gives bookkeeping (receiver
    positions, status messages, NAKs, publisher limits, cleaning). Nothing that moved is missed:
    each call compares the positions with what the last one saw.
    """

    cdef pollfd* _fds
    cdef Py_ssize_t _nfds
    cdef Py_ssize_t _ncontrol  # _fds[:_ncontrol] are control sockets, the data sockets after
    cdef list _receivers  # per socket: (DatagramReceiver, its ControlReceiver or ImageRouter)
    cdef list _routers  # each ImageRouter once (a multi-destination one serves several sockets)
    cdef list _rests  # per socket: what its ControlReceiver or router left of its last receive
    cdef list _senders  # (PublicationSender, DatagramSender)
    cdef list _followers  # per control socket: the PublicationSenders sending from it
    cdef bint _limits_moved  # a status message moved a sender limit in this do_work
    cdef char** _words
    cdef int64_t* _seen_words
    cdef Py_ssize_t _nwords
    cdef list _logs
    cdef int64_t* _seen_logs
    cdef list _owners
    cdef readonly int64_t moved  # bytes the watched positions moved in the last do_work
    cdef readonly int64_t next_deadline_ns  # `deadline_ns()` as the last do_work left it
    cdef AtomicBuffer _commands  # cnc.dat's to-driver ring buffer, or None
    cdef char* _commands_tail
    cdef char* _commands_head
    # Where the conductor's last read found records waiting and could read none (`stuck_commands`):
    # the head (-1: nowhere) and the length word of the record there, as that read saw it.
    cdef int64_t _stuck_head
    cdef char* _stuck_word
    cdef int32_t _stuck_length
    cdef DutySchedule _schedule

    def __cinit__(self, controls, receivers, senders, counters, logs,
                  DataPath previous=None, commands=None, DutySchedule schedule=None):
        """controls: (fd, DatagramReceiver, ControlReceiver) per control socket; receivers:
        (fd, DatagramReceiver, ImageRouter) per data socket; senders: (PublicationSender,
        DatagramSender) per network publication;
        counters: positions (with `buffer` and `offset`) that give bookkeeping when they move;
        logs: MappedLogs whose producer positions do. A position `previous` (the data path this
        one replaces) watched starts from what it saw, so that a move since is seen; the others
        from where they are. commands: (AtomicBuffer, tail offset, head offset) of the to-driver
        ring buffer, whose unread records are urgent. schedule: told what each do_work saw."""
        cdef Py_ssize_t i, j
        cdef AtomicBuffer buffer
        controls, receivers, counters = list(controls), list(receivers), list(counters)
        self._logs = list(logs)
        self._ncontrol = len(controls)
        self._nfds = self._ncontrol + len(receivers)
        self._nwords = len(counters)
        self._fds = <pollfd*> malloc(max(1, self._nfds) * sizeof(pollfd))
        self._words = <char**> malloc(max(1, self._nwords) * sizeof(char*))
        self._seen_words = <int64_t*> malloc(max(1, self._nwords) * sizeof(int64_t))
        self._seen_logs = <int64_t*> malloc(max(1, len(self._logs)) * sizeof(int64_t))
        if not self._fds or not self._words or not self._seen_words or not self._seen_logs:
            raise MemoryError()
        self._receivers = []
        self._routers = []
        self._rests = []
        for i, (fd, _, _) in enumerate(controls + receivers):
            self._fds[i].fd = fd
            self._fds[i].events = POLLIN
            self._fds[i].revents = 0
            self._rests.append([])
        for _, receiver, control in controls:
            self._receivers.append((<DatagramReceiver?> receiver, <ControlReceiver?> control))
        for _, receiver, router in receivers:
            self._receivers.append((<DatagramReceiver?> receiver, <ImageRouter?> router))
            if not any(router is known for known in self._routers):
                self._routers.append(router)
        self._senders = []
        for sender, channel in senders:
            self._senders.append((<PublicationSender?> sender, <DatagramSender?> channel))
        self._followers = [
            [sender for sender, channel in self._senders if channel.fd == self._fds[i].fd]
            for i in range(self._ncontrol)
        ]
        self._limits_moved = False
        self._owners = []
        for i in range(self._nwords):
            buffer = counters[i].buffer
            self._words[i] = buffer._at(counters[i].offset, 8)
            self._seen_words[i] = aio_load_i64(self._words[i])
            self._owners.append(buffer)
            if previous is not None:
                for j in range(previous._nwords):
                    if previous._words[j] == self._words[i]:
                        self._seen_words[i] = previous._seen_words[j]
        for i in range(len(self._logs)):
            if not isinstance(self._logs[i], MappedLog):
                raise TypeError("logs must be MappedLogs")
            self._seen_logs[i] = (<MappedLog> self._logs[i]).producer_position()
            if previous is not None:
                for j in range(len(previous._logs)):
                    if previous._logs[j] is self._logs[i]:
                        self._seen_logs[i] = previous._seen_logs[j]
        self.moved = 0
        self.next_deadline_ns = 0  # unknown until the first do_work
        self._commands_tail = self._commands_head = self._stuck_word = NULL
        self._stuck_head = -1
        if commands is not None:
            self._commands, tail, head = commands
            self._commands_tail = self._commands._at(tail, 8)
            self._commands_head = self._commands._at(head, 8)
            if previous is not None and previous._commands is self._commands:
                self._stuck_head = previous._stuck_head
                self._stuck_word = previous._stuck_word
                self._stuck_length = previous._stuck_length
        self._schedule = schedule

    def __dealloc__(self):
        free(self._fds)
        free(self._words)
        free(self._seen_words)
        free(self._seen_logs)

    cpdef int do_work(self, int64_t now_ns) except -1:
        """Receive, rebuild and send what needs no Python; returns the datagrams received and
        sent; sets `moved` and `next_deadline_ns`, and tells the schedule."""
        cdef Py_ssize_t i
        cdef int work = 0, count, sms = 0
        cdef bint urgent = False
        cdef int64_t value, moved = 0, deadline = INT64_MAX
        cdef ImageRouter router
        cdef PublicationSender sender
        cdef ImageRebuilder rebuilder
        for sender, channel in self._senders:
            if sender.new_data_allowed:
                count = sender.send(channel, now_ns)
                if count:
                    work += count
                else:  # housekeeping, not work
                    sender.send_heartbeat(channel, now_ns)
                deadline = min(deadline, sender.heartbeat_deadline())
        work += self._receive(now_ns, self._nfds, &urgent)
        for router in self._routers:
            for image in router.images.values():
                rebuilder = <ImageRebuilder> image
                if rebuilder.gaps_changed:
                    rebuilder.gaps_changed = False
                    urgent = True
                # Consumption past the threshold first: that one also stands for a periodic one.
                sms += rebuilder.send_consumption_status_message(now_ns) \
                    or rebuilder.send_status_message(now_ns)  # housekeeping, not work
                deadline = min(deadline, rebuilder.sm_deadline())
        if sms and self._ncontrol:  # this process's own endpoints hear them at once: read now
            self._receive(now_ns, self._ncontrol, &urgent)  # control sockets: no work
        if self._limits_moved:  # the window a status message opened goes now
            self._limits_moved = False
            for sender, channel in self._senders:
                if sender.new_data_allowed:
                    work += sender.send(channel, now_ns)
        self.next_deadline_ns = deadline
        for i in range(self._nwords):
            value = aio_load_i64(self._words[i])
            moved += llabs(value - self._seen_words[i])
            self._seen_words[i] = value
        for i in range(len(self._logs)):
            value = (<MappedLog> self._logs[i]).producer_position()
            moved += llabs(value - self._seen_logs[i])
            self._seen_logs[i] = value
        self.moved = moved
        if self._commands_tail != NULL:
            value = aio_load_i64(self._commands_head)
            if aio_load_i64(self._commands_tail) != value:
                urgent |= (value != self._stuck_head
                           or aio_load_i32(self._stuck_word) != self._stuck_length)
        if self._schedule is not None:
            self._schedule.on_data_path(now_ns, work, moved, urgent, deadline)
        return work

    def stuck_commands(self, stuck) -> None:
        """The conductor's last read of the commands (ToDriverCommands.stuck): None, or the head
        (with its index in the buffer and the length word there) where it found records waiting
        and could read none. Those are not urgent until the head moves or that word changes (a
        claim committed): a producer that died in its claim, or stored a length it did not
        claim, would otherwise keep the conductor running until the buffer is unblocked."""
        cdef Py_ssize_t index
        if stuck is None:
            self._stuck_head = -1
            return
        if self._commands is None:
            raise ValueError("this DataPath watches no commands")
        head, index, length = stuck
        self._stuck_word = self._commands._at(index, 4)
        self._stuck_length = length
        self._stuck_head = head

    def linger(self, int work, int64_t idle_ns, int64_t max_ns) -> int:
        """More passes of the data path (`do_work`), without Python, after one that did `work`:
        each after a wait on the sockets (their input ends it at once) as long as the last
        pass's work asks (`_linger_step`), until Python is due (the schedule's `due`), `idle_ns`
        passed without work, or `max_ns` since the call; returns their work. (Aeron's agents
        back off after work instead of parking: while traffic flows, a wake-up and a park in
        Python per pass cost more than the pass.) The caller's thread is held meanwhile: for an
        agent alone on its event loop."""
        cdef int64_t start = _monotonic_ns(), now = start, idle_since = start
        cdef int total = 0
        cdef timespec step
        while now - idle_since < idle_ns and now - start < max_ns:
            step = _linger_step(work)
            if step.tv_nsec:
                with nogil:
                    ppoll(self._fds, self._nfds, &step, NULL)
            now = _monotonic_ns()
            work = self.do_work(now)
            total += work
            if self._schedule is not None and self._schedule.due:
                break
            if work:
                idle_since = now
        return total

    cdef int _receive(self, int64_t now_ns, Py_ssize_t nfds, bint* urgent) except -1:
        """Poll the first `nfds` sockets (the control sockets come first) and take what they
        hold, but not from a socket whose last leftovers Python has not taken; returns the work
        (data sockets' data routed and datagrams left for Python), sets `urgent`."""
        cdef Py_ssize_t i
        cdef int work = 0
        cdef DatagramReceiver receiver
        cdef ImageRouter router
        if nfds > 0 and c_poll(self._fds, nfds, 0) < 0:
            for i in range(nfds):
                self._fds[i].revents = 0  # interrupted: nothing known, look again next time
        for i in range(nfds):
            if self._rests[i]:  # Python has not taken them: read no more
                urgent[0] = True
            elif self._fds[i].revents != 0:
                receiver = self._receivers[i][0]
                if receiver.recv(self._fds[i].fd) == 0:
                    continue
                if i < self._ncontrol:  # repeated status messages absorbed: housekeeping
                    self._follow_status_messages(self._followers[i], receiver)
                    rest = (<ControlReceiver> self._receivers[i][1]).absorb_received(receiver,
                                                                                    now_ns)
                else:
                    router = self._receivers[i][1]
                    rest = router.route_received(receiver, now_ns)
                    work += router.routed + len(rest)  # heartbeats taken are housekeeping
                    urgent[0] |= router.sources_changed
                self._rests[i] = rest
                urgent[0] |= len(rest) > 0
        return work

    cdef void _follow_status_messages(self, list followers, DatagramReceiver receiver) noexcept:
        """Let the status messages `receiver` just read move the limits of the senders that
        follow them (unicast flow control); Python still takes each one after."""
        cdef int i
        cdef int32_t length
        cdef const char* packet
        cdef PublicationSender sender
        if not followers:
            return
        for i in range(receiver.count):
            packet = receiver.datagram(i, &length)
            if is_plain_status_message(packet, length):
                for sender in followers:
                    if sender.on_status_message(packet):
                        self._limits_moved = True

    def deadline_ns(self) -> int:
        """When `do_work` next has something due though nothing arrives or is appended (a
        heartbeat, a status message), as monotonic ns; INT64_MAX if never. (Each do_work leaves
        it in `next_deadline_ns`; ask again after Python changed what it depends on: new data
        allowed, a status message sent or set.)"""
        cdef int64_t deadline = INT64_MAX
        cdef PublicationSender sender
        cdef ImageRouter router
        for sender, _ in self._senders:
            if sender.new_data_allowed:
                deadline = min(deadline, sender.heartbeat_deadline())
        for router in self._routers:
            for image in router.images.values():
                deadline = min(deadline, (<ImageRebuilder> image).sm_deadline())
        return deadline

    def slow_datagrams(self, DatagramReceiver receiver) -> list | None:
        """What the last receive of `receiver` (a control or data socket's) left for Python, as
        (memoryview, source) pairs valid until its next receive; taken once. None if this
        DataPath does not read it (a socket opened since: Python reads it)."""
        cdef Py_ssize_t i
        for i in range(len(self._receivers)):
            if self._receivers[i][0] is receiver:
                rest = self._rests[i]
                self._rests[i] = []
                return rest
        return None
