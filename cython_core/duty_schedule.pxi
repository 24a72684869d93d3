# DutySchedule: when the driver's Python runs (the conductor's full duty cycle) and how long its
# agent may park. A pure state machine (times and observations are given); in C because the
# DataPath tells it what each duty cycle saw, and an idle duty cycle must stay cheap.

cdef enum:
    # Bookkeeping keeps windows open (publisher limits, cleaning): it is due once the watched
    # positions moved a quarter of the smallest (`keep_open`); with no window known, a quarter
    # of the smallest term's (64 KiB, its window half of it).
    _BOOKKEEPING_BACKLOG = 8192
    _BOOKKEEPING_IDLE_CYCLES = 16  # idle duty cycles before bookkeeping, when the agent spins
    # The longest pending bookkeeping waits, when the agent parks at once after work (Aeron's
    # conductor, at its default idle strategy, also parks up to a millisecond between them).
    _BOOKKEEPING_DELAY_NS = 1000000
    # Deadlines this close run together, so that an idle driver wakes once for them
    # (heartbeats, status messages and the timer of its streams drift apart otherwise).
    _COALESCE_NS = 10000000
    # A data path that lingers after work (DataPath.linger) waits on its sockets between its
    # passes: LINGER_STEP_NS after a pass that moved little (a message now and then goes
    # soon), LINGER_BATCH_STEP_NS after one of LINGER_BATCH datagrams or more (a stream
    # flows: it is sent in fewer, larger batches), not at all after one that sent as many as
    # a send takes (MAX_DATAGRAMS_PER_SEND: more is waiting). It gives its thread back to the
    # event loop at least every LINGER_MAX_NS.
    _LINGER_STEP_NS = 20000
    _LINGER_BATCH_STEP_NS = 250000
    _LINGER_BATCH = 4
    _LINGER_MAX_NS = 10000000

BOOKKEEPING_BACKLOG = _BOOKKEEPING_BACKLOG
BOOKKEEPING_IDLE_CYCLES = _BOOKKEEPING_IDLE_CYCLES
BOOKKEEPING_DELAY_NS = _BOOKKEEPING_DELAY_NS
COALESCE_NS = _COALESCE_NS
LINGER_STEP_NS = _LINGER_STEP_NS
LINGER_BATCH_STEP_NS = _LINGER_BATCH_STEP_NS
LINGER_BATCH = _LINGER_BATCH
LINGER_MAX_NS = _LINGER_MAX_NS


