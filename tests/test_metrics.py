"""The counters of a running program: scraped from `offlow run --metrics` by a real
Prometheus parser (prometheus-client's), printed by `offlow stats WINDOW`, and a
scrape while the run shuts down (a clean answer or a refused connection, never a
failed run)."""

from __future__ import annotations

import http.client
import ipaddress
import random
import re
import signal
import socket
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.request
from pathlib import Path

import pytest
from prometheus_client.parser import text_string_to_metric_families

from offlow import live, metrics
from offlow.dsl.loader import load_program
from offlow.errors import OfflowError
from offlow.runner import Run, RunOptions, build_for
from tests.e2e import EXAMPLE, ROOT, TLS, window_in
from tests.example_outputs import _write_requests
from tests.test_errors_before_start import offlow_run

KVS_CACHE = ROOT / "examples" / "kvs_cache.py"


def scrape(url: str) -> dict[str, dict[tuple[tuple[str, str], ...], float]]:
    """Every sample of the endpoint, parsed by prometheus-client: name -> labels -> value."""
    with urllib.request.urlopen(url, timeout=120) as r:
        text = r.read().decode()
    out: dict[str, dict[tuple[tuple[str, str], ...], float]] = {}
    for fam in text_string_to_metric_families(text):
        for s in fam.samples:
            out.setdefault(s.name, {})[tuple(sorted(s.labels.items()))] = s.value
    return out


def total(samples: dict[str, dict[tuple[tuple[str, str], ...], float]], name: str,
          **labels: str) -> float:
    """The sum of `name`'s samples whose labels include `labels`."""
    return sum(v for k, v in samples.get(name, {}).items()
               if set(labels.items()) <= set(k))


def start(program: Path, o: RunOptions) -> Run:
    r = Run(build_for(load_program(program), o, werror=True), o)
    r.start()
    return r


def wait_for(check, timeout: float = 60.0) -> None:  # type: ignore[no-untyped-def]
    """Poll `check()` until it is true (no timing is asserted: only that it happens)."""
    end = time.monotonic() + timeout
    while not check():
        assert time.monotonic() < end, "timed out"
        time.sleep(0.1)


def test_a_running_cache_is_scraped_and_its_counters_grow(tmp_path: Path) -> None:
    """examples/kvs_cache.py replays memcached requests for a while: two scrapes
    during the run parse, the packet counters grow between them, the NIC cache's
    counters are there and count every cacheable request; `offlow stats` prints the
    same metrics from the window alone."""
    requests = tmp_path / "requests.pcap"
    _write_requests(requests)
    r = start(KVS_CACHE, RunOptions(input=requests, duration=30, timeout=120,
                                    metrics="127.0.0.1:0"))
    try:
        assert r.metrics is not None
        url = r.metrics.url
        first: dict = {}

        def counting() -> bool:
            first.update(scrape(url))
            return total(first, "offlow_segment_packets_total") > 0

        wait_for(counting)
        assert total(first, "offlow_up") == 1
        n1 = total(first, "offlow_segment_packets_total")
        second: dict = {}

        def grown() -> bool:  # (and a miss has crossed: counted when its batch is sent)
            second.update(scrape(url))
            return (total(second, "offlow_segment_packets_total") > n1 and
                    total(second, "offlow_channel_packets_total", queue="parse->store",
                          channel="0") > 0)

        wait_for(grown)
        for name in ("hits", "misses", "evictions", "writebacks"):
            assert (("device", "nic"), ("table", "cache")) in second[
                f"offlow_nic_cache_{name}_total"], name
        # (replayed requests: their replies race the same keys' next requests, so the
        # cache mostly misses; every count is read live and can only grow)
        cache = {k: total(second, f"offlow_nic_cache_{k}_total", table="cache")
                 for k in ("misses", "bypass")}
        assert cache["misses"] > 0 and cache["bypass"] > 0
        assert total(second, "offlow_queue_doorbells_total") > 0
        # every ring's entries waiting now: within its size (the default 1024)
        assert second["offlow_queue_occupancy"]
        assert all(0 <= v <= 1024 for v in second["offlow_queue_occupancy"].values())
        # the misses cross to the store on one channel of parse->store (waited for above)
        assert total(second, "offlow_channel_bytes_total", queue="parse->store") > 0
        stats = subprocess.run([sys.executable, "-m", "offlow.cli", "stats", str(r.window)],
                               capture_output=True, text=True, timeout=60, cwd=ROOT)
        assert stats.returncode == 0, stats.stderr
        names = {s.name for f in text_string_to_metric_families(stats.stdout)
                 for s in f.samples}
        assert {"offlow_up", "offlow_segment_packets_total", "offlow_nic_cache_hits_total",
                "offlow_queue_occupancy_max"} <= names
    finally:
        r.stop()
        res = r.wait()
    assert res.ok, res.errors
    final = res.stats["nic"]["tables"]["cache"]
    assert 0 < cache["misses"] <= final["misses"] and cache["bypass"] <= final["bypass"]


