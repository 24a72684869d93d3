# Doorbell: wakes tasks parked on an event (new data, consumption, a new limit) in this process.
# Writers check `waiters` (a C int) after their work, so ringing costs nothing when nobody waits.


cdef void _resolve(object future):
    if not future.done():
        future.set_result(None)


cdef class Doorbell:
    """A set of parked asyncio futures (any loop, any thread) and callbacks, woken by ring()."""

    cdef public int waiters
    cdef list _parked
    cdef list _callbacks

    def __cinit__(self):
        self.waiters = 0
        self._parked = []
        self._callbacks = []

    def park(self, object future) -> None:
        """Wake `future` at the next ring; the caller counts itself in `waiters` while parked."""
        self._parked.append(future)

    def unpark(self, object future) -> None:
        """Forget a parked future that woke some other way (a timeout, another doorbell)."""
        try:
            self._parked.remove(future)
        except ValueError:
            pass

    def add_callback(self, object callback) -> None:
        self._callbacks.append(callback)

    def remove_callback(self, object callback) -> None:
        if callback in self._callbacks:
            self._callbacks.remove(callback)

    def ring(self) -> None:
        cdef list parked = self._parked
        cdef object future, loop
        self._parked = []
        for future in parked:
            loop = future.get_loop()
            if loop is _get_running_loop():
                _resolve(future)
            elif not loop.is_closed():
                loop.call_soon_threadsafe(_resolve, future)
        for callback in self._callbacks:
            callback()
