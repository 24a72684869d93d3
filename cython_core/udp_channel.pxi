# Batched UDP I/O: recvmmsg drains a non-blocking socket into a ring of fixed slots in one system
# call; sendmmsg sends a run of datagrams to one destination in one system call. Where the kernel
# offers it, UDP segmentation offload sends a run of equal datagrams as one (GSO), and a receiver
# with UDP_GRO gets such a run as one buffer with its segment size.

from libc.errno cimport errno, EAGAIN, EINTR, EIO, EINVAL, EMSGSIZE, ENOMEM
from libc.stdlib cimport malloc, free
from libc.string cimport strerror

cdef extern from "<sys/uio.h>" nogil:
    struct iovec:
        void* iov_base
        size_t iov_len

cdef extern from "<netinet/in.h>" nogil:
    ctypedef uint32_t in_addr_t
    struct in_addr:
        in_addr_t s_addr
    struct sockaddr_in:
        unsigned short sin_family
        unsigned short sin_port
        in_addr sin_addr
    unsigned short ntohs(unsigned short)
    unsigned short htons(unsigned short)
    uint32_t ntohl(uint32_t)

cdef extern from "<sys/socket.h>" nogil:
    ctypedef unsigned int socklen_t
    struct sockaddr_storage:
        unsigned short ss_family
    struct msghdr:
        void* msg_name
        socklen_t msg_namelen
        iovec* msg_iov
        size_t msg_iovlen
        void* msg_control
        size_t msg_controllen
        int msg_flags
    struct mmsghdr:
        msghdr msg_hdr
        unsigned int msg_len
    int recvmmsg(int fd, mmsghdr* vec, unsigned int vlen, int flags, void* timeout)
    int sendmmsg(int fd, mmsghdr* vec, unsigned int vlen, int flags)
    int MSG_DONTWAIT
    int AF_INET


cdef extern from "<arpa/inet.h>" nogil:
    int inet_pton(int af, const char* src, void* dst)

cdef extern from "<sys/socket.h>" nogil:
    struct cmsghdr:
        size_t cmsg_len
        int cmsg_level
        int cmsg_type
    size_t CMSG_SPACE(size_t length)
    size_t CMSG_LEN(size_t length)
    unsigned char* CMSG_DATA(cmsghdr* cmsg)

cdef enum:
    SOL_UDP_LEVEL = 17
    UDP_SEGMENT_OPTION = 103     # linux/udp.h: segmentation offload of one send into datagrams
    UDP_GRO_OPTION = 104         # linux/udp.h: receive a run of datagrams as one, cut by us
    MAX_GSO_SEGMENTS = 64
    MAX_UDP_PAYLOAD = 65507
    GSO_CONTROL_SPACE = 32       # >= CMSG_SPACE(sizeof(uint16_t)) and CMSG_SPACE(sizeof(int))


