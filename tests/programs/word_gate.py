"""A user's word count with a stop-word gate of its own (docs/streams.md's word count,
written from the docs): the NIC parses each datagram of a text stream; the host splits
its lines into words, lets a gate of the user's own C drop the short words and the
hashtags, and counts the rest in a table of an odd number of slots.

    offlow run tests/programs/word_gate.py --input lines.pcap --json

`--set tally.device=nic` moves the words' work onto the NIC too (nothing crosses)."""

from offlow import Element, Port, Program, Source
from offlow.elements import CheckIPv4, Discard, ParseEth, ParseL4
from offlow.elements.words import CountWords, SplitWords, word_table


class StopWords(Element):
    """Lets a word through unless it is shorter than `shortest` bytes or a hashtag (a
    word that starts with '#'); those end here, counted as consumed."""

    inputs = (Port("word", "ip"),)
    outputs = (Port("kept", "ip"),)
    params = {"shortest": "uint32_t"}
    includes = ("offlow/udp4_payload.h",)
    drops = {"not_udp": "not a datagram the gate can read"}
    body = r"""
    uint32_t at, n;   /* where the word is, and its length: "} not the end" */
    if (ofl_udp4_payload(pkt, state->l3_off, state->l4_off, state->l4_end, &at, &n))
        DROP_WHY(not_udp);            // SplitWords made it: should not happen "}"
    if (n < shortest)
        CONSUME();                    /* a stop word: "a", "of", ... { */
    if (pkt->data[at] == '#')         // a hashtag: '#' is not '"'
        CONSUME();
    """

    def __init__(self, name: str, shortest: int) -> None:
        super().__init__(name, shortest=shortest)


def program(slots: int = 997, shortest: int = 3) -> Program:
    p = Program("word_gate")
    tally_table = word_table("tally_counts", slots)
    wire, eth, ip4, l4 = Source("wire"), ParseEth("eth"), CheckIPv4("ip4"), ParseL4("l4")
    cutter = SplitWords("cutter")
    gate = StopWords("gate", shortest)
    tally = CountWords("tally_words", slots=slots, words=tally_table)
    junk = Discard("junk")
    wire >> eth
    eth["ipv4"] >> ip4 >> l4 >> cutter >> gate >> tally
    eth["ipv6"] >> junk
    eth["other"] >> junk
    p.segment("ingest", [wire, eth, ip4, l4, junk], device="nic", cores=[0])
    p.segment("tally", [cutter, gate, tally], device="host", cores=[0])
    return p
