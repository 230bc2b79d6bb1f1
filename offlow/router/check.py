"""`offlow router check`: every answer of the C lookup tables against the reference.

The C program lpm_check.c (built once per content hash into $OFFLOW_CACHE or
~/.cache/offlow) reads the prefix file with the runtime's reader, builds the IPv4
DIR-24-8 table and the IPv6 table (the trie its lookups walk, and the hash levels the
gpu target reads, walked batched on the CPU: counted apart), and looks up the
addresses it is given with both the scalar and the batched lookups. The addresses:
the first and the last address of every prefix, plus `random` addresses per family,
half uniform over the whole address space and half inside a uniformly chosen prefix
with random host bits. Every answer is compared with `offlow.router.reference`
(prefixes parsed by Python's `ipaddress`, hops by the same documented rule); the
reference's numpy search is itself held to its plain per-length dict loop on a
sample. Any mismatch, or a disagreement on which lines hold prefixes, fails the
check.
"""

from __future__ import annotations

import argparse
import ipaddress
import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

from offlow.cbuild import RUNTIME, build_exe
from offlow.errors import OfflowError
from offlow.router import DEFAULT_PORTS, MAX_HOP
from offlow.router.check_args import DEFAULT_PREFIXES, DEFAULT_RANDOM, add_arguments
from offlow.router.reference import Reference, next_hop, read_prefixes

DRIVER = Path(__file__).with_name("lpm_check.c")
TOOLS = RUNTIME / "tools"  # the drivers' file helpers (tool_io)
# Addresses per family whose reference answers are recomputed by the dict loop.
SAMPLE = 2_000
EXAMPLES = 10

ALL64 = np.uint64(0xFFFFFFFFFFFFFFFF)


def build_driver() -> Path:
    """Compile lpm_check.c with the runtime's lpm library, once per content hash of the
    sources and headers; return the executable."""
    return build_exe("lpm_check", [DRIVER, TOOLS / "tool_io.c"], ["lpm"], includes=[TOOLS])


# ---- addresses ---------------------------------------------------------------------


def _mask32(lens: np.ndarray) -> np.ndarray:
    lens = lens.astype(np.uint64)
    return (np.left_shift(np.uint64(0xFFFFFFFF), np.uint64(32) - lens)
            & np.uint64(0xFFFFFFFF)).astype(np.uint32)


def _mask64(lens: np.ndarray) -> np.ndarray:
    """Masks of the first `lens` bits of 64-bit words (lens may be below 0 or above 64)."""
    lens = np.asarray(lens, dtype=np.int64)
    shift = np.clip(64 - lens, 0, 63).astype(np.uint64)
    return np.where(lens <= 0, np.uint64(0), np.left_shift(ALL64, shift))


def addresses4(addr: np.ndarray, lens: np.ndarray, random: int,
               rng: np.random.Generator) -> tuple[np.ndarray, dict[str, int]]:
    """The first and last address of every prefix, then `random` addresses: half
    uniform, half in a random prefix. Returns the uint32 array and the counts."""
    mask = _mask32(lens)
    first, last = addr & mask, (addr & mask) | ~mask
    uniform = random - random // 2 if len(addr) else random
    inside = random - uniform
    u = rng.integers(0, 1 << 32, size=uniform, dtype=np.uint64).astype(np.uint32)
    idx = rng.integers(0, max(len(addr), 1), size=inside)
    r = rng.integers(0, 1 << 32, size=inside, dtype=np.uint64).astype(np.uint32)
    ins = first[idx] | (r & ~mask[idx]) if inside else np.zeros(0, dtype=np.uint32)
    out = np.concatenate([first, last, u, ins]).astype(np.uint32)
    return out, {"boundary": 2 * len(addr), "random": random}


