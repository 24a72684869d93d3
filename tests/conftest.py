"""Suite-wide settings: Hypothesis without timing checks. A per-example deadline or the
slow-generation health check would turn a hiccup of a shared machine into a failure; the tests
assert behaviour, never time."""

from hypothesis import HealthCheck, settings

settings.register_profile("aeronio", deadline=None, suppress_health_check=[HealthCheck.too_slow])
settings.load_profile("aeronio")
