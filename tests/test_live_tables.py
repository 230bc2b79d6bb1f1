"""A program with a large shared array, read while it runs: `offlow stats` and the
metrics server ask for the counters only, so the processes' live copies carry each
array's length, not its every element (a 4M-bucket histogram made each read write and
parse 37 MB of JSON); `Session.stats()` has the elements as its docs promise (and
not with `tables=False`); the final report still has the non-zero entries. A hash map
(SharedMap) likewise: a counters-only read has its counters and no pairs, a read of
the tables and the last copy have every pair."""

from __future__ import annotations

import json
import subprocess
import sys
import urllib.request
from pathlib import Path
from typing import Any

from prometheus_client.parser import text_string_to_metric_families

from offlow import Element, Port, Program, Shared, SharedMap, Sink, Source, live
from offlow.dsl.values import map_table
from offlow.elements import Count
from offlow.lifecycle import run_folder_of
from offlow.mapreport import decode, format_map
from offlow.metrics import exposition
from offlow.report import format_summary, summarize
from offlow.runner import RunOptions
from offlow.session import session

ROOT = Path(__file__).resolve().parent.parent
ENTRIES = 1 << 20
SLOT = 7
PACKETS = 300


def _histogram_program() -> Program:
    """A user's program: every packet counted into one bucket of a 1M-bucket array."""
    p = Program("big_hist")
    hist = Shared("hist", "uint64_t", ENTRIES)
    src, count, out = Source("in"), Count("tally", slot=SLOT, counts=hist), Sink("out")
    src >> count >> out
    p.segment("only", [src, count, out], device="host", cores=[0])
    return p


def _live_copy(window: Path) -> dict[str, Any]:
    """What the host process last wrote for a live read (its DEVICE.json.live)."""
    folder = run_folder_of(window)
    assert folder is not None
    return json.loads((folder / "host.json.live").read_text())


def _table_sizes(text: str) -> dict[str, float]:
    """offlow_table_size by table, from Prometheus text (prometheus-client's parser)."""
    return {s.labels["table"]: s.value for f in text_string_to_metric_families(text)
            for s in f.samples if s.name == "offlow_table_size"}


def test_live_reads_of_counters_carry_no_array_elements_and_stats_has_them() -> None:
    with session(_histogram_program(),
                 RunOptions(count=PACKETS, metrics="127.0.0.1:0")) as s:
        s.wait_drained(timeout=60)
        # offlow stats WINDOW: the table's size is there, its elements were not written
        p = subprocess.run([sys.executable, "-m", "offlow.cli", "stats", str(s.window)],
                           capture_output=True, text=True, timeout=120, cwd=ROOT)
        assert p.returncode == 0, p.stderr
        assert _table_sizes(p.stdout) == {"hist": ENTRIES}
        assert _live_copy(s.window)["tables"]["hist"] == {"kind": "array",
                                                          "length": ENTRIES}
        # Session.stats(): every element, as the stats file has them
        stats, running = s.stats()
        assert running
        hist = stats["host"]["tables"]["hist"]
        assert isinstance(hist, list) and len(hist) == ENTRIES
        assert hist[SLOT] == PACKETS and sum(hist) == PACKETS
        # a scrape of the metrics server: the size again, no elements written
        assert s.run.metrics is not None
        with urllib.request.urlopen(s.run.metrics.url, timeout=120) as r:
            assert _table_sizes(r.read().decode()) == {"hist": ENTRIES}
        assert _live_copy(s.window)["tables"]["hist"] == {"kind": "array",
                                                          "length": ENTRIES}
        # stats(tables=False): the counters, the array as its length
        counters, _ = s.stats(tables=False)
        assert counters["host"]["tables"]["hist"] == {"kind": "array", "length": ENTRIES}
        assert counters["host"]["sinks"]["out"]["packets"] == PACKETS
    assert s.result is not None and s.result.ok, s.result and s.result.errors
    final = s.result.stats["host"]["tables"]["hist"]
    assert len(final) == ENTRIES and final[SLOT] == PACKETS
    text = format_summary(summarize(s.build.plan, s.result.stats))
    assert f"table hist: [{SLOT}]={PACKETS}\n" in text + "\n"


