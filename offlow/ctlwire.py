"""The sizes and letters of control messages that the Python side uses (runtime
core ctl.h and map_ctl.h define them; tests/test_map_c.py checks both agree)."""

from __future__ import annotations

# One control message, request or reply (OFL_CTL_MSG_MAX), a reply's payload after its
# i32 status (OFL_CTL_REPLY_MAX), and a staged part's bytes after 'P' u32 offset
# (OFL_CTL_PART_MAX).
MSG_MAX = 56
REPLY_MAX = 52
PART_MAX = 51
# The longest request staged in parts, and reply kept (OFL_CTL_STAGE_MAX).
STAGE_MAX = 65536
# The most key + value bytes whose map requests and replies all fit one message
# (OFL_MAP_CTL_KV_MAX): a larger map's go in parts.
MAP_KV_MAX = 48
# Stage a request ('S' u32 total), a part of it ('P' u32 offset, bytes), run it ('X'),
# read a kept reply ('R' u32 offset).
STAGE_BEGIN, STAGE_PART, STAGE_RUN, READ = b"S", b"P", b"X", b"R"
