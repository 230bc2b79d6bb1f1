"""What `offlow run` and `offlow explain` print, as a user reads them: every packet
accounted for in one place (read = forwarded + dropped, per element and reason, +
consumed), a large shared table kept to a readable line, a queue that stays on one
device not said to cross the interconnect, a compile failure without warnings."""

from __future__ import annotations

import json
import textwrap
from pathlib import Path

import pytest

from offlow.cli import main
from offlow.testing import write_malformed_pcap
from tests.e2e import EXAMPLE, TLS, read_frames, run_example
from tests.test_c_bodies import write_program

ROOT = Path(__file__).resolve().parents[1]


def test_the_run_report_accounts_for_every_packet(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    capture = tmp_path / "bad.pcap"
    want = write_malformed_pcap(capture)
    assert main(["run", str(EXAMPLE), "--input", str(capture)]) == 0
    out = capsys.readouterr().out
    forwarded = want["valid_ipv4"] + want["valid_ipv6"]
    assert (f"packets: {want['total']} read = {forwarded} forwarded + {want['bad']} dropped + "
            f"{want['other']} consumed") in out
    rows = [ln.split()[:4] for ln in out.splitlines()]
    # ParseL4's drops with their reasons (a UDP length past the IP payload among them)
    assert ["l4", "dropped:", "past_payload", "4"] in rows
    assert ["l4", "dropped:", "truncated", "4"] in rows
    assert ["ip4", "dropped:", "bad_checksum", "1"] in rows
    # the Discard element's packets are consumed, not only counted as its input
    assert ["non_ip", "consumed", str(want["other"])] in [r[:3] for r in rows]


def test_copies_and_drops_balance_in_the_accounting(tmp_path: Path) -> None:
    tee = ROOT / "tests" / "programs" / "tee.py"
    s = run_example(program=tee, input=TLS, output=tmp_path / "out.pcap")
    assert s["ok"], s["errors"]
    a = s["accounting"]
    assert a["read"] == len(read_frames(TLS)) and a["copies"] > 0
    assert a["unaccounted"] == 0
    assert a["forwarded"] == len(read_frames(tmp_path / "out.pcap"))


def test_a_large_shared_table_is_printed_on_a_readable_line(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    prog = tmp_path / "hist.py"
    prog.write_text(textwrap.dedent('''\
        from offlow import Element, Program, Shared, Sink, Source


        class Histogram(Element):
            tables = ("hist",)
            body = r"""
            hist[(pkt->ts_ns / 1000u) % 16384u] += 1;  /* synthetic packets: 1 us apart */
            """


        def program() -> Program:
            p = Program("hist")
            hist = Shared("hist", "uint32_t", 16384)
            src, h, out = Source("rx"), Histogram("h", hist=hist), Sink("tx")
            src >> h >> out
            p.segment("all", [src, h, out], device="host")
            return p
        '''))
    assert main(["run", str(prog), "--count", "10000"]) == 0
    line = next(x for x in capsys.readouterr().out.splitlines() if x.startswith("table hist"))
    assert len(line) < 400, len(line)
    assert "... and 9984 more nonzero of 16384 entries (--json has them all)" in line
    assert main(["run", str(prog), "--count", "10000", "--json"]) == 0
    out = capsys.readouterr().out
    table = json.loads(out)["tables"]["hist"]
    assert len(table) == 16384 and sum(table) == 10000
    # the array on one line (offlow/jsontext.py), not one line per entry
    assert f'    "hist": {json.dumps(table)}' in out.splitlines()


def test_explain_says_a_queue_on_one_device_does_not_cross_the_interconnect(
        capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["explain", str(EXAMPLE), "--set", "rx.device=host"]) == 0
    out = capsys.readouterr().out
    assert "B are copied through the ring" in out and "cross the interconnect" not in out
    assert main(["explain", str(EXAMPLE)]) == 0
    assert "B cross the interconnect" in capsys.readouterr().out


def test_a_compile_failure_shows_the_error_not_warnings(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    prog, first = write_program(tmp_path, "\nuint32_t x = 1;   /* set, never used: a warning "
                                          "*/\nx += undeclared_thing;   /* the error */\n")
    assert main(["run", str(prog), "--count", "10"]) == 2
    err = capsys.readouterr().err
    assert f"{prog}:{first + 2}:" in err and "undeclared_thing" in err
    assert "warning" not in err, err


def test_packets_a_remote_link_did_not_deliver_are_counted_drops_in_the_equation() -> None:
    """An aborted run's ring entries that crossed a remote device's link and were never
    taken on the far side (the stand-in's `link` counts) are drops of their own, by
    direction, so read = forwarded + dropped holds; the text report says what the link
    did not deliver."""
    from types import SimpleNamespace

    from offlow.report import account, format_summary

    link = {"entries_to_device": 5, "entries_from_device": 1, "chan_to_device": 4,
            "chan_from_device": 0, "lost_sends": 0, "dropped_in_device": 3,
            "dropped_in_host": 0}
    a = account(SimpleNamespace(nodes=[], mtu=1514),  # type: ignore[arg-type]
                {"rx": {"packets": 13}}, {}, [], {"tx": {"packets": 7}}, {"remote:a": link})
    # (of the 5 for the device, 3 came to a ring broken there: said apart, not twice)
    assert [(d["at"], d["reason"], d["packets"]) for d in a["dropped"]] == [
        ("remote:a", "link_aborted_to_device", 2), ("remote:a", "ring_broken_on_device", 3),
        ("remote:a", "link_aborted_from_device", 1)]
    assert a["unaccounted"] == 0
    text = format_summary({"segments": [], "queues": [], "accounting": a, "tables": {},
                           "sources": {}, "sinks": {}, "mtu": 1514, "links": {"remote:a": link}})
    assert ("link remote:a: not delivered: entries_to_device 5, entries_from_device 1, "
            "chan_to_device 4, chan_from_device 0, lost_sends 0, dropped_in_device 3, "
            "dropped_in_host 0") in text


def test_a_remote_device_whose_counts_never_came_is_in_the_equation_as_its_link_saw_it(
        ) -> None:
    """The link ended before the device's stats came back: of the 10 frames the host read
    and sent, the device was seen to take 6 (where they ended is not known: a drop of its
    own, not a gap) and 4 never credited; the 5 that came back from it stand beside read
    (its elements' counts are missing), so the equation holds and the text says so (it
    was 1 unaccounted: the host's side alone cannot balance)."""
    from types import SimpleNamespace

    from offlow.report import account, format_accounting

    link = {"entries_to_device": 4, "entries_from_device": 0, "chan_to_device": 0,
            "chan_from_device": 0, "lost_sends": 0, "dropped_in_device": 0,
            "dropped_in_host": 0, "in_device_uncounted": 6, "from_device_uncounted": 5}
    a = account(SimpleNamespace(nodes=[], mtu=1514),  # type: ignore[arg-type]
                {"rx": {"packets": 10}}, {}, [], {"tx": {"packets": 5}}, {"remote:a": link})
    assert [(d["at"], d["reason"], d["packets"]) for d in a["dropped"]] == [
        ("remote:a", "link_aborted_to_device", 4),
        ("remote:a", "in_device_when_link_ended", 6)]
    assert (a["from_devices"], a["unaccounted"]) == (5, 0)
    assert format_accounting(a).startswith(
        "packets: 10 read + 5 from remote devices whose counts never came = 5 forwarded + "
        "10 dropped + 0 consumed\n")
