"""ReplayMerge: a late joiner replays a live stream's recording, joins the live stream when it
has caught up, and drops the replay, on one image (as current Aeron's ReplayMerge; not in
the 1.15.1 reference).

How it works
------------
The subscription is a multi-destination one (`aeron:udp?control-mode=manual`). The replay
goes to a destination of it, published by the archive with the recording's session id,
initial term id and term length at the recorded positions, so it is the live stream's image
from an earlier position; the live stream is added as a second destination later. The image
takes each frame once, from whichever destination brings it first.

The states (the decisions only: `ArchiveClient.replay_merge` does the I/O)
-------------------------------------------------------------------------
- REPLAY: replaying. When the image is within `live_add_threshold` of the recorded position
  (a quarter of a term), ADD_LIVE: the live destination is added -> ATTEMPT_LIVE_JOIN, with
  the recorded position just after as the join target.
- ATTEMPT_LIVE_JOIN: live frames now arrive from the live position on; the replay still fills
  what lies before. Once the image has reached the join target, STOP_REPLAY: the replay is
  stopped and its destination removed -> MERGED. A gap left by the replay's end is within
  the live publication's term window, which resends it on a NAK.
- MERGED: the live stream only.
"""

from __future__ import annotations

import enum


class State(enum.Enum):
    REPLAY = 1
    ATTEMPT_LIVE_JOIN = 2
    MERGED = 3


class Action(enum.Enum):
    NONE = 0
    ADD_LIVE = 1
    STOP_REPLAY = 2


class ReplayMerge:
    def __init__(self, term_length: int):
        self.live_add_threshold = term_length // 4
        self.state = State.REPLAY
        self.join_target = -1

    def step(self, image_position: int | None, recorded_position: int) -> Action:
        """What to do now, given the image's position (None before it exists) and the
        recording's position."""
        if image_position is None:
            return Action.NONE
        if self.state is State.REPLAY:
            if recorded_position - image_position <= self.live_add_threshold:
                return Action.ADD_LIVE
        elif self.state is State.ATTEMPT_LIVE_JOIN:
            if image_position >= self.join_target:
                return Action.STOP_REPLAY
        return Action.NONE

    def on_live_added(self, recorded_position: int) -> None:
        self.state = State.ATTEMPT_LIVE_JOIN
        self.join_target = recorded_position

    def on_replay_stopped(self) -> None:
        self.state = State.MERGED
