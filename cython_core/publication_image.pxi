# The receiver's per-datagram work (Aeron's DataPacketDispatcher.onDataPacket and
# PublicationImage.insertPacket): a datagram of DATA frames goes, whole, to the image of its
# session and stream, at the term offset of its first frame; a heartbeat of an image moves its
# high-water mark and shows it alive (PublicationImage.onHeartbeat). The image's periodic status
# message is sent here too (the frame the receiver state machine keeps current, to the senders it
# set), so that an idle stream needs no Python; so is the one its subscribers' consumption makes due
# (past the threshold: a quarter of the window), so that the sender hears of the space at once. Everything else (SETUP, a heartbeat with EOS, sessions without an image, anything too
# short to route) is left to the Python dispatcher.

cdef enum:
    ROUTE_INSERTED = 1   # new frames put in the term
    ROUTE_DROPPED = 2    # a duplicate, or outside the window
    ROUTE_INVALID = 3    # malformed: counted as an invalid packet and dropped


cdef inline uint64_t image_key(int32_t session_id, int32_t stream_id) noexcept nogil:
    return ((<uint64_t> <uint32_t> session_id) << 32) | <uint32_t> stream_id


cdef int64_t packet_extent(const char* packet, int32_t length) noexcept nogil:
    """How much of a term the frames of a data packet cover (a PAD, sent as its header only,
    covers its whole length), or -1 unless the packet is version-0 DATA frames, optionally ending
    with one PAD, that tile it exactly (the last may be sent unaligned), each naming its own term
    offset. In 64-bit arithmetic: any length word is safe (the caller checks the extent against
    the term)."""
    cdef int64_t offset = 0, remaining, aligned
    cdef int32_t frame_length
    cdef uint16_t frame_type
    if length < HEADER_LENGTH:
        return -1
    while offset < length:
        remaining = length - offset
        if remaining < HEADER_LENGTH:
            return -1
        frame_length = aio_get_i32(packet + offset)
        frame_type = (<const uint16_t*> (packet + offset + TYPE_FIELD_OFFSET))[0]
        if frame_length < HEADER_LENGTH or packet[offset + VERSION_FIELD_OFFSET] != 0 \
                or aio_get_i32(packet + offset + TERM_OFFSET_FIELD_OFFSET) \
                    != <int64_t> aio_get_i32(packet + TERM_OFFSET_FIELD_OFFSET) + offset:
            return -1
        aligned = align_frame(frame_length)
        if frame_type == HDR_TYPE_PAD:
            return offset + aligned if remaining == HEADER_LENGTH else -1
        if frame_type != HDR_TYPE_DATA or frame_length > remaining:
            return -1
        if aligned >= remaining:
            return offset + aligned if remaining == frame_length or remaining == aligned else -1
        offset += aligned
    return offset


