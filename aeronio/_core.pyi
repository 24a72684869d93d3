# Placeholder while the real stub is written: every name Any.
from typing import Any

def __getattr__(name: str) -> Any: ...
