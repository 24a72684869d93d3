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
        """Count a waiter and wake `future` at the next ring, until unpark(future). Parking before
        the waiter re-checks its condition means no ring can fall between the two."""
        self._parked.append(future)
        self.waiters += 1

    def unpark(self, object future) -> None:
        """Stop waking `future` and uncount its waiter (always call it after park)."""
        try:
            self._parked.remove(future)
        except ValueError:
            return
        self.waiters -= 1

    def add_waiter(self) -> None:
        """Count interest without a future (the writer rings callbacks only while waiters > 0)."""
        self.waiters += 1

    def remove_waiter(self) -> None:
        self.waiters -= 1

    # The callbacks' list is replaced, never changed in place: a ring walks the list it read
    # (with no copy), whatever another thread adds or removes meanwhile (a callback may let go
    # of the GIL), so none is skipped.

    def add_callback(self, object callback) -> None:
        self._callbacks = [*self._callbacks, callback]

    def remove_callback(self, object callback) -> None:
        if callback in self._callbacks:
            callbacks = list(self._callbacks)
            callbacks.remove(callback)
            self._callbacks = callbacks

    def ring(self) -> None:
        cdef object future, loop
        for future in list(self._parked):
            loop = future.get_loop()
            if loop is _get_running_loop():
                _resolve(future)
            elif not loop.is_closed():
                loop.call_soon_threadsafe(_resolve, future)
        for callback in self._callbacks:
            callback()