cdef class ImageRebuilder:
    """Where a network image's packets go: its log, its receiver high-water mark, and how far
    ahead it may write (`limit_position`: the slowest consumer plus a term, kept current by the
    image's duty cycle, so that an over-run never writes over a term still being read). It also
    takes the image's heartbeats (`on_heartbeat`), and sends its periodic status message to the
    senders it heard (`send_status_message`, from the DataPath)."""

    cdef readonly MappedLog log
    cdef readonly int32_t session_id
    cdef readonly int32_t stream_id
    cdef object _positions  # kept alive: hwm, rebuild and over_runs point into them
    cdef char* hwm
    cdef char* rebuild
    cdef char* over_runs
    cdef public int64_t limit_position
    cdef public int64_t time_of_last_packet_ns
    cdef public bint heartbeat_heard  # since `status_message_is_due` last looked
    # Since the DataPath last looked: a packet or heartbeat past the high-water mark (data
    # before it is missing) or a packet behind it (a retransmit, filling a gap)
    cdef public bint gaps_changed
    cdef public bytes status_message  # for the consumption position now (None: none yet)
    cdef public int64_t time_of_last_sm_ns
    cdef public int64_t last_sm_position  # the consumption position of the last status message
    cdef bytes _sm_template  # a status message of this image (None: Python sends them all)
    cdef int64_t _sm_threshold
    cdef object _consumers  # kept alive: _consumer_words point into them
    cdef char** _consumer_words
    cdef Py_ssize_t _nconsumers
    cdef readonly int64_t sm_timeout_ns
    cdef readonly int64_t sm_early_ns
    cdef list _control_senders  # a DatagramSender to each sender heard (its SMs and NAKs)
    cdef char* sms_sent
    cdef public Doorbell data_doorbell  # subscribers of this process parked for data, if any
    cdef bint fresh  # inserted into since the router last woke its subscribers
    cdef set _sources  # (receiver, ip, port) each sender of its data packets, as heard
    cdef set _connections  # (receiver, ip, port) the senders it answers (None: any sender)
    cdef list _new_sources  # (receiver, (host, port)) heard since `take_new_sources`
    cdef object _last_receiver  # the source of the last packet: most are from it again
    cdef uint32_t _last_ip
    cdef uint16_t _last_port

    def __cinit__(self, MappedLog log, int32_t session_id, int32_t stream_id, object hwm_position,
                  object rebuild_position, object over_runs, object status_messages_sent,
                  int64_t limit_position, int64_t sm_timeout_ns, int64_t sm_early_ns,
                  int64_t now_ns):
        """A status message is due at once; one due within `sm_early_ns` goes with a heartbeat
        heard (an idle stream's receiver then wakes once per heartbeat)."""
        self.log = log
        self.session_id = session_id
        self.stream_id = stream_id
        self._positions = (hwm_position, rebuild_position, over_runs, status_messages_sent)
        self.hwm = counter_address(hwm_position)
        self.rebuild = counter_address(rebuild_position)
        self.over_runs = counter_address(over_runs)
        self.sms_sent = counter_address(status_messages_sent)
        self.limit_position = limit_position
        self.time_of_last_packet_ns = now_ns
        self.heartbeat_heard = self.gaps_changed = False
        self.status_message = None
        self.sm_timeout_ns = sm_timeout_ns
        self.sm_early_ns = sm_early_ns
        self.time_of_last_sm_ns = now_ns - sm_timeout_ns
        self.last_sm_position = 0  # set by Python with the threshold
        self._sm_template = None
        self._sm_threshold = 0
        self._consumers = ()
        self._consumer_words = NULL
        self._nconsumers = 0
        self._control_senders = []
        self.data_doorbell = None
        self.fresh = False
        self._sources = set()
        self._connections = None
        self._new_sources = []
        self._last_receiver = None
        self._last_ip = 0
        self._last_port = 0

    def __dealloc__(self):
        free(self._consumer_words)

    def send_status_messages_past(self, bytes template, int64_t threshold) -> None:
        """From now on the DataPath sends a status message as soon as the consumption position
        (the slowest consumer's: `set_consumers`; without any, the receiver position) is more
        than `threshold` past `last_sm_position` (Aeron's: a quarter of the receiver window):
        `template` (a status message of this image) with that position in it."""
        if len(template) < SM_HEADER_LENGTH:
            raise ValueError(f"a status message of {len(template)} bytes")
        self._sm_template = template
        self._sm_threshold = threshold

    def set_consumers(self, list positions) -> None:
        """The positions of the image's subscribers (the consumption position is the least)."""
        cdef Py_ssize_t i, count = len(positions)
        cdef char** words = <char**> malloc(max(1, count) * sizeof(char*))
        if words == NULL:
            raise MemoryError()
        try:
            for i in range(count):
                words[i] = counter_address(positions[i])
        except BaseException:
            free(words)
            raise
        free(self._consumer_words)
        self._consumer_words, self._nconsumers = words, count
        self._consumers = tuple(positions)

    cdef int64_t consumption(self) noexcept nogil:
        """The slowest consumer's position (the receiver position without consumers)."""
        cdef Py_ssize_t i
        cdef int64_t least
        if self._nconsumers == 0:
            return aio_load_i64(self.rebuild)
        least = aio_load_i64(self._consumer_words[0])
        for i in range(1, self._nconsumers):
            least = min(least, aio_load_i64(self._consumer_words[i]))
        return least

    cdef int send_consumption_status_message(self, int64_t now_ns) except -1:
        """Send a status message if consumption passed the threshold since the last (see
        `send_status_messages_past`); it is the one repeated from now on. 1 if it went."""
        cdef int64_t consumption
        cdef bytes frame
        cdef char* buffers[1]
        cdef Py_ssize_t lengths[1]
        cdef DatagramSender sender
        if self._sm_template is None or not self._control_senders:
            return 0
        consumption = self.consumption()
        if consumption - self.last_sm_position <= self._sm_threshold:
            return 0
        frame = PyBytes_FromStringAndSize(<const char*> self._sm_template,
                                          len(self._sm_template))
        aio_put_i32(<char*> frame + SM_CONSUMPTION_TERM_ID_OFFSET,
                    term_id_for_position(consumption, self.log.position_bits_to_shift,
                                         self.log.initial_term_id))
        aio_put_i32(<char*> frame + SM_CONSUMPTION_TERM_OFFSET_OFFSET,
                    <int32_t> (consumption & (self.log.term_length - 1)))
        buffers[0] = <char*> frame
        lengths[0] = len(frame)
        for sender in self._control_senders:
            sender.send_all(buffers, lengths, 1)
        self.status_message = frame
        self.last_sm_position = consumption
        self.time_of_last_sm_ns = now_ns
        aio_fetch_add_i64(self.sms_sent, 1)
        return 1

    cdef inline int64_t position(self, const char* header) noexcept nogil:
        return compute_position(aio_get_i32(header + TERM_ID_FIELD_OFFSET),
                                aio_get_i32(header + TERM_OFFSET_FIELD_OFFSET),
                                self.log.position_bits_to_shift, self.log.initial_term_id)

    cdef bint within_window(self, int64_t position, int32_t length) noexcept nogil:
        """Starting at or past the receiver position (anything before it is rebuilt, and may be
        cleaned already: a late packet reaching past it would leave stale frames behind the
        cleaning; what it carries beyond is NAKed again), and not over-running the slowest
        consumer (counted when it would)."""
        if position < aio_load_i64(self.rebuild):
            return False
        if position + length > self.limit_position:
            aio_fetch_add_i64(self.over_runs, 1)
            return False
        return True

    cdef int insert_packet(self, const char* packet, int32_t length, int64_t now_ns) noexcept nogil:
        """Put a data packet at its term offset: ROUTE_INSERTED, ROUTE_DROPPED (a duplicate, whose
        first frame is already there, or outside the window: nothing written) or ROUTE_INVALID
        (malformed, or outside the term)."""
        cdef int32_t term_offset = aio_get_i32(packet + TERM_OFFSET_FIELD_OFFSET)
        cdef int64_t extent = packet_extent(packet, length)
        cdef int64_t position, end, hwm
        cdef bint inserted
        if extent < 0 or term_offset < 0 or term_offset & (FRAME_ALIGNMENT - 1) \
                or term_offset > self.log.term_length - extent:
            return ROUTE_INVALID
        position = self.position(packet)
        if not self.within_window(position, length):
            return ROUTE_DROPPED  # and no sign of life: a receiver left behind times out
        self.time_of_last_packet_ns = now_ns
        inserted = rebuild_insert(
            self.log.term(index_by_position(position, self.log.position_bits_to_shift)),
            term_offset, packet, length)
        end = position + extent
        hwm = aio_load_i64(self.hwm)
        if inserted and position != hwm:  # past it: a gap opened; behind it: one filled
            self.gaps_changed = True
        if end > hwm:  # a duplicate too: it may show that later frames are lost
            aio_store_i64(self.hwm, end)
        return ROUTE_INSERTED if inserted else ROUTE_DROPPED

    cdef bint on_heartbeat(self, int64_t position, int64_t now_ns) noexcept nogil:
        """A heartbeat at `position` (its EOS flag is Python's): a sign of life and the stream's
        end, which reveals a lost tail; False (and ignored) outside the window (a receiver left
        behind)."""
        self.heartbeat_heard = True
        if position != aio_load_i64(self.rebuild) and not self.within_window(position, 0):
            return False
        self.time_of_last_packet_ns = now_ns
        if position > aio_load_i64(self.hwm):
            aio_store_i64(self.hwm, position)
            self.gaps_changed = True
        return True

    def heartbeat(self, int32_t term_id, int32_t term_offset, int64_t now_ns) -> bool:
        """A heartbeat at (term_id, term_offset), as `on_heartbeat`."""
        return self.on_heartbeat(compute_position(term_id, term_offset,
                                                  self.log.position_bits_to_shift,
                                                  self.log.initial_term_id), now_ns)

    def status_message_is_due(self, int64_t now_ns) -> bool:
        """Whether the periodic status message is due (early, after a heartbeat heard since the
        last look)."""
        return self.sm_is_due(now_ns)

    cdef bint sm_is_due(self, int64_t now_ns) noexcept:
        cdef int64_t early = self.sm_early_ns if self.heartbeat_heard else 0
        self.heartbeat_heard = False
        return now_ns >= self.time_of_last_sm_ns + self.sm_timeout_ns - early

    @property
    def repeats_status_messages(self) -> bool:
        """Whether the DataPath sends the periodic status message (`send_status_message`):
        there is one, and senders to send it to."""
        return self.status_message is not None and len(self._control_senders) > 0

    def set_control_senders(self, list senders) -> None:
        """DatagramSenders, one to each sender the image heard (from the socket it came in
        on), that periodic status messages go to."""
        for sender in senders:
            if not isinstance(sender, DatagramSender):
                raise TypeError("control senders must be DatagramSenders")
        self._control_senders = list(senders)

    cdef int64_t sm_deadline(self) noexcept:
        """When the DataPath must wake to send a status message (INT64_MAX: it does not): one
        that is due waits up to `sm_early_ns` for a heartbeat to go with, as one due that soon
        goes early with a heartbeat, so that an idle stream's status messages keep in step with
        its heartbeats (one wake-up for both)."""
        if self.status_message is None or not self._control_senders:
            return INT64_MAX
        return self.time_of_last_sm_ns + self.sm_timeout_ns + self.sm_early_ns

    cdef int send_status_message(self, int64_t now_ns) except -1:
        """Send the periodic status message to each sender, if it is due; 1 if it went."""
        cdef char* buffers[1]
        cdef Py_ssize_t lengths[1]
        cdef DatagramSender sender
        if self.status_message is None or not self._control_senders or not self.sm_is_due(now_ns):
            return 0
        buffers[0] = <char*> self.status_message
        lengths[0] = len(self.status_message)
        for sender in self._control_senders:
            sender.send_all(buffers, lengths, 1)
        self.time_of_last_sm_ns = now_ns
        aio_fetch_add_i64(self.sms_sent, 1)
        return 1

    cdef bint heard_from(self, DatagramReceiver receiver, int i) except -1:
        """Note the sender of datagram i of `receiver` (its destination's socket): True if it is
        new to the image. (Aeron's PublicationImage tracks a connection per packet too: a
        stream heard only as data is a connection.)"""
        cdef sockaddr_in* sin = <sockaddr_in*> &receiver._addrs[i]
        cdef uint32_t ip = sin.sin_addr.s_addr
        cdef uint16_t port = sin.sin_port
        if receiver is self._last_receiver and ip == self._last_ip and port == self._last_port:
            return False
        self._last_receiver, self._last_ip, self._last_port = receiver, ip, port
        source = (receiver, ip, port)
        if source in self._sources:
            return False
        self._sources.add(source)
        self._new_sources.append((receiver, receiver.address(i)))
        return True

    def set_connections(self, list connections) -> None:
        """The senders the image answers, as (receiver, (host, port)): its connections, one per
        destination. Only their heartbeats are taken here (`is_connection`); the others' are
        Python's."""
        cdef sockaddr_in sin
        keys = set()
        for receiver, address in connections:
            if not isinstance(receiver, DatagramReceiver):
                raise TypeError("connections are (DatagramReceiver, (host, port)) pairs")
            ipv4_address(address, &sin)
            keys.add((receiver, sin.sin_addr.s_addr, sin.sin_port))
        self._connections = keys

    cdef bint is_connection(self, DatagramReceiver receiver, int i) except -1:
        """Whether datagram i of `receiver` came from one of the image's connections (any sender
        before `set_connections`)."""
        cdef sockaddr_in* sin = <sockaddr_in*> &receiver._addrs[i]
        if self._connections is None:
            return True
        return (receiver, sin.sin_addr.s_addr, sin.sin_port) in self._connections

    def take_new_sources(self) -> list:
        """The senders of data packets heard since the last call, as (receiver, (host, port))."""
        new, self._new_sources = self._new_sources, []
        return new

    def forget_receiver(self, DatagramReceiver receiver) -> None:
        """Let go of `receiver` (its destination was removed): the senders heard on it."""
        self._sources = {source for source in self._sources if source[0] is not receiver}
        self._new_sources = [s for s in self._new_sources if s[0] is not receiver]
        if self._last_receiver is receiver:
            self._last_receiver = None

    cdef void wake(self) noexcept:
        """New frames: wake the subscribers parked for data, here and in other processes."""
        self.fresh = False
        self.log.wake_after_append()
        if self.data_doorbell is not None and self.data_doorbell.waiters:
            try:
                self.data_doorbell.ring()
            except Exception:  # a parked subscriber's loop closing as it is rung: none to wake
                pass

    def advance(self) -> object:
        """Move the receiver position over the complete frames up to the high-water mark; the
        first gap before it as (term_id, term_offset, length), or None."""
        cdef int64_t rebuild_position, hwm, term_begin
        cdef int32_t term_length = self.log.term_length, term_offset, limit_offset, end, gap
        cdef int shift = self.log.position_bits_to_shift
        while True:
            rebuild_position = aio_load_i64(self.rebuild)
            hwm = aio_load_i64(self.hwm)
            if rebuild_position >= hwm:
                return None
            term_offset = <int32_t> (rebuild_position & (term_length - 1))
            term_begin = rebuild_position - term_offset
            limit_offset = term_length if hwm >= term_begin + term_length \
                else <int32_t> (hwm - term_begin)
            end = scan_for_gap(self.log.term(index_by_position(rebuild_position, shift)),
                               term_offset, limit_offset, term_length, &gap)
            if end > term_offset:
                aio_store_i64(self.rebuild, term_begin + end)
            if gap:
                return (<int32_t> (<uint32_t> self.log.initial_term_id + <uint32_t> (rebuild_position >> shift)),
                        end, gap)
            if end < term_length:
                return None

    def insert(self, object packet, int64_t now_ns) -> bool:
        """Insert a data packet (DATA frames as on the wire, or a PAD's header); True if it was
        new (not a duplicate, within the window, well-formed and within the term)."""
        cdef const unsigned char[::1] data = packet
        if data.shape[0] < HEADER_LENGTH:
            return False
        return self.insert_packet(<const char*> &data[0], <int32_t> data.shape[0], now_ns) == ROUTE_INSERTED

    def is_within_window(self, int64_t position, int32_t length) -> bool:
        return self.within_window(position, length)


