"""Key tables of the CBC elements (runtime/lib/crypto/include/offlow/cbc.h): one flow per
line, `SRC:SPORT DST:DPORT KEY IV`, key and IV in hex."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class FlowKey:
    """The key and IV of one IPv4/UDP flow, as the datagrams carry its addresses."""

    src: str
    sport: int
    dst: str
    dport: int
    key: bytes
    iv: bytes

    def line(self) -> str:
        return f"{self.src}:{self.sport} {self.dst}:{self.dport} {self.key.hex()} {self.iv.hex()}"


def key_table_text(flows: list[FlowKey], comment: str = "") -> str:
    """A key table's text (a comment line first when given)."""
    head = [f"# {comment}"] if comment else []
    return "\n".join([*head, *(f.line() for f in flows)]) + "\n"
