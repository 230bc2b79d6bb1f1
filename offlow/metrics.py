"""The counters of a running program as Prometheus metrics (prometheus-client).

`families(stats)` turns the processes' stats (offlow.live.read, or the stats files of
a finished run: the same JSON) into metric families; `Collector` asks a running program
for them at every scrape; `Server` puts them on an HTTP endpoint (`offlow run --metrics
HOST:PORT`) and `exposition` gives the text format (`offlow stats`).  Every metric is
named `offlow_...`, labelled with the device and, where the runtime counts per core,
the segment and core (sum over cores for the whole segment).

Table updates: a table's stats that carry `updates` (the count of changes made to it
while it runs, which the control plane keeps) are exported as
`offlow_table_updates_total`; nothing else is needed here when it does.
"""

from __future__ import annotations

import ipaddress
import socket
import threading
from collections.abc import Callable, Iterable, Iterator
from socketserver import ThreadingMixIn
from typing import Any
from wsgiref.simple_server import WSGIRequestHandler, WSGIServer, make_server

from prometheus_client import CollectorRegistry, generate_latest, make_wsgi_app
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric
from prometheus_client.registry import Collector as _Collector

from offlow.errors import OfflowError

Stats = dict[str, dict[str, Any]]  # device -> the stats JSON of its process
WSGIApp = Callable[[dict[str, Any], Callable[..., Any]], Iterable[bytes]]

# the NIC cache's counters (kind nic_cache: ofl_kvc_stats_json) exported one by one
CACHE_COUNTERS = ("hits", "misses", "evictions", "writebacks", "fills", "bypass",
                  "invalidations", "drops")


class _Families:
    """Metric families being filled, by name (created on first use)."""

    def __init__(self) -> None:
        self.by_name: dict[str, Metric] = {}

    def add(self, kind: str, name: str, doc: str, labels: dict[str, str],
            value: float) -> None:
        fam = self.by_name.get(name)
        if fam is None:
            cls = CounterMetricFamily if kind == "counter" else GaugeMetricFamily
            fam = cls(name, doc, labels=list(labels))
            self.by_name[name] = fam
        fam.add_metric([str(v) for v in labels.values()], value)


