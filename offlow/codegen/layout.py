"""Byte layout of queue entries: what one packet costs on the interconnect."""

from __future__ import annotations

from dataclasses import dataclass

from offlow.ir import Field, Queue
from offlow.ir.types import packed_layout

ENTRY_HDR = 8  # struct ofl_entry_hdr: seq (ownership), len, flags


@dataclass(frozen=True)
class EntryLayout:
    queue: Queue
    fields: tuple[tuple[Field, int], ...]  # (field, byte offset)
    data_off: int
    data_cap: int  # bytes reserved for the packet (0 when the bytes do not cross)
    size: int

    @property
    def field_bytes(self) -> int:
        return sum(f.size for f, _ in self.fields)

    def bytes_for(self, pkt_len: int) -> int:
        """Bytes that cross for one packet of `pkt_len` bytes: the whole entry, or when
        it carries the packet, up to the end of the packet rounded to 8 (the runtime's
        ofl_entry_used)."""
        if not self.data_cap:
            return self.size
        return min(self.size, (self.data_off + pkt_len + 7) // 8 * 8)


def entry_layout(q: Queue, mtu: int) -> EntryLayout:
    """Header, then live fields (largest alignment first), then the packet bytes."""
    placed, end = packed_layout(q.fields, ENTRY_HDR)
    data_off = (end + 7) // 8 * 8
    cap = mtu if q.carries_data else 0
    return EntryLayout(q, tuple(placed), data_off, cap, data_off + cap)


def state_bytes(fields: tuple[Field, ...]) -> int:
    """sizeof(struct ofl_state) for these fields."""
    if not fields:
        return 1
    _, end = packed_layout(fields, 0)
    align = max(f.align for f in fields)
    return (end + align - 1) // align * align
