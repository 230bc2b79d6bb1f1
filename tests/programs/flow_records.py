"""A user's flow table: one record per IPv4 5-tuple (addresses as addresses, ports,
protocol: a 13-byte key) holding the flow's frames, bytes, the sum of its TTLs, its
first, last and longest frame's length, its last IP id and whether it sent a TCP SYN
(a 33-byte record). Its own names, comments in its C body, a helper that fills a new
flow's record. FLOWS sets how many flows it keeps."""

import os

from offlow import Element, Port, Program, SharedMap, Sink, Source
from offlow.elements import CheckIPv4, Discard, ParseEth

TUPLE = (("src", "ipv4"), ("dst", "ipv4"), ("sport", "uint16_t"), ("dport", "uint16_t"),
         ("proto", "uint8_t"))
RECORD = (("packets", "uint64_t"), ("bytes", "uint64_t"), ("ttl_sum", "uint64_t"),
          ("first_len", "uint16_t"), ("last_len", "uint16_t"), ("max_len", "uint16_t"),
          ("last_id", "uint16_t"), ("syn", "uint8_t"))


class FlowRecord(Element):
    """Looks its flow up and adds the frame to its record (a new flow: a record the
    helper fills, stored; with the table full the flow goes unrecorded)."""

    inputs = (Port("inp", "ip.v4"),)
    outputs = (Port("out", "ip.v4"),)
    tables = ("book",)
    helpers = r"""
    /* A new flow's record: this frame alone. */
    static void start_record(struct flows_value *rec, uint16_t len, const uint8_t *ip,
                             int syn)
    {
        rec->packets = 1;
        rec->bytes = len;
        rec->ttl_sum = ip[8];
        rec->first_len = rec->last_len = rec->max_len = len;
        rec->last_id = (uint16_t)(ip[4] << 8 | ip[5]);
        rec->syn = syn ? 1 : 0;
    }
    """
    body = r"""
    const uint8_t *ip = pkt->data + state->l3_off;   /* CheckIPv4 saw the whole header */
    uint32_t ihl = (ip[0] & 15u) * 4u;
    struct flows_key k;
    memset(&k, 0, sizeof k);
    memcpy(k.src, ip + 12, 4);          // addresses as on the wire
    memcpy(k.dst, ip + 16, 4);
    k.proto = ip[9];
    uint32_t l4 = state->l3_off + ihl;
    int syn = 0;
    if ((k.proto == 6 || k.proto == 17) && (ip[6] & 0x1fu) == 0 && ip[7] == 0
            && l4 + 14u <= pkt->len) {
        k.sport = (uint16_t)(pkt->data[l4] << 8 | pkt->data[l4 + 1]);
        k.dport = (uint16_t)(pkt->data[l4 + 2] << 8 | pkt->data[l4 + 3]);
        syn = k.proto == 6 && (pkt->data[l4 + 13] & 0x02u);
    }
    uint16_t len = (uint16_t)pkt->len;
    struct flows_value *rec = ofl_map_lookup(book, &k);
    if (rec) {
        rec->packets++;                 /* one core: plain updates lose nothing */
        rec->bytes += len;
        rec->ttl_sum += ip[8];
        rec->last_len = len;
        if (len > rec->max_len)
            rec->max_len = len;
        rec->last_id = (uint16_t)(ip[4] << 8 | ip[5]);
        if (syn)
            rec->syn = 1;
    } else {
        struct flows_value fresh;
        start_record(&fresh, len, ip, syn);
        (void)ofl_map_update(book, &k, &fresh);   // -ENOSPC when full: counted by the map
    }
    EMIT(out);
    """


def records_program(flows: int, record: tuple[tuple[str, str], ...] = RECORD) -> Program:
    """The program with a table of `flows` entries (each a `record`: RECORD's fields
    first)."""
    p = Program("flow_records")
    wire, eth, v4 = Source("wire"), ParseEth("eth"), CheckIPv4("v4")
    book = FlowRecord("book", book=SharedMap("flows", TUPLE, record, flows))
    out, other = Sink("out"), Discard("other")
    wire >> eth
    eth["ipv4"] >> v4 >> book >> out
    eth["ipv6"] >> other
    eth["other"] >> other
    p.segment("edge", [wire, eth, v4, book, out, other], device="nic", cores=[0])
    return p


def program() -> Program:
    return records_program(int(os.environ.get("FLOWS", "4096")))
