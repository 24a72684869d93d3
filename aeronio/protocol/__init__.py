"""What the client and the driver agree on, and nothing of either: channel URIs (`channel`),
Aeron's wire frames (`frames`), the limits on what enters (`limits`), the client<->driver
control messages (`control`), the driver's directory (`layout`) and the registry of drivers
embedded in this process (`embedded`). The client reaches its driver only through these; the
layer rules are enforced by tests/unit/test_layers.py."""