cdef class DatagramReceiver:
    """Receives up to `capacity` datagrams of up to `slot_size` bytes per recv() call."""

    cdef readonly int capacity
    cdef readonly int slot_size
    cdef readonly int count
    cdef bytearray _store
    cdef object _view
    cdef char* _base
    cdef mmsghdr* _msgs
    cdef iovec* _iovs
    cdef sockaddr_storage* _addrs
    cdef char* _controls

    def __cinit__(self, int capacity=64, int slot_size=65536):
        cdef int i
        if capacity < 1 or slot_size < 64:
            raise ValueError(f"capacity {capacity} and slot_size {slot_size} must be positive")
        self.capacity = capacity
        self.slot_size = slot_size
        self.count = 0
        self._store = bytearray(capacity * slot_size)
        self._view = memoryview(self._store).toreadonly()
        self._base = PyByteArray_AS_STRING(self._store)
        self._msgs = <mmsghdr*> malloc(capacity * sizeof(mmsghdr))
        self._iovs = <iovec*> malloc(capacity * sizeof(iovec))
        self._addrs = <sockaddr_storage*> malloc(capacity * sizeof(sockaddr_storage))
        self._controls = <char*> malloc(capacity * GSO_CONTROL_SPACE)
        if self._msgs == NULL or self._iovs == NULL or self._addrs == NULL or self._controls == NULL:
            raise MemoryError()
        memset(self._msgs, 0, capacity * sizeof(mmsghdr))
        for i in range(capacity):
            self._iovs[i].iov_base = self._base + i * <Py_ssize_t> slot_size
            self._iovs[i].iov_len = slot_size
            self._msgs[i].msg_hdr.msg_iov = &self._iovs[i]
            self._msgs[i].msg_hdr.msg_iovlen = 1
            self._msgs[i].msg_hdr.msg_name = &self._addrs[i]
            self._msgs[i].msg_hdr.msg_control = self._controls + i * GSO_CONTROL_SPACE

    def __dealloc__(self):
        free(self._msgs)
        free(self._iovs)
        free(self._addrs)
        free(self._controls)

    cpdef int recv(self, int fd) except -1:
        """Drain up to `capacity` datagrams without blocking; returns how many arrived."""
        cdef int i, n
        for i in range(self.capacity):
            self._msgs[i].msg_hdr.msg_namelen = sizeof(sockaddr_storage)
            self._msgs[i].msg_hdr.msg_controllen = GSO_CONTROL_SPACE
            self._msgs[i].msg_hdr.msg_flags = 0
        with nogil:
            n = recvmmsg(fd, self._msgs, self.capacity, MSG_DONTWAIT, NULL)
        if n < 0:
            if errno == EAGAIN or errno == EINTR:
                n = 0
            else:
                raise OSError(errno, strerror(errno).decode())
        self.count = n
        return n

    cdef inline void _check(self, int i) except *:
        if i < 0 or i >= self.count:
            raise IndexError(f"datagram {i} of {self.count}")

    def data(self, int i) -> memoryview:
        """Datagram i (read-only, valid until the next recv)."""
        self._check(i)
        cdef Py_ssize_t start = i * <Py_ssize_t> self.slot_size
        return self._view[start:start + self._msgs[i].msg_len]

    def address(self, int i) -> tuple:
        """The sender's (host, port) of datagram i (IPv4)."""
        self._check(i)
        cdef sockaddr_in* sin = <sockaddr_in*> &self._addrs[i]
        cdef uint32_t ip = ntohl(sin.sin_addr.s_addr)
        return (f"{ip >> 24}.{(ip >> 16) & 255}.{(ip >> 8) & 255}.{ip & 255}", ntohs(sin.sin_port))

    cdef int32_t segment(self, int i) noexcept nogil:
        """The size of each datagram in buffer i when the kernel delivered a run of them as one
        (UDP_GRO; the last may be shorter), else its whole length."""
        cdef msghdr* header = &self._msgs[i].msg_hdr
        cdef cmsghdr* cmsg = <cmsghdr*> header.msg_control
        if header.msg_controllen >= CMSG_LEN(sizeof(int)) and cmsg.cmsg_level == SOL_UDP_LEVEL \
                and cmsg.cmsg_type == UDP_GRO_OPTION and (<int*> CMSG_DATA(cmsg))[0] > 0:
            return (<int*> CMSG_DATA(cmsg))[0]
        return self._msgs[i].msg_len

    def segment_size(self, int i) -> int:
        self._check(i)
        return self.segment(i)

    cdef inline const char* datagram(self, int i, int32_t* length) noexcept nogil:
        length[0] = self._msgs[i].msg_len
        return self._base + i * <Py_ssize_t> self.slot_size


cdef Py_ssize_t send_buffers(int fd, char** buffers, Py_ssize_t* lengths, Py_ssize_t count,
                             sockaddr_in* destination, bint gso, Py_ssize_t max_segment) noexcept nogil:
    """Send each buffer as one datagram to `destination` with sendmmsg; returns how many the
    kernel took (the rest would block), or -errno when it refused them.

    With `gso`, a run of buffers that follow each other in memory, all of one length but the
    last (which may be shorter), goes to the kernel as one message that it cuts into exactly
    those datagrams (UDP generic segmentation offload): what arrives is the same datagrams,
    for one trip through the network stack instead of one per datagram. Only datagrams of at
    most `max_segment` bytes are grouped (a segment cannot be IP-fragmented: the kernel refuses
    one larger than the path MTU allows)."""
    cdef Py_ssize_t i, j, m = 0, total, segment, result
    cdef mmsghdr* msgs
    cdef iovec* iovs
    cdef char* controls
    cdef Py_ssize_t* firsts
    cdef cmsghdr* cmsg
    cdef int sent = 0, n
    if count == 0:
        return 0
    msgs = <mmsghdr*> malloc(count * sizeof(mmsghdr))
    iovs = <iovec*> malloc(count * sizeof(iovec))
    controls = <char*> malloc(count * GSO_CONTROL_SPACE)
    firsts = <Py_ssize_t*> malloc((count + 1) * sizeof(Py_ssize_t))
    if msgs == NULL or iovs == NULL or controls == NULL or firsts == NULL:
        result = -ENOMEM
    else:
        memset(msgs, 0, count * sizeof(mmsghdr))
        memset(controls, 0, count * GSO_CONTROL_SPACE)
        i = 0
        while i < count:
            segment = total = lengths[i]
            j = i + 1
            while gso and segment <= max_segment and j < count and j - i < MAX_GSO_SEGMENTS \
                    and lengths[j - 1] == segment and 0 < lengths[j] <= segment \
                    and total + lengths[j] <= MAX_UDP_PAYLOAD \
                    and buffers[j] == buffers[i] + total:
                total += lengths[j]
                j += 1
            firsts[m] = i
            iovs[m].iov_base = buffers[i]
            iovs[m].iov_len = total
            msgs[m].msg_hdr.msg_iov = &iovs[m]
            msgs[m].msg_hdr.msg_iovlen = 1
            msgs[m].msg_hdr.msg_name = destination
            msgs[m].msg_hdr.msg_namelen = sizeof(sockaddr_in)
            if j - i > 1:
                cmsg = <cmsghdr*> (controls + m * GSO_CONTROL_SPACE)
                cmsg.cmsg_level = SOL_UDP_LEVEL
                cmsg.cmsg_type = UDP_SEGMENT_OPTION
                cmsg.cmsg_len = CMSG_LEN(sizeof(uint16_t))
                (<uint16_t*> CMSG_DATA(cmsg))[0] = <uint16_t> segment
                msgs[m].msg_hdr.msg_control = cmsg
                msgs[m].msg_hdr.msg_controllen = CMSG_SPACE(sizeof(uint16_t))
            m += 1
            i = j
        firsts[m] = count
        result = 0
        while sent < m:
            n = sendmmsg(fd, msgs + sent, <unsigned int> (m - sent), MSG_DONTWAIT)
            if n < 0:
                if errno == EINTR:
                    continue
                if errno != EAGAIN:
                    result = -errno
                break
            sent += n
        if result == 0:
            result = firsts[sent]
    free(msgs)
    free(iovs)
    free(controls)
    free(firsts)
    return result


