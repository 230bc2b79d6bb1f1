"""The live page of `offlow run --metrics`: the design's picture whose boxes, elements
and queue edges the page fills with rates from live.json; looked at in headless
Chromium (Debian `chromium`) while traffic runs: its DOM shows non-zero rates and its
screenshot the boxes in their devices' colours."""

from __future__ import annotations

import json
import re
import shutil
import subprocess
import time
import urllib.request
import xml.etree.ElementTree as ET
from collections.abc import Iterator
from pathlib import Path

import pytest

from offlow.dsl.loader import load_program
from offlow.picture import COLOURS
from offlow.runner import Run, RunOptions, build_for
from tests.e2e import EXAMPLE

SVG = "{http://www.w3.org/2000/svg}"
CHROMIUM = shutil.which("chromium")


def get(url: str) -> bytes:
    with urllib.request.urlopen(url, timeout=10) as r:
        return r.read()


@pytest.fixture(scope="module")
def running() -> Iterator[str]:
    """The TTL pipeline on synthetic traffic for a while: its page's base URL."""
    o = RunOptions(duration=60, timeout=180, metrics="127.0.0.1:0")
    r = Run(build_for(load_program(EXAMPLE), o, werror=True), o)
    r.start()
    try:
        assert r.metrics is not None
        yield r.metrics.url.removesuffix("metrics")
    finally:
        r.stop()
        res = r.wait()
        assert res.ok, res.errors


def packets(counts: dict, kind: str) -> int:
    return sum(v["packets"] for v in counts[kind].values())


def test_live_json_is_keyed_as_the_pictures_titles_and_grows(running: str) -> None:
    root = ET.fromstring(get(running + "design.svg"))
    titles: dict[str, set[str]] = {"node": set(), "edge": set(), "cluster": set()}
    for g in root.iter(f"{SVG}g"):
        kind = (g.get("class") or "").split()[:1]
        if kind and kind[0] in titles:
            titles[kind[0]].add(g.findtext(f"{SVG}title") or "")
    first = json.loads(get(running + "live.json"))
    assert titles["cluster"] == set(first["segments"])
    assert {t for t in titles["node"] if not t.startswith("table ")} == set(first["elements"])
    assert set(first["edges"]) <= titles["edge"] and first["edges"]
    # (the processes answer before their sources start: a first read may count nothing)
    deadline = time.monotonic() + 60
    while packets(first, "segments") == 0:
        assert time.monotonic() < deadline, "nothing was ever counted"
        time.sleep(0.2)
        first = json.loads(get(running + "live.json"))
    while True:
        later = json.loads(get(running + "live.json"))
        if packets(later, "segments") > packets(first, "segments"):
            break
        assert time.monotonic() < deadline, "the counts did not grow"
        time.sleep(0.2)
    assert later["up"] is True
    # each queue edge counts its own channel (the TTL pipeline's IPv4 one carries all
    # of its synthetic traffic, the IPv6 one none)
    assert packets(later, "edges") > 0
    assert later["edges"]["ttl4->l4"]["packets"] > 0 == later["edges"]["ttl6->l4"]["packets"]
    ring = later["edges"]["ttl4->l4"]
    assert 0 <= ring["occupancy_now"] <= 1024 and ring["occupancy_max"] <= 1024  # ring_size
    html = get(running).decode()
    assert "live.json" in html and "design.svg" in html


@pytest.mark.skipif(CHROMIUM is None, reason="needs Debian's chromium (apt-get install "
                    "chromium) for the headless browser")
def test_the_page_in_headless_chromium_shows_rates(running: str, tmp_path: Path) -> None:
    def chromium(*args: str) -> subprocess.CompletedProcess[str]:
        assert CHROMIUM is not None
        return subprocess.run(
            [CHROMIUM, "--headless", "--no-sandbox", "--disable-gpu", "--hide-scrollbars",
             f"--user-data-dir={tmp_path / 'profile'}", "--window-size=1400,900",
             "--virtual-time-budget=5000", *args, running],
            capture_output=True, text=True, timeout=120)

    dom = chromium("--dump-dom")
    assert dom.returncode == 0, dom.stderr
    moving = re.findall(r'<text[^>]*class="live moving"[^>]*>([^<]*)</text>', dom.stdout)
    rates = [float(m.group(1)) for t in moving
             if (m := re.match(r"([\d.]+) [kM]?pps", t))]
    assert rates and all(r > 0 for r in rates), moving
    assert "running" in dom.stdout
    shot = tmp_path / "page.png"
    res = chromium(f"--screenshot={shot}")
    assert res.returncode == 0 and shot.exists(), res.stderr
    image = pytest.importorskip("matplotlib.image")
    pixels = image.imread(shot)[:, :, :3]
    colours = {tuple(int(round(c * 255)) for c in p) for p in pixels.reshape(-1, 3)[::7]}
    for device in ("nic", "host"):
        want = tuple(int(COLOURS[device][i:i + 2], 16) for i in (1, 3, 5))
        assert want in colours, device