def test_a_request_for_elements_is_answered_only_by_an_answer_that_has_them() -> None:
    """Requests count in steps of 2, bit 0 asking for the elements (live.h): an answer
    to a later request without the bit does not answer one with it (the reader asks
    again); one with the bit answers both kinds; a last copy answers everything."""
    assert live._fresh({"live_seq": 5}, 5) and live._fresh({"live_seq": 7}, 5)
    assert not live._fresh({"live_seq": 6}, 5)   # later, but without the elements
    assert live._fresh({"live_seq": 6}, 4) and live._fresh({"live_seq": 5}, 4)
    assert not live._fresh({"live_seq": 2}, 4) and not live._fresh({"live_seq": 3}, 5)
    assert live._fresh({"live_seq": 2}, 0xfffffffe)  # the count wraps
    assert live._fresh({"live_seq": 0, "live_final": 1}, 5)


FLOWS = 20_000  # packets, each its own key (its sequence number)


class SeqKeys(Element):
    """A user's element: each frame's synthetic sequence number (the first 8 payload
    bytes, big endian: runtime synth.h) as a key of its own, 3 * seq + 1 its value."""

    inputs = (Port("inp", "eth"),)
    outputs = (Port("out", "eth"),)
    tables = ("seen",)
    body = r"""
    if (pkt->len >= 50) {   /* shorter frames carry no sequence number */
        struct seqs_key k;
        k.seq = 0;
        for (int b = 0; b < 8; b++) k.seq = k.seq << 8 | pkt->data[42 + b];
        uint32_t v = (uint32_t)(3 * k.seq + 1);
        (void)ofl_map_update(seen, &k, &v);   // -ENOSPC when full: counted by the map
    }
    EMIT(out);
    """


def _map_program() -> Program:
    """Every frame a new key of a map with room for all of them (and some to spare)."""
    p = Program("seq_map")
    src, keys, out = Source("in"), SeqKeys("keys", seen=SharedMap(
        "seqs", (("seq", "uint64_t"),), "uint32_t", 2 * FLOWS)), Sink("out")
    src >> keys >> out
    p.segment("only", [src, keys, out], device="host", cores=[0])
    return p


def test_a_maps_pairs_are_in_reads_of_the_tables_and_not_in_reads_of_counters() -> None:
    with session(_map_program(), RunOptions(count=FLOWS)) as s:
        s.wait_drained(timeout=60)
        counters = live.read(s.window, timeout=30)["host"]["tables"]["seqs"]
        assert counters == {"kind": "map", "items": FLOWS, "entries": 2 * FLOWS, "full": 0}
        assert _live_copy(s.window)["tables"]["seqs"] == counters
        sizes = _table_sizes(exposition({"host": live.read(s.window, timeout=30)["host"]}))
        assert sizes == {"seqs": FLOWS}
        whole = live.read(s.window, timeout=30, tables=True)["host"]["tables"]["seqs"]
        assert {k: v for k, v in whole.items() if k != "pairs"} == counters
        assert sorted(whole["pairs"]) == sorted(
            f"{q.to_bytes(8, 'little').hex()}={(3 * q + 1).to_bytes(4, 'little').hex()}"
            for q in range(FLOWS))
        stats, running = s.stats()
        assert running and stats["host"]["tables"]["seqs"]["pairs"]
    assert s.result is not None and s.result.ok, s.result and s.result.errors
    final = s.result.stats["host"]["tables"]["seqs"]
    assert final["items"] == FLOWS and len(final["pairs"]) == FLOWS


def test_a_maps_counters_without_pairs_read_as_counters_alone() -> None:
    """A counters-only read's map (no "pairs") decodes without inventing an empty list
    of pairs, and its report is its first line alone (no header row of no rows)."""
    t = map_table(SharedMap("seqs", (("seq", "uint64_t"),), "uint32_t", 8))
    got = decode(t, {"kind": "map", "items": 3, "entries": 8, "full": 1})
    assert "pairs" not in got and got["key"] == ["seq"]
    assert format_map("seqs", got) == ("table seqs: a hash map, 3 of 8 entries, "
                                       "1 updates refused (full)")