def test_a_scrape_during_shutdown_gets_an_answer_or_a_refusal() -> None:
    """Scrapes hammer the endpoint while a short run starts, runs and ends: each one
    gets a whole answer (the live counts, then the last ones) or, once the server
    closes, a network error (reset, then refused); the run ends ok."""
    r = start(EXAMPLE, RunOptions(input=TLS, loops=200, timeout=120, metrics="127.0.0.1:0"))
    assert r.metrics is not None
    url = r.metrics.url
    answers: list[dict] = []
    errors: list[BaseException] = []

    def hammer() -> None:
        while True:
            try:
                answers.append(scrape(url))
            except (urllib.error.URLError, OSError, http.client.HTTPException) as e:
                errors.append(e)
                if isinstance(getattr(e, "reason", None), ConnectionRefusedError):
                    return  # the server is gone

    t = threading.Thread(target=hammer)
    t.start()
    res = r.wait()
    t.join(timeout=30)
    assert res.ok, res.errors
    assert not t.is_alive()
    assert answers and all("offlow_up" in a for a in answers)
    assert any(total(a, "offlow_up") == 1 for a in answers)
    # a scrape the closing server had not yet taken is reset: a plain network error
    assert all(isinstance(getattr(e, "reason", e), ConnectionError | http.client.HTTPException)
               for e in errors), errors
    forwarded = res.stats["host"]["sinks"]["tx"]["packets"]
    last = answers[-1]
    if total(last, "offlow_up") == 0:  # the processes had ended: their last counts
        assert total(last, "offlow_sink_packets_total", sink="tx") == forwarded


def test_stats_of_a_window_that_is_gone_is_one_clear_error(tmp_path: Path) -> None:
    for window, says in ((Path("/dev/shm/offlow-gone-1-0badcafe"), "no such window"),
                         (ROOT / "README.md", "not an offlow window")):
        p = subprocess.run([sys.executable, "-m", "offlow.cli", "stats", str(window)],
                           capture_output=True, text=True, timeout=60, cwd=ROOT)
        assert p.returncode == 2 and says in p.stderr, p.stderr
        assert p.stderr.count("\n") == 1 and "Traceback" not in p.stderr


@pytest.mark.parametrize("every", ["0", "-1"])
def test_stats_every_must_be_positive(every: str) -> None:
    p = subprocess.run([sys.executable, "-m", "offlow.cli", "stats", "/dev/shm/x",
                        "--every", every], capture_output=True, text=True, timeout=60)
    assert p.returncode == 2 and "must be a number of seconds above 0" in p.stderr


def test_a_metrics_port_in_use_is_one_clear_error_before_any_process(tmp_path: Path) -> None:
    with socket.socket() as busy:
        busy.bind(("127.0.0.1", 0))
        busy.listen()
        port = busy.getsockname()[1]
        rc, out, err = offlow_run(["run", str(EXAMPLE), "--input", str(TLS), "--metrics",
                                   f"127.0.0.1:{port}"], tmp_path)
    assert rc == 2, err
    assert f"--metrics 127.0.0.1:{port}: cannot listen there" in err
    assert len(err.strip().splitlines()) == 1


