"""The sharded key-value store's rows of `offlow bench remote`: examples/kvs_shards.py
with its store segment spread by key over 1, 2 and 3 remote store hosts (network
namespaces joined to the host's by a bridge, an `offlow serve-device` in each, UCX over
TCP), beside the same program with its store on `nic` (one machine, shared memory) in
the same run. Floem's workload (offlow.kvs.capture: Zipf 0.9 over 100k keys of 32 B,
64 B values, 90% GET) replayed from memory; each row's replies are counted (one per
request, none dropped). Every namespace shares this machine's CPUs: see
docs/remote.md on reading the scaling. With `loopback` the store hosts are servers in
this namespace on 127.0.0.1 (`offlow bench remote --loopback`)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Iterator
from contextlib import AbstractContextManager, ExitStack, contextmanager, nullcontext
from pathlib import Path

from benchmarks.common.netns import star_namespaces
from offlow.errors import OfflowError
from offlow.inputs import read_capture
from offlow.kvs.capture import kvs_requests

ROOT = Path(__file__).resolve().parent.parent
PROGRAM = ROOT / "examples" / "kvs_shards.py"
NS_PREFIX = "ofl-bench-kvs"
INSTANCES = 6  # a multiple of 1, 2 and 3 hosts: every host takes as many instances
ENV = {"UCX_TLS": "tcp"}
CLI = [sys.executable, "-m", "offlow.cli"]


@contextmanager
def _serve_device(ns: str, addr: str, secret: Path) -> Iterator[int]:
    """An `offlow serve-device` in namespace `ns` (none: here) on a free port of `addr`:
    the port."""
    p = subprocess.Popen([*_in(ns), *CLI, "serve-device", "--listen",
                          f"{addr}:0", "--secret-file", str(secret)],
                         env={**os.environ, **ENV}, stdout=subprocess.DEVNULL,
                         stderr=subprocess.PIPE, text=True)
    try:
        assert p.stderr is not None
        seen = ""
        for line in p.stderr:
            seen += line
            if "listening on" in line:
                break
        else:
            raise OfflowError(f"serve-device in {ns or 'this namespace'} did not listen: "
                              f"{seen[-400:]}")
        yield int(line.rsplit(":", 1)[1])
    finally:
        p.kill()
        p.communicate()


def _run(args: list[str], ns: str, timeout: float) -> dict:
    """`offlow run ARGS --json` in namespace `ns` (none: here): its summary, checked ok."""
    cmd = [*_in(ns), *CLI, "run", *args, "--json"]
    p = subprocess.run(cmd, env={**os.environ, **ENV}, capture_output=True, text=True,
                       timeout=timeout)
    try:
        s = json.loads(p.stdout)
    except json.JSONDecodeError:
        raise OfflowError(f"the kvs run failed (status {p.returncode}): "
                          f"{(p.stdout + p.stderr)[-600:]}") from None
    if p.returncode or not s.get("ok"):
        raise OfflowError(f"the kvs run failed: {s.get('errors')} {p.stderr[-400:]}")
    return s


def _in(ns: str) -> list[str]:
    """The prefix that runs a command in namespace `ns` (none for "": this one)."""
    return ["ip", "netns", "exec", ns] if ns else []


StoreHosts = tuple[str, list[tuple[str, str]]]  # the host's namespace, (namespace, address)s


def _store_hosts(n: int, loopback: bool) -> AbstractContextManager[StoreHosts]:
    """The host's namespace and the `n` store hosts' (namespace, address): namespaces on
    a bridge, made and removed here, or with `loopback` this namespace's 127.0.0.1."""
    if loopback:
        return nullcontext(("", [("", "127.0.0.1")] * n))
    return star_namespaces(NS_PREFIX, n)


def _row(s: dict, where: str, hosts: int, requests: int) -> dict:
    """A run's row: the store's ops/s (requests it served over the time its busiest core
    ran) and the host's parse rate, its counts checked."""
    seg = {x["segment"]: x for x in s["segments"]}
    store, replies = seg["store"], s["sinks"]["tx"]["packets"]
    if store["packets"] != requests or replies != requests or store["drops"]:
        raise OfflowError(f"kvs {where}: {requests} requests, the store took "
                          f"{store['packets']} and {replies} replies came back")
    return {"where": where, "hosts": hosts, "requests": requests, "replies": replies,
            "seconds": store["seconds"], "ops_per_s": store["mpps"] * 1e6,
            "parse_per_s": seg["parse"]["mpps"] * 1e6,
            "items": s["tables"]["shard"]["items"],
            "by_instance": s["queues"][0]["packets_by_instance"]}


def measure(hosts: tuple[int, ...], count: int, loops: int, tmp: Path,
            timeout: float = 600, loopback: bool = False) -> list[dict]:
    """The nic row, then a row per number of remote store hosts."""
    capture, secret = tmp / "kvs-requests.pcap", tmp / "kvs-secret"
    kvs_requests(capture, count=count)
    secret.write_bytes(os.urandom(32).hex().encode())
    secret.chmod(0o600)
    base = [str(PROGRAM), "--input", str(capture), "--loops", str(loops), "--output",
            str(tmp / "kvs-replies.pcap"), "--set", f"parse->store.instances={INSTANCES}"]
    requests = read_capture(capture).frames * loops
    rows = [_row(_run([*base, "--set", "store.device=nic"], "", timeout), "nic", 0, requests)]
    for n in hosts:
        with ExitStack() as stack:
            host, stores = stack.enter_context(_store_hosts(n, loopback))
            names = [f"s{k}" for k in range(n)]
            remotes = []
            for name, (ns, addr) in zip(names, stores, strict=True):
                port = stack.enter_context(_serve_device(ns, addr, secret))
                remotes += ["--remote", f"{name}={addr}:{port}"]
            devices = ",".join(f"remote:{x}" for x in names)
            s = _run([*base, "--set", f"parse->store.devices={devices}", *remotes,
                      "--secret-file", str(secret)], host, timeout)
        rows.append(_row(s, f"{n} remote host{'s' * (n > 1)}", n, requests))
    one = next((r for r in rows if r["hosts"] == 1), None)
    for r in rows:
        r["vs_nic"] = r["ops_per_s"] / rows[0]["ops_per_s"] if rows[0]["ops_per_s"] else None
        r["vs_one_host"] = (r["ops_per_s"] / one["ops_per_s"]
                            if one and one["ops_per_s"] and r["hosts"] else None)
    return rows


def format_table(rows: list[dict]) -> str:
    """The rows as text."""
    head = (f"{'store on':>16} | {'requests':>9} | {'store Kops/s':>12} | {'parse Kops/s':>12} "
            f"| {'vs nic':>6} | {'vs 1 host':>9}")
    out = [head, "-" * len(head)]
    for r in rows:
        one = f"{r['vs_one_host']:.2f}" if r["vs_one_host"] is not None else "-"
        nic = f"{r['vs_nic']:.2f}" if r["vs_nic"] is not None else "-"
        out.append(f"{r['where']:>16} | {r['requests']:>9} | {r['ops_per_s'] / 1e3:>12.1f} | "
                   f"{r['parse_per_s'] / 1e3:>12.1f} | {nic:>6} | {one:>9}")
    return "\n".join(out)
