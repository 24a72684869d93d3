"""Every archive message table against the reference 1.15.1 jar's generated SBE encoders
(`javap -c -constants`): template id, block length, and each field's offset and length."""

import functools
import re
import shutil
import subprocess

import pytest

from aeronio.archive import codecs
from tests.support import reference_aeron

_CODE_LENGTHS = {"q": 8, "i": 4, "B": 1, "b": 1}


def _java_name(name: str) -> str:
    head, *rest = name.split("_")
    return head + "".join(part.title() for part in rest)


@functools.cache
def _encoders() -> dict[str, str]:
    """Every table's encoder class, disassembled (one javap run)."""
    if shutil.which("javap") is None:
        pytest.fail("javap is missing (apt-get install openjdk-17-jdk-headless)")
    names = [cls.__name__ for cls in codecs.MESSAGES.values()]
    done = subprocess.run(
        ["javap", "-c", "-constants", "-cp", reference_aeron.classpath(),
         *(f"io.aeron.archive.codecs.{name}Encoder" for name in names)],
        capture_output=True, text=True, timeout=120, check=True,
    )  # fmt: skip
    parts = re.split(r"^Compiled from .*$", done.stdout, flags=re.M)[1:]
    return dict(zip(names, parts, strict=True))


def _encoder(class_name: str) -> str:
    return _encoders()[class_name]


def _static_int(text: str, method: str) -> int:
    body = re.search(rf"public static int {method}\(\);\n\s+Code:\n((?:.*\n)*?)\n", text)
    assert body, method
    value = re.search(r"(?:iconst_|bipush\s+|sipush\s+)(m1|-?\d+)", body.group(1))
    return -1 if value.group(1) == "m1" else int(value.group(1))


@pytest.mark.parametrize("cls", list(codecs.MESSAGES.values()), ids=lambda c: c.__name__)
def test_message_table_is_the_jars(cls):
    text = _encoder(cls.__name__)
    assert int(re.search(r"BLOCK_LENGTH = (\d+);", text).group(1)) == cls.BLOCK_LENGTH
    assert int(re.search(r"TEMPLATE_ID = (\d+);", text).group(1)) == cls.TEMPLATE_ID
    assert int(re.search(r"SCHEMA_ID = (\d+);", text).group(1)) == codecs.SCHEMA_ID
    assert int(re.search(r"SCHEMA_VERSION = (\d+);", text).group(1)) == codecs.SCHEMA_VERSION
    offset = 0
    formats = cls.FIXED.format.lstrip("<")
    for name in cls.FIXED_FIELDS:
        while formats[0] == "x":
            formats, offset = formats[1:], offset + 1
        code, formats = formats[0], formats[1:]
        java = _java_name(name)
        assert _static_int(text, f"{java}EncodingOffset") == offset, name
        assert _static_int(text, f"{java}EncodingLength") == _CODE_LENGTHS[code], name
        offset += _CODE_LENGTHS[code]
    jar_var = re.findall(r"public static int (\w+)HeaderLength\(\)", text)
    assert jar_var == [_java_name(name) for name in cls.VAR_FIELDS]
    for name in cls.VAR_FIELDS:
        assert _static_int(text, f"{_java_name(name)}HeaderLength") == codecs.VAR_LENGTH.size


def test_every_encoder_of_the_jar_has_a_table():
    listing = subprocess.run(
        ["jar", "tf", reference_aeron.classpath().split(":")[-1]],
        capture_output=True, text=True, timeout=60, check=True,
    ).stdout  # fmt: skip
    names = set(re.findall(r"io/aeron/archive/codecs/(\w+)Encoder\.class", listing))
    names -= {"MessageHeader", "VarAsciiEncoding"}  # the header and var-data types
    assert names == {cls.__name__ for cls in codecs.MESSAGES.values()}
