"""The media driver's directory, as every process that uses it finds it.

A driver owns one directory (`<dir>`):

- `cnc.dat`: the CnC file, Aeron's (`aeronio.cnc`): the to-driver ring buffer (its consumer
  heartbeat is the driver's heartbeat), the to-clients broadcast buffer, the counters (system
  counters, positions, heartbeats) and the distinct error log;
- `publications/<registration id>.logbuffer`: the log of each publication (IPC or network);
- `images/<registration id>.logbuffer`: the log of each network image;
- `loss-report.dat`: the loss report (per image: loss observations and bytes lost), in Aeron's
  layout;
- `driver.lock`: flocked by the live driver (the kernel drops it when the driver dies); aeronio's
  own, beside Aeron's files (Aeron's driver keeps none).
"""

from __future__ import annotations

import os

PUBLICATIONS_DIR = "publications"
IMAGES_DIR = "images"
LOSS_REPORT_FILE = "loss-report.dat"
LOCK_FILE = "driver.lock"
LOG_SUFFIX = ".logbuffer"


def publication_log(dir: str, registration_id: int) -> str:
    """The path of a publication's log."""
    return os.path.join(dir, PUBLICATIONS_DIR, f"{registration_id}{LOG_SUFFIX}")


def image_log(dir: str, registration_id: int) -> str:
    """The path of a network image's log."""
    return os.path.join(dir, IMAGES_DIR, f"{registration_id}{LOG_SUFFIX}")
