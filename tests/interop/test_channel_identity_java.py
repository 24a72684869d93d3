"""The channel identity table of tests/unit/test_channel_identity.py against the reference
Aeron 1.15.1: each row's canonical form is the jar's `UdpChannel.canonicalForm()`, its stripped
channel and recording key the archive's (tests/support/java/ChannelForms.java prints them)."""

from __future__ import annotations

import subprocess

import pytest

from tests.support.java_aeron import compile_java_sources, require_aeron_java
from tests.support.reference_aeron import java_args
from tests.unit.test_channel_identity import ARCHIVE, CANONICAL, MANUAL

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def java_forms(tmp_path_factory: pytest.TempPathFactory) -> dict[str, list[str]]:
    """channel -> [canonical form, stripped channel, recording key] as the jar gives them (the
    manual channel first: the jar numbers channels that are no one endpoint from 0)."""
    classpath = compile_java_sources(require_aeron_java(), tmp_path_factory.mktemp("java-classes"))
    channels = [MANUAL[0], *(c for c, _ in CANONICAL), *(c for c, _, _ in ARCHIVE)]
    done = subprocess.run(
        java_args("ChannelForms", args=tuple(channels), class_path=classpath),
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    forms: dict[str, list[str]] = {}
    for line in done.stdout.splitlines():
        channel, *rest = line.split("\t")
        forms.setdefault(channel, rest)  # the first: the manual channel's number 0
    assert len(forms) == len(set(channels))
    return forms


@pytest.mark.parametrize(("channel", "form"), [*CANONICAL, MANUAL])
def test_canonical_form_is_the_jars(java_forms: dict[str, list[str]], channel: str, form: str):
    assert java_forms[channel][0] == form


@pytest.mark.parametrize(("channel", "stripped", "key"), ARCHIVE)
def test_stripped_channel_and_recording_key_are_the_jars(
    java_forms: dict[str, list[str]], channel: str, stripped: str, key: str
):
    java_stripped, java_key = java_forms[channel][1:]  # the key without "<stream id>:aeron:"
    assert (java_stripped, f"aeron:{java_key}") == (stripped, key)
