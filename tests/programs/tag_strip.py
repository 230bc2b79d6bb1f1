"""A user's VLAN/QinQ tag stripper: frames tagged 802.1Q (0x8100) lose their tag,
QinQ frames (an 0x88a8 service tag, with or without a customer tag inside) lose both,
and each stripped frame is counted under its innermost VLAN ID. Untagged frames go
out untouched on a second port and are discarded. Its own names, comments and
`#define`s in the body, a helper function and a `switch`. `--set edge.device=xdp` runs
it in XDP; `split=True` puts the sink in a host segment of its own."""

from offlow import Element, Port, Program, Shared, Sink, Source
from offlow.elements import Discard


class TagStrip(Element):
    """Removes up to two VLAN tags; counts the stripped frames per innermost VID."""

    inputs = (Port("frame", "eth"),)
    outputs = (Port("bare", "eth"), Port("untagged", "eth"))
    tables = ("per_vid",)
    drops = {"cut_tag": "a tag announced by its TPID is cut short by the frame's end"}
    helpers = r"""
    /* big-endian 16-bit read: the TPID and TCI are in network order */
    static inline uint16_t ts_be16(const uint8_t *p)
    {
        return (uint16_t)(p[0] << 8 | p[1]);
    }
    """
    body = r"""
    #define TPID_C 0x8100u   /* customer tag, 802.1Q */
    #define TPID_S 0x88a8u   /* service tag, 802.1ad (QinQ) */
    #define TAG_LEN 4u
    #define MAX_FRAME 4096u  /* bounds the copy for XDP's verifier; frames are shorter */
    uint32_t tags = 0;
    if (pkt->len < 14u)
        EMIT(untagged);   // not even an Ethernet header: nothing to strip
    switch (ts_be16(pkt->data + 12)) {
    case TPID_S:
        tags = 1;
        if (pkt->len >= 18u && ts_be16(pkt->data + 16) == TPID_C)
            tags = 2;   /* S-tag then C-tag (cut short or not: checked below) */
        break;
    case TPID_C:
        tags = 1;
        break;
    default:
        EMIT(untagged);
    }
    /* every tag stripped and the ethertype after them must be there */
    if (pkt->len < 14u + tags * TAG_LEN)
        DROP_WHY(cut_tag);
    uint16_t vid = ts_be16(pkt->data + 12 + (tags - 1) * TAG_LEN + 2) & 0x0fffu;
    per_vid[vid] += 1;
    /* what follows the tags moves back over them, behind the MAC addresses; a loop,
     * not memmove, whose size is known only at run time: XDP has no memmove for it */
    for (uint32_t i = 12; i + tags * TAG_LEN < pkt->len && i < MAX_FRAME; i++)
        pkt->data[i] = pkt->data[i + tags * TAG_LEN];
    pkt->len -= tags * TAG_LEN;
    EMIT(bare);
    """


def program(split: bool = False) -> Program:
    """The stripper on the emulated NIC (`edge`); `split`: its sink on the host."""
    p = Program("tag_strip")
    wire = Source("wire")
    strip = TagStrip("strip", per_vid=Shared("per_vid", "uint64_t", 4096))
    out, plain = Sink("out"), Discard("plain")
    wire >> strip
    strip["bare"] >> out
    strip["untagged"] >> plain
    if split:
        p.segment("edge", [wire, strip, plain], device="nic", cores=[0])
        p.segment("app", [out], device="host", cores=[0])
        return p
    p.segment("edge", [wire, strip, out, plain], device="nic", cores=[0])
    return p
