"""`offlow explain --svg`: the SVG Graphviz draws, parsed back: every element in the
box of its segment, boxes coloured by device, every edge, queue edges labelled with
the fields and bytes that cross them, tables in (or beside) the boxes of the segments
that use them."""

from __future__ import annotations

import os
import re
import subprocess
import sys
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest

from offlow.build import plan_program
from offlow.cli import main
from offlow.dsl.loader import load_program
from offlow.explain import explain
from tests.e2e import ROOT

SVG = "{http://www.w3.org/2000/svg}"
ROUTER = ROOT / "examples" / "router.py"
BUCKETS = ROOT / "tests" / "programs" / "flow_buckets.py"

# A program on two devices whose table `seen` both use: it lives in the window.
BOTH_SIDES = '''
from offlow import Element, Port, Program, Shared, Sink, Source
from offlow.elements import ParseEth, Discard


class Mark(Element):
    """Counts a frame on the side it passes (slot 0: the NIC, 1: the host)."""

    inputs = (Port("inp", "any"),)
    outputs = (Port("out", "any"),)
    tables = ("seen",)
    params = {"slot": "uint32_t"}
    body = """
    seen[slot] += 1;   /* one core per side: plain adds */
    """


def program() -> Program:
    p = Program("both_sides")
    seen = Shared("seen", "uint64_t", 2)
    src, eth, out, junk = Source("wire"), ParseEth("eth"), Sink("tx"), Discard("junk")
    nic_mark, host_mark = Mark("on_nic", slot=0, seen=seen), Mark("on_host", slot=1, seen=seen)
    src >> eth
    eth["ipv4"] >> nic_mark >> host_mark >> out
    eth["ipv6"] >> junk
    eth["other"] >> junk
    p.segment("front", [src, eth, nic_mark, junk], device="nic", cores=[0])
    p.segment("back", [host_mark, out], device="host", cores=[0])
    return p
'''


class Drawing:
    """An SVG from Graphviz, read: clusters (title -> fill, box), nodes (title ->
    centre), edges (title -> their label text)."""

    def __init__(self, path: Path) -> None:
        root = ET.parse(path).getroot()
        self.clusters: dict[str, tuple[str, tuple[float, float, float, float]]] = {}
        self.nodes: dict[str, tuple[float, float]] = {}
        self.edges: dict[str, str] = {}
        for g in root.iter(f"{SVG}g"):
            kind = g.get("class", "").split()
            title = g.findtext(f"{SVG}title") or ""
            texts = [t.text or "" for t in g.iter(f"{SVG}text")]
            if "cluster" in kind:
                shape = g.find(f"{SVG}path")
                if shape is None:
                    shape = g.find(f"{SVG}polygon")
                assert shape is not None
                nums = [float(x) for x in re.findall(r"-?\d+(?:\.\d+)?",
                                                     shape.get("d") or shape.get("points", ""))]
                xs, ys = nums[0::2], nums[1::2]
                self.clusters[title] = (shape.get("fill", ""),
                                        (min(xs), min(ys), max(xs), max(ys)))
            elif "node" in kind:
                t = next(g.iter(f"{SVG}text"))
                self.nodes[title] = (float(t.get("x", 0)), float(t.get("y", 0)))
            elif "edge" in kind:
                self.edges[title] = "\n".join(texts)

    def inside(self, node: str, cluster: str) -> bool:
        x, y = self.nodes[node]
        x0, y0, x1, y1 = self.clusters[f"cluster_{cluster}"][1]
        return x0 <= x <= x1 and y0 <= y <= y1


def draw(program: Path, tmp_path: Path, *settings: str) -> tuple[Drawing, str]:
    svg = tmp_path / "design.svg"
    argv = ["explain", str(program), "--svg", str(svg)]
    for s in settings:
        argv += ["--set", s]
    assert main(argv) == 0
    return Drawing(svg), explain(plan_program(load_program(program, list(settings)), None))


