# Batched UDP I/O: recvmmsg drains a non-blocking socket into a ring of fixed slots in one system
# call; sendmmsg sends a run of datagrams to one destination in one system call. Where the kernel
# offers it, UDP segmentation offload sends a run of equal datagrams as one (GSO), and a receiver
# with UDP_GRO gets such a run as one buffer with its segment size.

from libc.errno cimport errno, EAGAIN, EINTR
from libc.stdlib cimport malloc, free
from libc.string cimport strerror
from cpython.bytearray cimport PyByteArray_AS_STRING

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

    def recv(self, int fd) -> int:
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


def send_datagrams(int fd, list datagrams, tuple address, bint gso=False,
                   Py_ssize_t max_segment=MAX_UDP_PAYLOAD) -> int:
    """Send each buffer in `datagrams` as one datagram to (ipv4, port) with sendmmsg; returns how
    many the kernel took (the rest would block: the caller retries or counts a short send).

    With `gso`, a run of buffers that follow each other in memory, all of one length but the
    last (which may be shorter), goes to the kernel as one message that it cuts into exactly
    those datagrams (UDP generic segmentation offload): what arrives is the same datagrams,
    for one trip through the network stack instead of one per datagram. Only datagrams of at
    most `max_segment` bytes are grouped (a segment cannot be IP-fragmented: the kernel refuses
    one larger than the path MTU allows)."""
    cdef Py_ssize_t count = len(datagrams), i, j, m = 0, total, segment
    cdef Py_buffer* views
    cdef mmsghdr* msgs
    cdef iovec* iovs
    cdef char* controls
    cdef Py_ssize_t* firsts
    cdef cmsghdr* cmsg
    cdef sockaddr_in sin
    cdef int sent = 0, n, acquired = 0
    if count == 0:
        return 0
    memset(&sin, 0, sizeof(sin))
    sin.sin_family = AF_INET
    sin.sin_port = htons(<unsigned short> address[1])
    host = address[0].encode()
    if inet_pton(AF_INET, host, &sin.sin_addr) != 1:
        raise ValueError(f"not an IPv4 address: {address[0]!r}")
    views = <Py_buffer*> malloc(count * sizeof(Py_buffer))
    msgs = <mmsghdr*> malloc(count * sizeof(mmsghdr))
    iovs = <iovec*> malloc(count * sizeof(iovec))
    controls = <char*> malloc(count * GSO_CONTROL_SPACE)
    firsts = <Py_ssize_t*> malloc((count + 1) * sizeof(Py_ssize_t))
    try:
        if views == NULL or msgs == NULL or iovs == NULL or controls == NULL or firsts == NULL:
            raise MemoryError()
        memset(msgs, 0, count * sizeof(mmsghdr))
        memset(controls, 0, count * GSO_CONTROL_SPACE)
        for i in range(count):
            PyObject_GetBuffer(datagrams[i], &views[i], PyBUF_SIMPLE)
            acquired += 1
        i = 0
        while i < count:
            segment = total = views[i].len
            j = i + 1
            while gso and segment <= max_segment and j < count and j - i < MAX_GSO_SEGMENTS \
                    and views[j - 1].len == segment and 0 < views[j].len <= segment \
                    and total + views[j].len <= MAX_UDP_PAYLOAD \
                    and <char*> views[j].buf == <char*> views[i].buf + total:
                total += views[j].len
                j += 1
            firsts[m] = i
            iovs[m].iov_base = views[i].buf
            iovs[m].iov_len = total
            msgs[m].msg_hdr.msg_iov = &iovs[m]
            msgs[m].msg_hdr.msg_iovlen = 1
            msgs[m].msg_hdr.msg_name = &sin
            msgs[m].msg_hdr.msg_namelen = sizeof(sin)
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
        while sent < m:
            with nogil:
                n = sendmmsg(fd, msgs + sent, <unsigned int> (m - sent), MSG_DONTWAIT)
            if n < 0:
                if errno == EINTR:
                    continue
                if errno == EAGAIN:
                    break
                raise OSError(errno, strerror(errno).decode())
            sent += n
        return firsts[sent]
    finally:
        for i in range(acquired):
            PyBuffer_Release(&views[i])
        free(views)
        free(msgs)
        free(iovs)
        free(controls)
        free(firsts)