def _core(f: _Families, dev: str, c: dict[str, Any]) -> None:
    """One segment core's counters: the core, its elements, rings and sources."""
    at = {"device": dev, "segment": str(c["segment"]), "core": str(c["core"])}
    f.add("counter", "offlow_segment_packets", "packets a segment core took in", at,
          c["pkts_in"])
    f.add("counter", "offlow_segment_bytes", "bytes a segment core took in", at, c["bytes_in"])
    f.add("gauge", "offlow_segment_seconds", "seconds since a segment core's first packet",
          at, c["elapsed_ns"] / 1e9)
    for el, v in c.get("elements", {}).items():
        e = {**at, "element": el}
        f.add("counter", "offlow_element_packets", "packets an element took in", e, v["in"])
        f.add("counter", "offlow_element_consumed", "packets an element used up (CONSUME)",
              e, v.get("consumed", 0))
        why = v.get("why", {})
        for reason, n in why.items():
            f.add("counter", "offlow_element_drops", "packets an element dropped, by reason",
                  {**e, "reason": reason}, n)
        if v["drop"] > sum(why.values()) or not why:
            f.add("counter", "offlow_element_drops", "packets an element dropped, by reason",
                  {**e, "reason": "dropped"}, v["drop"] - sum(why.values()))
    for q in c.get("queues", []):
        r = {**at, "queue": q["queue"], "side": q["side"], "prod": str(q["prod"]),
             "cons": str(q["cons"])}
        moved = q["pushed"] if q["side"] == "out" else q["popped"]
        f.add("counter", "offlow_queue_packets",
              "entries a ring took (side out: pushed) or gave (side in: popped)", r, moved)
        f.add("counter", "offlow_queue_doorbells", "batches published on a ring", r,
              q["doorbells"])
        f.add("counter", "offlow_queue_full_waits", "times a producer found its ring full",
              r, q["full_waits"])
        if q["side"] == "out":
            f.add("counter", "offlow_queue_bytes", "bytes pushed on a ring (entries' live "
                  "fields and packet bytes)", r, q["bytes"])
        else:
            n = q["occupancy_samples"]
            f.add("gauge", "offlow_queue_occupancy_avg", "mean entries waiting in a ring "
                  "when its consumer polled", r, q["occupancy_sum"] / n if n else 0.0)
            f.add("gauge", "offlow_queue_occupancy_max", "most entries waiting in a ring",
                  r, q["occupancy_max"])
            if "occupancy_now" in q:
                f.add("gauge", "offlow_queue_occupancy", "entries waiting in a ring now "
                      "(published, not yet released)", r, q["occupancy_now"])
    for ch in c.get("channels", []):
        k = {**at, "queue": ch["queue"], "channel": str(ch["channel"])}
        f.add("counter", "offlow_channel_packets", "packets a core took from one channel of "
              "a queue", k, ch["packets"])
        f.add("counter", "offlow_channel_bytes", "packet bytes a core took from one channel "
              "of a queue", k, ch["bytes"])
    for x in c.get("instances", []):
        f.add("counter", "offlow_queue_drops", "entries dropped at a full ring "
              "(enqueue=drop), by instance", {**at, "queue": x["queue"],
                                              "instance": str(x["instance"]),
                                              "reason": "ring_full"}, x["dropped"])
    for name, s in c.get("sources", {}).items():
        src = {**at, "source": name}
        f.add("counter", "offlow_source_packets", "frames a source read", src, s["packets"])
        f.add("counter", "offlow_source_bytes", "bytes a source read", src, s["bytes"])
        f.add("counter", "offlow_source_drops", "frames a source dropped, by reason",
              {**src, "reason": "longer_than_mtu"}, s.get("dropped", 0))
        if "cut_short" in s:  # (a capture's records cut by its snap length: report.py)
            f.add("counter", "offlow_source_drops", "frames a source dropped, by reason",
                  {**src, "reason": "cut_short"}, s["cut_short"])


def _table(f: _Families, dev: str, name: str, t: Any) -> None:
    """A table: an array's size (its elements, or its length alone as a live read
    without them has it: offlow.live); a table object's counters."""
    at = {"device": dev, "table": name}
    if isinstance(t, list) or isinstance(t, dict) and t.get("kind") == "array":
        f.add("gauge", "offlow_table_size", "entries of a table (items of a store)", at,
              len(t) if isinstance(t, list) else t.get("length", 0))
        return
    if not isinstance(t, dict):
        return
    if "updates" in t:
        f.add("counter", "offlow_table_updates", "changes made to a table while it runs",
              at, t["updates"])
    if t.get("kind") == "nic_cache":
        for k in CACHE_COUNTERS:
            if k in t:
                f.add("counter", f"offlow_nic_cache_{k}", f"the NIC cache's {k}", at, t[k])
        return
    if "items" in t:
        f.add("gauge", "offlow_table_size", "entries of a table (items of a store)", at,
              t["items"])
    for k, v in t.items():
        if isinstance(v, int) and k not in ("items", "updates"):
            f.add("gauge", "offlow_table_counter", "a table object's own counters",
                  {**at, "counter": k}, v)


def families(stats: Stats, up: bool = True) -> list[Metric]:
    """The metric families of the processes' stats; `up`: read live from a running
    program (else the last counts of one that has ended)."""
    f = _Families()
    f.add("gauge", "offlow_up", "1: the counters were read from the running program; "
          "0: the last ones read (the program has ended, or did not answer in time)", {},
          1 if up else 0)
    for dev, s in sorted(stats.items()):
        for c in s.get("cores", []):
            _core(f, dev, c)
        for name, t in s.get("tables", {}).items():
            _table(f, dev, name, t)
        for name, v in s.get("sinks", {}).items():
            at = {"device": dev, "sink": name}
            f.add("counter", "offlow_sink_packets", "packets a sink took", at, v["packets"])
            f.add("counter", "offlow_sink_bytes", "bytes a sink took", at, v["bytes"])
    return list(f.by_name.values())