def test_metrics_addresses_fuzzed() -> None:
    """Any text is an address or one OfflowError (never another exception)."""
    rng = random.Random(33)
    alphabet = "0123456789.:[]abcdef localhost-\x00é"
    for _ in range(3000):
        text = "".join(rng.choice(alphabet) for _ in range(rng.randrange(0, 24)))
        try:
            host, port = metrics.parse_address(text)
        except OfflowError:
            continue
        assert 0 <= port <= 65535
        assert host == "localhost" or ipaddress.ip_address(host)
    for text in ("127.0.0.1:0", "[::1]:9100", "localhost:65535"):
        metrics.parse_address(text)


@pytest.mark.parametrize("content", [b"", b"short", bytes(4096), bytes(range(256)) * 16])
def test_stats_of_a_file_that_is_no_window_is_one_clear_error(content: bytes,
                                                              tmp_path: Path) -> None:
    path = tmp_path / "offlow-fake-1-0badcafe"
    path.write_bytes(content)
    with pytest.raises(OfflowError, match="offlow window"):
        live.read(path, timeout=0.1)
    with pytest.raises(OfflowError, match="offlow window"):
        live.read(tmp_path, timeout=0.1)  # a folder


PROGRESS = re.compile(r"offlow: running, \d+ of 120 s: ([\d,]+) packets read \(([\d.,]+) "
                      r"(M?pps)\), ([\d,]+) forwarded, ([\d,]+) dropped")


def test_a_long_run_shows_progress_and_stats_every_follows_it_to_its_end(
        tmp_path: Path) -> None:
    """`offlow run --duration 120` as a user runs it: a progress line every 5 s with the
    packets read, their rate, forwarded and dropped; `offlow stats WINDOW --every 0.5`
    (the window it prints) prints the counters again and again, growing, and stops
    cleanly (status 0) when the run ends. The run lasts until the test has read a
    progress line with the counts (any of them: a loaded machine may leave one without,
    when the processes answer after 0.5 s), then is stopped by Ctrl-C."""
    run = subprocess.Popen([sys.executable, "-m", "offlow.cli", "run", str(EXAMPLE),
                            "--duration", "120", "--window-file", str(tmp_path / "window.json")],
                           cwd=ROOT, stdout=subprocess.PIPE,
                           stderr=subprocess.PIPE, text=True)
    shots_out = tmp_path / "stats.out"
    stats: subprocess.Popen[str] | None = None
    try:
        assert run.stderr is not None
        window = window_in(run, tmp_path / "window.json")
        lines: list[str] = []
        with shots_out.open("w") as out:
            stats = subprocess.Popen([sys.executable, "-m", "offlow.cli", "stats", window,
                                      "--every", "0.5"], cwd=ROOT, stdout=out,
                                     stderr=subprocess.PIPE, text=True)
            progress = None
            for line in run.stderr:
                lines.append(line)
                progress = PROGRESS.search(line)
                if progress:
                    break
            run.send_signal(signal.SIGINT)
            rest = run.stderr.read()
            run.wait(timeout=120)
            _, stats_err = stats.communicate(timeout=120)
    finally:
        for p in (run, stats):
            if p is not None and p.poll() is None:
                p.kill()
    assert run.returncode == 0, "".join(lines) + rest
    assert stats is not None and stats.returncode == 0, stats_err
    assert "offlow: stopped:" in stats_err, stats_err
    shots = [s for s in shots_out.read_text().split("# HELP offlow_up") if s.strip()]
    assert len(shots) >= 2
    read = [sum(s.value for f in text_string_to_metric_families("# HELP offlow_up" + shot)
                for s in f.samples
                if s.name == "offlow_segment_packets_total" and s.labels["segment"] == "rx")
            for shot in shots]
    assert read == sorted(read) and read[-1] > read[0]
    assert progress, "".join(lines)
    assert int(progress.group(1).replace(",", "")) > 0
    assert float(progress.group(2).replace(",", "")) > 0