def addresses6(hi: np.ndarray, lo: np.ndarray, lens: np.ndarray, random: int,
               rng: np.random.Generator) -> tuple[np.ndarray, dict[str, int]]:
    """As addresses4 for IPv6: an (n, 16) uint8 array (network order)."""
    mhi, mlo = _mask64(lens), _mask64(lens.astype(np.int64) - 64)
    fh, fl = hi & mhi, lo & mlo
    lh, ll = fh | ~mhi, fl | ~mlo
    uniform = random - random // 2 if len(hi) else random
    inside = random - uniform

    def rand64(n: int) -> np.ndarray:
        return rng.integers(0, 1 << 64, size=n, dtype=np.uint64)

    uh, ul = rand64(uniform), rand64(uniform)
    idx = rng.integers(0, max(len(hi), 1), size=inside)
    rh, rl = rand64(inside), rand64(inside)
    if inside:
        ih, il = fh[idx] | (rh & ~mhi[idx]), fl[idx] | (rl & ~mlo[idx])
    else:
        ih = il = np.zeros(0, dtype=np.uint64)
    h = np.concatenate([fh, lh, uh, ih])
    lw = np.concatenate([fl, ll, ul, il])
    words = np.empty((len(h), 2), dtype=">u8")
    words[:, 0], words[:, 1] = h, lw
    return words.view(np.uint8).reshape(-1, 16), {"boundary": 2 * len(hi), "random": random}


# ---- the check -----------------------------------------------------------------------


def _run_driver(prefixes: Path, nports: int, a4: np.ndarray, a6: np.ndarray
                ) -> tuple[dict, dict[str, np.ndarray]]:
    """Run lpm_check on the addresses: its JSON summary and its four hop arrays."""
    exe = build_driver()
    with tempfile.TemporaryDirectory(prefix="offlow-router-check-") as d:
        dp = Path(d)
        a4.astype(np.uint32).tofile(dp / "addrs4")
        np.ascontiguousarray(a6, dtype=np.uint8).tofile(dp / "addrs6")
        res = subprocess.run([str(exe), str(prefixes), str(nports), str(dp / "addrs4"),
                              str(dp / "addrs6"), d], capture_output=True, text=True)
        if res.returncode != 0:
            raise OfflowError(f"lpm_check failed (exit {res.returncode}): "
                              f"{res.stderr.strip()}")
        hops = {k: np.fromfile(dp / k, dtype=np.uint16)
                for k in ("hops4_scalar", "hops4_batch", "hops6_scalar", "hops6_batch",
                          "hops6_levels")}
    return json.loads(res.stdout), hops


def _text4(a: int) -> str:
    return str(ipaddress.IPv4Address(int(a)))


def _text6(a: np.ndarray) -> str:
    return str(ipaddress.IPv6Address(bytes(a)))


def _compare(family: str, want: np.ndarray, scalar: np.ndarray, batch: np.ndarray,
             text, addrs: np.ndarray, examples: list[dict]) -> dict[str, int]:
    """Mismatch counts of one family; the first few go to `examples`."""
    if len(scalar) != len(want) or len(batch) != len(want):
        raise OfflowError(f"lpm_check returned {len(scalar)}/{len(batch)} {family} answers "
                          f"for {len(want)} addresses")
    bad_s, bad_b = scalar != want, batch != want
    bad = bad_s | bad_b
    for i in np.flatnonzero(bad)[:max(0, EXAMPLES - len(examples))]:
        examples.append({"family": family, "address": text(addrs[i]),
                         "reference": int(want[i]), "scalar": int(scalar[i]),
                         "batch": int(batch[i])})
    return {"mismatches": int(bad.sum()), "mismatches_scalar": int(bad_s.sum()),
            "mismatches_batch": int(bad_b.sum())}


def _self_check(ref: Reference, a4: np.ndarray, want4: np.ndarray, a6: np.ndarray,
                want6: np.ndarray, rng: np.random.Generator) -> int:
    """Recompute a sample of the reference's numpy answers with its dict loop."""
    n = 0
    for i in rng.choice(len(a4), size=min(SAMPLE, len(a4)), replace=False):
        n += 1
        if ref.lookup(ipaddress.IPv4Address(int(a4[i]))) != want4[i]:
            raise OfflowError(f"reference disagrees with itself on {_text4(a4[i])}")
    for i in rng.choice(len(a6), size=min(SAMPLE, len(a6)), replace=False):
        n += 1
        if ref.lookup(ipaddress.IPv6Address(bytes(a6[i]))) != want6[i]:
            raise OfflowError(f"reference disagrees with itself on {_text6(a6[i])}")
    return n