cdef class ImageRouter:
    """Routes data packets to the ImageRebuilder of their (session, stream) in C, waking the
    subscribers of the images that got new frames, and takes their heartbeats (without EOS);
    the rest is reported back for the Python dispatcher."""

    cdef dict images
    cdef list _fresh  # images inserted into, to wake once per batch
    cdef public bint sources_changed  # an image heard a new sender: `take_new_sources` it
    cdef readonly int routed  # data packets the last `route_received` took (its heartbeats: not)
    cdef object _counters  # kept alive: the addresses below point into them
    cdef char* bytes_received
    cdef char* invalid_packets
    cdef char* heartbeats_received

    def __cinit__(self, object bytes_received, object invalid_packets,
                  object heartbeats_received):
        self.images = {}
        self._fresh = []
        self.routed = 0
        self._counters = (bytes_received, invalid_packets, heartbeats_received)
        self.bytes_received = counter_address(bytes_received)
        self.invalid_packets = counter_address(invalid_packets)
        self.heartbeats_received = counter_address(heartbeats_received)

    def add(self, ImageRebuilder image) -> None:
        self.images[image_key(image.session_id, image.stream_id)] = image

    def remove(self, int32_t session_id, int32_t stream_id) -> None:
        self.images.pop(image_key(session_id, stream_id), None)

    cdef object image_of(self, const char* packet, int32_t length):
        """The ImageRebuilder a data packet (DATA frames or a PAD) goes to, or None: not a data
        packet, or no image of its session and stream (the Python dispatcher decides)."""
        cdef int32_t frame_length
        cdef uint16_t frame_type
        if length < HEADER_LENGTH:
            return None
        frame_length = aio_get_i32(packet)
        frame_type = (<const uint16_t*> (packet + TYPE_FIELD_OFFSET))[0]
        if not (frame_type == HDR_TYPE_PAD or (frame_type == HDR_TYPE_DATA and frame_length != 0)):
            return None
        return self.images.get(image_key(aio_get_i32(packet + SESSION_ID_FIELD_OFFSET),
                                         aio_get_i32(packet + STREAM_ID_FIELD_OFFSET)))

    cdef bint take_heartbeat(self, DatagramReceiver receiver, int i, const char* packet,
                             int32_t length, int64_t now_ns) except -1:
        """Take a heartbeat without EOS (a lone header of length 0) of a known image from one of
        its connections, from datagram i of `receiver`; False if it is not one (the Python
        dispatcher decides)."""
        cdef ImageRebuilder image
        cdef int32_t term_offset
        if length != HEADER_LENGTH:
            return False
        term_offset = aio_get_i32(packet + TERM_OFFSET_FIELD_OFFSET)
        if aio_get_i32(packet) != 0 \
                or (<const uint16_t*> (packet + TYPE_FIELD_OFFSET))[0] != HDR_TYPE_DATA \
                or packet[VERSION_FIELD_OFFSET] != 0 or packet[FLAGS_FIELD_OFFSET] & EOS_FLAG \
                or term_offset < 0 or term_offset & (FRAME_ALIGNMENT - 1):
            return False
        image = self.images.get(image_key(aio_get_i32(packet + SESSION_ID_FIELD_OFFSET),
                                          aio_get_i32(packet + STREAM_ID_FIELD_OFFSET)))
        if image is None or term_offset >= image.log.term_length \
                or not image.is_connection(receiver, i):
            return False  # Python's: no image, malformed (counted there), or another sender's
        aio_fetch_add_i64(self.bytes_received, length)
        aio_fetch_add_i64(self.heartbeats_received, 1)
        image.on_heartbeat(image.position(packet), now_ns)
        self.sources_changed |= image.heard_from(receiver, i)
        return True

    cdef int insert_into(self, ImageRebuilder image, const char* packet, int32_t length,
                         int64_t now_ns):
        """Insert a data packet into `image`, counting its bytes (and it, if invalid)."""
        cdef int result
        aio_fetch_add_i64(self.bytes_received, length)
        result = image.insert_packet(packet, length, now_ns)
        if result == ROUTE_INVALID:
            aio_fetch_add_i64(self.invalid_packets, 1)
        elif result == ROUTE_INSERTED and not image.fresh:
            image.fresh = True
            self._fresh.append(image)
        return result

    cdef void wake_fresh(self) noexcept:
        """Wake the subscribers of the images that got new frames."""
        cdef ImageRebuilder image
        for image in self._fresh:
            image.wake()
        self._fresh.clear()

    def route(self, object datagram, int64_t now_ns) -> bool:
        """Handle one datagram if it is a data packet for a known image; False otherwise."""
        cdef const unsigned char[::1] data = datagram
        if data.shape[0] == 0:
            return False
        image = self.image_of(<const char*> &data[0], <int32_t> data.shape[0])
        if image is None:
            return False
        self.insert_into(image, <const char*> &data[0], <int32_t> data.shape[0], now_ns)
        self.wake_fresh()
        return True

    def route_received(self, DatagramReceiver receiver, int64_t now_ns) -> list:
        """Handle the data packets among what `receiver` just received (each datagram of a run
        the kernel delivered as one, too) and the heartbeats of known images; the other
        datagrams, as (memoryview, source) pairs for the Python dispatcher."""
        cdef list rest = []
        cdef object image
        cdef int i
        cdef int32_t length, segment, offset, size
        cdef const char* packet
        self.routed = 0
        for i in range(receiver.count):
            packet = receiver.datagram(i, &length)
            segment = receiver.segment(i)
            offset = 0
            while True:
                size = min(segment, length - offset)
                image = self.image_of(packet + offset, size)
                if image is None:
                    if not self.take_heartbeat(receiver, i, packet + offset, size, now_ns):
                        rest.append((receiver.data(i)[offset:offset + size], receiver.address(i)))
                else:
                    self.routed += 1
                    if self.insert_into(image, packet + offset, size, now_ns) != ROUTE_INVALID:
                        self.sources_changed |= (<ImageRebuilder> image).heard_from(receiver, i)
                offset += size
                if offset >= length:
                    break
        self.wake_fresh()
        return rest