cdef class DutySchedule:
    """The conductor's schedule (Aeron's DriverConductor.doWork drains commands, processes its
    timers and loops over its resources; here the DataPath does the steady state in C each duty
    cycle and this says when the rest, in Python, is needed).

    Each duty cycle the DataPath reports what it saw (`on_data_path`, which sets `due`): the
    work it did, the bytes its watched positions moved, whether something urgent waits for
    Python (datagrams left, a sender new to an image, commands), its own next deadline
    (heartbeats, status messages). The full duty cycle runs when:

    - something is urgent;
    - bookkeeping is due: a watched position moved (`pending`) and they moved `backlog_limit`
      bytes in all since the last full duty cycle (a quarter of the smallest window the
      bookkeeping keeps open, `keep_open`), or, while the agent
      spins after work (`agent_spins`), the last BOOKKEEPING_IDLE_CYCLES duty cycles did no
      work (a lone message waits for nothing), or BOOKKEEPING_DELAY_NS passed since the first
      move (`bookkeeping_by_ns`). An agent that parks at once after work (a standalone driver
      serving network streams only) parks with bookkeeping pending, until then at the latest
      (`park_ns`): at a steady rate one full duty cycle keeps the books for many messages;
    - the last full duty cycle was `busy` (it sent, or ticked the timer: limits and connections
      change);
    - the next deadline came (the timer's, a sender's, receiver's or endpoint's, lingering
      publications'; those within COALESCE_NS of each other run together);
    - the DataPath's own deadline came and the timer is due within an eighth of its interval:
      it runs early then, so an idle driver wakes once for both.

    After it (`ran`) nothing is pending until a position moves again; `park_ns` says how long
    the agent may park.
    """

    cdef readonly int64_t timer_interval_ns
    cdef public int64_t next_timer_ns  # the first duty cycle ticks
    cdef public int64_t next_deadline_ns  # the earliest of Python's deadlines (coalesced)
    cdef public int64_t data_path_deadline_ns  # the DataPath's own: no Python needed then
    cdef public bint busy  # the last full duty cycle sent or ticked: run the next one too
    cdef public bint pending  # a watched position moved since the last full duty cycle
    cdef public int64_t backlog  # bytes the watched positions moved since then
    cdef public int64_t backlog_limit  # the backlog that makes bookkeeping due (`keep_open`)
    cdef public int64_t bookkeeping_by_ns  # pending bookkeeping due then (none: INT64_MAX)
    cdef public int idle_cycles  # duty cycles in a row without work, up to the threshold
    cdef readonly bint spins  # the agent spins after work (`agent_spins`)
    cdef readonly bint due  # what the last on_data_path decided

    def __cinit__(self, int64_t timer_interval_ns):
        self.timer_interval_ns = timer_interval_ns
        self.next_timer_ns = self.next_deadline_ns = self.data_path_deadline_ns = 0
        self.busy = True
        self.pending = self.due = False
        self.bookkeeping_by_ns = INT64_MAX
        self.backlog = self.idle_cycles = 0
        self.backlog_limit = _BOOKKEEPING_BACKLOG
        self.spins = True

    def keep_open(self, windows) -> None:
        """The windows the bookkeeping keeps open, in bytes (publications' term windows: their
        publisher limits; images' receiver windows: their cleaning): it is due once the watched
        positions moved a quarter of the smallest (BOOKKEEPING_BACKLOG with none)."""
        windows = list(windows)
        self.backlog_limit = max(1, min(windows) // 4) if windows else _BOOKKEEPING_BACKLOG

    def agent_spins(self, bint spins) -> None:
        """Whether the agent may run idle duty cycles after work (its spins, or an application
        invoking it in a loop: bookkeeping waits for BOOKKEEPING_IDLE_CYCLES of them) or is to
        park at once (bookkeeping parks too, BOOKKEEPING_DELAY_NS at most)."""
        self.spins = spins

    cpdef bint on_data_path(self, int64_t now_ns, int64_t work, int64_t moved, bint urgent,
                            int64_t deadline_ns):
        """The DataPath's duty cycle at `now_ns` did `work`, its watched positions moved `moved`
        bytes, Python is needed at once if `urgent`, its next deadline is `deadline_ns`: does
        the full duty cycle run now? (Also left in `due`.)"""
        cdef bint came = now_ns >= self.data_path_deadline_ns
        if work:
            self.idle_cycles = 0
        elif self.idle_cycles < _BOOKKEEPING_IDLE_CYCLES:
            self.idle_cycles += 1
        if moved:
            if not self.pending:
                self.bookkeeping_by_ns = now_ns + _BOOKKEEPING_DELAY_NS
            self.pending = True
            self.backlog += moved
        self.data_path_deadline_ns = deadline_ns
        self.due = (
            urgent
            or self.busy
            or now_ns >= self.next_deadline_ns
            or (self.pending and (self.backlog >= self.backlog_limit
                                  or now_ns >= self.bookkeeping_by_ns
                                  or (self.spins
                                      and self.idle_cycles >= _BOOKKEEPING_IDLE_CYCLES)))
            or (came and self.timer_due(now_ns))
        )
        return self.due

    cpdef bint timer_due(self, int64_t now_ns):
        """Whether the timer ticks in the full duty cycle at `now_ns` (up to an eighth of its
        interval early)."""
        return now_ns >= self.next_timer_ns - self.timer_interval_ns // 8

    def ran(self, int64_t now_ns, *, bint ticked, bint busy, deadlines_ns,
            int64_t data_path_deadline_ns) -> None:
        """The full duty cycle at `now_ns` ran (the timer with it if `ticked`); `busy`: it sent
        or ticked, so the next one runs too; `deadlines_ns`: when the resources next have
        something due; `data_path_deadline_ns`: the (new) DataPath's."""
        self.pending = self.due = False
        self.bookkeeping_by_ns = INT64_MAX
        self.backlog = 0
        if ticked:
            self.next_timer_ns = now_ns + self.timer_interval_ns
        self.busy = busy
        self.next_deadline_ns = coalesced([self.next_timer_ns, *deadlines_ns])
        self.data_path_deadline_ns = data_path_deadline_ns

    @property
    def wake_ns(self) -> int:
        """When the agent must run next: the next deadline, pending bookkeeping's among them
        (0 while `busy`: at once)."""
        return self._wake_ns()

    cdef inline int64_t _wake_ns(self):
        if self.busy:
            return 0
        return min(self.next_deadline_ns, self.data_path_deadline_ns, self.bookkeeping_by_ns)

    cpdef int64_t park_ns(self, int64_t now_ns, bint commands_waiting):
        """How long the agent may park at `now_ns`: until `wake_ns` (0: run again at once, also
        while `commands_waiting`)."""
        if commands_waiting:
            return 0
        return max(0, self._wake_ns() - now_ns)


def coalesced(deadlines: list) -> int:
    """When to run for `deadlines`: the earliest, or the last within COALESCE_NS of it (those
    close together run in one duty cycle, each at most COALESCE_NS late)."""
    cdef int64_t first = min(deadlines)
    return max(deadline for deadline in deadlines if deadline - first <= _COALESCE_NS)
