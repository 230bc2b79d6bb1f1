"""Byte layout of queue entries: what one packet costs on the interconnect.

A queue with one channel has one entry layout: header, live fields, then the packet
bytes at a fixed `data_off` (h.len is the packet length). A queue with several
channels (a tagged queue) gives each channel its own layout in entries of the
largest one's size; h.flags is the channel, the ring's data_off is the header's
size and h.len counts the bytes after the header that are used (the channel's
fields, then its packet bytes), so each channel only moves its own live fields and,
if it needs them, its packet's bytes. A tagged channel without packet bytes keeps
the packet's length in an extra `ofl_len` member for the consumer's counters."""

from __future__ import annotations

from dataclasses import dataclass

from offlow.errors import OfflowError
from offlow.ir.graph import Queue
from offlow.ir.types import Field, packed_layout

ENTRY_HDR = 8  # struct ofl_entry_hdr: seq (ownership), len, flags (a tagged queue's channel)
LEN_MAX = 65535  # h.len is 16 bits
# The packet's timestamp, an entry member beside the live fields when it crosses.
TS_FIELD = Field("ofl_ts_ns", "uint64_t")


@dataclass(frozen=True)
class EntryLayout:
    queue: Queue
    channel: int
    fields: tuple[tuple[Field, int], ...]  # (field, byte offset)
    data_off: int
    data_cap: int  # bytes reserved for the packet: the mtu rounded up to 8 (0 when the
    #                bytes do not cross), so that data_off + data_cap is the entry's size
    size: int  # bytes of this channel's entries (a tagged ring's entries may be larger)
    len_off: int = 0  # offset of ofl_len (a tagged channel without packet bytes), else 0

    @property
    def tagged(self) -> bool:
        return self.queue.tagged

    @property
    def field_bytes(self) -> int:
        """Bytes of per-packet state fields (the timestamp is not one)."""
        return sum(f.size for f, _ in self.fields if f != TS_FIELD)

    @property
    def carries_ts(self) -> bool:
        return any(f == TS_FIELD for f, _ in self.fields)

    @property
    def len_bias(self) -> int:
        """A tagged entry's h.len minus its packet length (bytes after the header and
        before the packet)."""
        return self.data_off - ENTRY_HDR

    def bytes_for(self, pkt_len: int) -> int:
        """Bytes that cross for one packet of `pkt_len` bytes on this channel: the whole
        entry, or when it carries the packet, up to the end of the packet rounded to 8
        (the runtime's ofl_entry_used)."""
        if not self.data_cap:
            return self.size
        return min(self.size, (self.data_off + pkt_len + 7) // 8 * 8)


def entry_layout(q: Queue, mtu: int, channel: int = 0) -> EntryLayout:
    """Header, then the channel's live fields and, when it crosses, the timestamp
    (largest alignment first), then (tagged, no packet bytes) ofl_len, then the packet
    bytes."""
    ch = q.channels[channel]
    placed, end = packed_layout((*ch.fields, *((TS_FIELD,) if ch.carries_ts else ())),
                                ENTRY_HDR)
    len_off = 0
    if q.tagged and not ch.carries_data:
        len_off = (end + 1) // 2 * 2
        end = len_off + 2
    data_off = _round8(end)
    if q.tagged and ch.carries_data and data_off - ENTRY_HDR + mtu > LEN_MAX:
        raise OfflowError(f"queue `{q.name}`, channel {ch.edge}: {data_off - ENTRY_HDR} B of "
                          f"fields and an mtu of {mtu} do not fit the 16-bit entry length of "
                          f"a queue with several channels; set the mtu to at most "
                          f"{LEN_MAX - (data_off - ENTRY_HDR)}")
    # Entries are a multiple of 8 bytes (the ring's rule): the packet's room is the mtu
    # rounded up, declared so in the C struct, whose size then needs no padding.
    cap = _round8(mtu) if ch.carries_data else 0
    return EntryLayout(q, channel, tuple(placed), data_off, cap, data_off + cap, len_off)


def _round8(n: int) -> int:
    return (n + 7) // 8 * 8


def max_mtu(q: Queue) -> int:
    """The largest mtu `q` can carry: a queue with several channels counts a channel's
    fields and packet bytes in one 16-bit entry length."""
    most = LEN_MAX
    for k, ch in enumerate(q.channels):
        if q.tagged and ch.carries_data:
            fields = entry_layout(q, 0, k).data_off - ENTRY_HDR
            most = min(most, LEN_MAX - fields)
    return most


def channel_layouts(q: Queue, mtu: int) -> list[EntryLayout]:
    """The layout of every channel of `q`, in channel order."""
    return [entry_layout(q, mtu, k) for k in range(len(q.channels))]


def entry_size(q: Queue, mtu: int) -> int:
    """Bytes per ring entry: the largest channel's."""
    return max(lay.size for lay in channel_layouts(q, mtu))


def state_bytes(fields: tuple[Field, ...]) -> int:
    """sizeof(struct ofl_state) for these fields."""
    if not fields:
        return 1
    _, end = packed_layout(fields, 0)
    align = max(f.align for f in fields)
    return (end + align - 1) // align * align