class Collector(_Collector):
    """Metrics read at each scrape from `read()`: (stats, up) (Run.live_stats)."""

    def __init__(self, read: Callable[[], tuple[Stats, bool]]) -> None:
        self.read = read

    def collect(self) -> Iterator[Metric]:
        stats, up = self.read()
        yield from families(stats, up)


def registry(read: Callable[[], tuple[Stats, bool]]) -> CollectorRegistry:
    """A registry of its own (no process-wide state) holding one Collector."""
    reg = CollectorRegistry(auto_describe=False)
    reg.register(Collector(read))
    return reg


def exposition(stats: Stats, up: bool = True) -> str:
    """The Prometheus text format of `stats`."""
    return generate_latest(registry(lambda: (stats, up))).decode()


def parse_address(text: str) -> tuple[str, int]:
    """HOST:PORT (an IPv4 or [IPv6] address, or localhost; port 0..65535, 0: a free
    one) -> (host, port), or a clear error."""
    host, colon, port = text.rpartition(":")
    if not colon or not host:
        raise OfflowError(f"--metrics {text!r}: expected HOST:PORT (e.g. 127.0.0.1:9100)")
    host = host[1:-1] if host.startswith("[") and host.endswith("]") else host
    if host != "localhost":
        try:
            ipaddress.ip_address(host)
        except ValueError as e:
            raise OfflowError(f"--metrics {text!r}: `{host}` is not an IP address or "
                              "localhost") from e
    if not port.isdigit() or not 0 <= int(port) <= 65535:
        raise OfflowError(f"--metrics {text!r}: port `{port}` is not within 0..65535")
    return host, int(port)


class _Quiet(WSGIRequestHandler):
    """No log line per request."""

    def log_message(self, format: str, *args: Any) -> None:
        pass


class _Threading(ThreadingMixIn, WSGIServer):
    """A thread per request (daemon: a scrape in progress never holds the run up)."""

    daemon_threads = True


class _Threading6(_Threading):
    address_family = socket.AF_INET6


class Server:
    """The metrics endpoint, from a thread of its own: Prometheus text at /metrics (and
    any path `page` does not take); `page` (offlow/livepage.py) serves its paths."""

    def __init__(self, address: str, read: Callable[[], tuple[Stats, bool]],
                 page: tuple[tuple[str, ...], WSGIApp] | None = None) -> None:
        host, port = parse_address(address)
        text = make_wsgi_app(registry(read))
        paths, pages = page if page is not None else ((), text)

        def route(environ: dict[str, Any], start_response: Callable[..., Any]) -> Iterable[bytes]:
            app = pages if environ.get("PATH_INFO", "/") in paths else text
            return app(environ, start_response)

        cls = _Threading6 if ":" in host else _Threading
        try:
            self._server = make_server(host, port, route, server_class=cls, handler_class=_Quiet)
        except OSError as e:
            raise OfflowError(f"--metrics {address}: cannot listen there: "
                              f"{e.strerror or e}") from e
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True,
                                        name="offlow-metrics")
        self._thread.start()
        self.host, self.port = host, int(self._server.server_address[1])

    @property
    def url(self) -> str:
        host = f"[{self.host}]" if ":" in self.host else self.host
        return f"http://{host}:{self.port}/metrics"

    def close(self) -> None:
        """Stop serving and close the socket (a scrape already taken still gets its
        answer, from its own thread; one waiting to be taken is reset)."""
        self._server.shutdown()
        self._server.server_close()
        self._thread.join(timeout=5)