cdef int ipv4_address(tuple address, sockaddr_in* sin) except -1:
    """Fill `sin` from (ipv4, port)."""
    memset(sin, 0, sizeof(sockaddr_in))
    sin.sin_family = AF_INET
    sin.sin_port = htons(<unsigned short> address[1])
    if inet_pton(AF_INET, address[0].encode(), &sin.sin_addr) != 1:
        raise ValueError(f"not an IPv4 address: {address[0]!r}")
    return 0


cdef struct Destination:
    sockaddr_in address
    Py_ssize_t max_segment


cdef class DatagramSender:
    """Sends datagrams from one socket to each of its destinations (one for unicast and
    multicast, several for multi-destination-cast). What the kernel refuses (would block,
    unreachable, dropped by a firewall) is a short send, counted and repaired by NAKs like any
    loss; a path that cannot segment (EIO, EINVAL or EMSGSIZE with GSO: a segment larger than
    its MTU) turns segmentation offload off."""

    cdef readonly int fd
    cdef public bint gso
    cdef Destination* _destinations
    cdef int _count
    cdef object _counter  # kept alive: short_sends points into it
    cdef char* short_sends

    def __cinit__(self, int fd, object short_sends, bint gso=False):
        self.fd = fd
        self.gso = gso
        self._destinations = NULL
        self._count = 0
        self._counter = short_sends
        self.short_sends = counter_address(short_sends)

    def __dealloc__(self):
        free(self._destinations)

    def set_destinations(self, list destinations) -> None:
        """Send to these from now on: ((ipv4, port), max_segment) pairs, max_segment the largest
        datagram a GSO run to it may hold."""
        cdef Py_ssize_t i, count = len(destinations)
        cdef Destination* table = <Destination*> malloc(max(1, count) * sizeof(Destination))
        if table == NULL:
            raise MemoryError()
        try:
            for i in range(count):
                ipv4_address(destinations[i][0], &table[i].address)
                table[i].max_segment = destinations[i][1]
        except BaseException:
            free(table)
            raise
        free(self._destinations)
        self._destinations = table
        self._count = <int> count

    cdef Py_ssize_t send_all(self, char** buffers, Py_ssize_t* lengths,
                             Py_ssize_t count) noexcept nogil:
        """Send to every destination; returns how many of the datagrams every destination took
        (a destination that refused them outright lost them; one whose socket buffer was full
        takes the rest again next time)."""
        cdef int i
        cdef Py_ssize_t sent, taken = count
        for i in range(self._count):
            sent = send_buffers(self.fd, buffers, lengths, count, &self._destinations[i].address,
                                self.gso, self._destinations[i].max_segment)
            if sent < 0 and self.gso and (sent == -EIO or sent == -EINVAL or sent == -EMSGSIZE):
                self.gso = False  # segmentation offload refused on this path: send plainly
            if sent < count:
                aio_fetch_add_i64(self.short_sends, 1)
            if 0 <= sent < taken:
                taken = sent
        return taken

    def send(self, list datagrams) -> None:
        """Send each buffer of `datagrams` (bytes-like) as one datagram to every destination
        (what a full socket buffer refuses is lost: a short send, repaired by NAKs)."""
        cdef Py_ssize_t count = len(datagrams), i, acquired = 0
        cdef Py_buffer* views
        cdef char** buffers
        cdef Py_ssize_t* lengths
        if count == 0:
            return
        views = <Py_buffer*> malloc(count * sizeof(Py_buffer))
        buffers = <char**> malloc(count * sizeof(char*))
        lengths = <Py_ssize_t*> malloc(count * sizeof(Py_ssize_t))
        try:
            if views == NULL or buffers == NULL or lengths == NULL:
                raise MemoryError()
            for i in range(count):
                PyObject_GetBuffer(datagrams[i], &views[i], PyBUF_SIMPLE)
                acquired += 1
                buffers[i] = <char*> views[i].buf
                lengths[i] = views[i].len
            self.send_all(buffers, lengths, count)  # with the GIL: set_destinations frees
        finally:
            for i in range(acquired):
                PyBuffer_Release(&views[i])
            free(views)
            free(buffers)
            free(lengths)
