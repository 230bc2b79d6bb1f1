"""Tuple streams: files of tuples (CSV, binary), a seeded generator, and their frames
(pcap captures, UDP datagrams) as the stream operators take them (docs/streams.md)."""
