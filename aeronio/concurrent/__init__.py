"""Aeron's concurrent structures over shared memory: the many-to-one ring buffer, the broadcast
buffer and the distinct error log, in Aeron's byte layouts, every shared access through
`aeronio._core.AtomicBuffer` atomics."""