def run_check(prefixes: Path = DEFAULT_PREFIXES, random: int = DEFAULT_RANDOM, seed: int = 1,
              nports: int = DEFAULT_PORTS) -> dict:
    """Check the C tables built from `prefixes` against the reference on the first and
    last address of every prefix plus `random` random addresses per family (seeded).
    Returns a JSON-able summary; `ok` is False when any answer (scalar or batched)
    differs or the two readers disagree on the prefixes. Raises OfflowError when the
    check cannot run (missing file, no compiler, bad arguments)."""
    t0 = time.monotonic()
    prefixes = Path(prefixes)
    if not prefixes.is_file():
        raise OfflowError(f"prefix file {prefixes} not found; pass --prefixes PATH "
                          f"(the BGP table is {DEFAULT_PREFIXES})")
    if random < 0:
        raise OfflowError(f"--random {random}: want a count >= 0")
    if not 1 <= nports <= MAX_HOP:
        raise OfflowError(f"--nports {nports}: want 1..{MAX_HOP}")
    nets, garbage = read_prefixes(prefixes)
    ref = Reference((n, next_hop(n, nports)) for n in nets)
    v4 = [n for n in nets if n.version == 4]
    v6 = [n for n in nets if n.version == 6]
    rng = np.random.default_rng(seed)

    addr4 = np.array([int(n.network_address) for n in v4], dtype=np.uint32)
    len4 = np.array([n.prefixlen for n in v4], dtype=np.uint8)
    ints6 = [int(n.network_address) for n in v6]
    hi6 = np.array([x >> 64 for x in ints6], dtype=np.uint64)
    lo6 = np.array([x & 0xFFFFFFFFFFFFFFFF for x in ints6], dtype=np.uint64)
    len6 = np.array([n.prefixlen for n in v6], dtype=np.uint8)
    a4, counts4 = addresses4(addr4, len4, random, rng)
    a6, counts6 = addresses6(hi6, lo6, len6, random, rng)
    t_ref0 = time.monotonic()
    want4, want6 = ref.lookup4_many(a4), ref.lookup6_many(a6)
    t_ref = time.monotonic() - t_ref0
    sampled = _self_check(ref, a4, want4, a6, want6, rng)

    c, hops = _run_driver(prefixes, nports, a4, a6)
    examples: list[dict] = []
    m4 = _compare("IPv4", want4, hops["hops4_scalar"], hops["hops4_batch"], _text4, a4,
                  examples)
    m6 = _compare("IPv6", want6, hops["hops6_scalar"], hops["hops6_batch"], _text6, a6,
                  examples)
    # the hash levels (the gpu target's structure), walked on the CPU: its own count
    levels = hops["hops6_levels"]
    m6["mismatches_levels"] = (int((levels != want6).sum()) if len(levels) == len(want6)
                               else len(want6))
    parse_ok = c["routes4"] == len(v4) and c["routes6"] == len(v6)
    mismatches = m4["mismatches"] + m6["mismatches"] + m6["mismatches_levels"]
    return {
        "prefixes": str(prefixes), "nports": nports, "seed": seed, "random": random,
        "routes4": len(v4), "routes6": len(v6), "garbage_lines": garbage,
        "c_routes4": c["routes4"], "c_routes6": c["routes6"], "c_garbage_lines": c["garbage"],
        "parse_agrees": parse_ok,
        "v4": {"addresses": len(a4), **counts4, **m4, "build_s": c["build4_s"],
               "memory_bytes": c["memory4"], "tbl8_groups": c["tbl8_groups"],
               "scalar_mlookups_s": c["scalar4_mlps"], "batch_mlookups_s": c["batch4_mlps"]},
        "v6": {"addresses": len(a6), **counts6, **m6, "build_s": c["build6_s"],
               "memory_bytes": c["memory6"], "levels": c["levels6"], "depth": c["depth6"],
               "markers": c["markers6"], "trie_memory_bytes": c["trie6_memory"],
               "trie_nodes": c["trie6_nodes"], "trie_depth": c["trie6_depth"],
               "scalar_mlookups_s": c["scalar6_mlps"],
               "batch_mlookups_s": c["batch6_mlps"]},
        "addresses": len(a4) + len(a6), "mismatches": mismatches,
        "reference_sample": sampled, "reference_s": t_ref, "examples": examples,
        "ok": parse_ok and mismatches == 0, "seconds": time.monotonic() - t0,
    }