def test_the_router_drawn(tmp_path: Path) -> None:
    d, text = draw(ROUTER, tmp_path)
    g = plan_program(load_program(ROUTER, []), None).graph
    for n in g.nodes:
        assert d.inside(n.name, n.segment), n.name
    for e in g.edges:
        assert f"{e.src}->{e.dst}" in d.edges, e
    fills = {s.name: d.clusters[f"cluster_{s.name}"][0] for s in g.segments}
    assert fills["rx"] == fills["route"] != fills["tx"]  # nic, nic, host
    # the IPv4 channel of rx->route: its fields and bytes, as explain says them
    label = d.edges["ip4->ttl4"]
    assert "rx->route" in label and "dst4, l3_off, ttl" in label
    per_packet = re.search(r"(\d+) B per 64 B packet", label)
    assert per_packet and (f"per 64 B packet {per_packet.group(1)} B cross the interconnect"
                           in text)
    assert re.search(r"\(7 B\) \+ timestamp \+ packet", label)  # dst4 4, l3_off 2, ttl 1
    # tables in the box of the segment that looks them up, tied to their elements
    for table, user in (("routes4", "lpm4"), ("routes6", "lpm6")):
        assert d.inside(f"table {table}", "route")
        assert f"{user}->table {table}" in d.edges
    # an element's several outputs name their ports
    assert d.edges["eth->ip4"] == "ipv4"


def test_a_users_program_with_a_channel_and_the_host_placement(tmp_path: Path) -> None:
    """flow_buckets (comments in bodies, its own names, an odd table size, a channel),
    with its NIC segment moved to the host: every box is the host's colour."""
    d, _ = draw(BUCKETS, tmp_path)
    prog = plan_program(load_program(BUCKETS, []), None).graph
    assert d.inside("table buckets", "host_part") and not d.inside("table buckets", "nic_part")
    assert {"tally->table buckets", "first_two->table buckets"} <= set(d.edges)
    assert "first_two" in d.nodes  # the channel's handler
    assert "bucket (1 B)" in d.edges["fb->tally"]  # the one field the host reads
    moved = [f"{s.name}.device=host" for s in prog.segments]
    d2, _ = draw(BUCKETS, tmp_path, *moved)
    assert len({fill for fill, _ in d2.clusters.values()}) == 1


def test_a_table_of_the_window_sits_outside_the_boxes(tmp_path: Path) -> None:
    prog = tmp_path / "both_sides.py"
    prog.write_text(BOTH_SIDES)
    d, _ = draw(prog, tmp_path)
    assert not any(d.inside("table seen", s) for s in ("front", "back"))
    assert "on_nic->table seen" in d.edges and "on_host->table seen" in d.edges
    assert "no fields (0 B) + timestamp + packet" in d.edges["on_nic->on_host"]


@pytest.mark.parametrize("where", ["missing-folder", "a-folder"])
def test_a_bad_svg_path_is_one_clear_error(where: str, tmp_path: Path) -> None:
    target = tmp_path / "nowhere" / "x.svg" if where == "missing-folder" else tmp_path
    p = subprocess.run([sys.executable, "-m", "offlow.cli", "explain", str(ROUTER), "--svg",
                        str(target)], capture_output=True, text=True, timeout=120, cwd=ROOT)
    assert p.returncode == 2 and p.stdout == ""
    assert p.stderr.startswith(f"offlow: error: --svg {target}:") and p.stderr.count("\n") == 1


def test_without_graphviz_it_says_how_to_get_it(tmp_path: Path) -> None:
    p = subprocess.run([sys.executable, "-m", "offlow.cli", "explain", str(ROUTER), "--svg",
                        str(tmp_path / "x.svg")], capture_output=True, text=True, timeout=120,
                       cwd=ROOT, env={**os.environ, "PATH": str(tmp_path)})
    assert p.returncode == 2 and "apt-get install graphviz" in p.stderr
    assert not (tmp_path / "x.svg").exists()