def format_report(r: dict) -> str:
    """The summary as the lines `offlow router check` prints."""
    v4, v6 = r["v4"], r["v6"]
    mib = 1 << 20
    out = [
        f"offlow router check: {r['prefixes']} ({r['nports']} ports, seed {r['seed']})",
        f"  prefixes: {r['routes4']:,} IPv4 + {r['routes6']:,} IPv6, {r['garbage_lines']:,} "
        f"garbage lines (C reader: {r['c_routes4']:,} + {r['c_routes6']:,}, "
        f"{r['c_garbage_lines']:,}){'' if r['parse_agrees'] else '  READERS DISAGREE'}",
        f"  IPv4 DIR-24-8: built in {v4['build_s']:.3f} s, {v4['memory_bytes'] / mib:.1f} MiB "
        f"({v4['tbl8_groups']:,} tbl8 groups); {v4['addresses']:,} addresses "
        f"({v4['boundary']:,} prefix boundaries + {v4['random']:,} random): "
        f"{v4['mismatches']:,} mismatches (scalar {v4['mismatches_scalar']:,}, "
        f"batch {v4['mismatches_batch']:,})",
        f"  IPv6 trie and hash levels: built in {v6['build_s']:.3f} s, "
        f"{v6['memory_bytes'] / mib:.1f} MiB (trie {v6['trie_memory_bytes'] / mib:.1f} MiB, "
        f"{v6['trie_nodes']:,} nodes, depth {v6['trie_depth']}; hash levels "
        f"{v6['levels']} levels, depth {v6['depth']}, {v6['markers']:,} markers); "
        f"{v6['addresses']:,} addresses "
        f"({v6['boundary']:,} prefix boundaries + {v6['random']:,} random): "
        f"{v6['mismatches']:,} mismatches (scalar {v6['mismatches_scalar']:,}, "
        f"batch {v6['mismatches_batch']:,}; hash levels {v6['mismatches_levels']:,})",
        f"  reference: per-length tables, numpy search held to the dict loop on "
        f"{r['reference_sample']:,} addresses",
    ]
    for e in r["examples"]:
        out.append(f"  mismatch {e['family']} {e['address']}: reference {e['reference']}, "
                   f"scalar {e['scalar']}, batch {e['batch']}")
    out.append(f"{'ok' if r['ok'] else 'FAILED'}: {r['addresses']:,} addresses checked, "
               f"{r['mismatches']:,} mismatches, {r['seconds']:.1f} s")
    return "\n".join(out)


def cli(args: argparse.Namespace) -> int:
    """Run the check from parsed arguments, print the report; 0 = no mismatch, 1 = any."""
    r = run_check(args.prefixes, args.random, args.seed, args.nports)
    print(format_report(r))
    if args.json_out:
        Path(args.json_out).write_text(json.dumps(r, indent=2) + "\n")
    return 0 if r["ok"] else 1


def main(argv: list[str] | None = None) -> int:
    """`python -m offlow.router.check [--prefixes PATH] [--random N] [--seed S]`."""
    p = argparse.ArgumentParser(prog="offlow router check", description=__doc__.split("\n")[0],
                                exit_on_error=False)
    add_arguments(p)
    try:
        return cli(p.parse_args(argv))
    except (OfflowError, argparse.ArgumentError) as err:
        print(f"offlow: error: {err}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
