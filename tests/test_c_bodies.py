"""C bodies are C: comments, #define and #if, __typeof__ and static inline helpers work
(the real preprocessor runs before the parser), and an error in a body names the
program file and its line, whether the body analysis or the C compiler finds it."""

from __future__ import annotations

import struct
import textwrap
from pathlib import Path

import dpkt
import pytest

from offlow import OfflowError
from offlow.build import build
from offlow.cli import main
from offlow.dsl.loader import load_program
from offlow.runner import RunOptions
from offlow.session import session
from tests.e2e import TLS, read_frames, run_example

FLOW = Path(__file__).resolve().parent / "programs" / "flow_buckets.py"


def flow_mix(x: int) -> int:
    """The program's helper, in Python: Murmur3's 32-bit finalizer."""
    x ^= x >> 16
    x = (x * 0x85EBCA6B) & 0xFFFFFFFF
    x ^= x >> 13
    x = (x * 0xC2B2AE35) & 0xFFFFFFFF
    return x ^ (x >> 16)


def expected_buckets(frames: list[bytes]) -> list[int]:
    """Counts and bytes per bucket, computed from dpkt's parse of the capture."""
    table = [0] * 14
    for f in frames:
        ip = dpkt.ethernet.Ethernet(f).data
        if not isinstance(ip, dpkt.ip.IP):
            continue
        src, dst = struct.unpack("!II", ip.src + ip.dst)
        b = flow_mix(src ^ dst ^ len(f)) % 7
        table[b] += 1
        table[7 + b] += len(f)
    return table


def test_a_program_with_comments_defines_and_helpers_computes_what_it_says(
        tmp_path: Path) -> None:
    out = tmp_path / "out.pcap"
    s = run_example(program=FLOW, input=TLS, output=out)
    assert s["ok"], s["errors"]
    frames = read_frames(TLS)
    assert s["tables"]["buckets"] == expected_buckets(frames)
    assert sum(1 for v in s["tables"]["buckets"][:7] if v) >= 5  # spread over the buckets
    assert len(read_frames(out)) == sum(s["tables"]["buckets"][:7])


def test_the_generated_c_undefines_each_bodys_macros_and_points_at_the_program_file() -> None:
    b = build(load_program(FLOW), werror=True)
    nic, host = b.sources["nic.c"], b.sources["host.c"]
    assert "#undef BUCKETS" in nic and "#undef HALF" in host
    # the body's and the helpers' lines are the program file's
    text = FLOW.read_text().splitlines()
    body_line = next(i for i, x in enumerate(text, 1) if "class FlowBucket" in x)
    assert f'"{FLOW}"' in nic
    assert any(x.startswith("#line ") and x.endswith(f'"{FLOW}"')
               and int(x.split()[1]) > body_line for x in nic.splitlines())
    assert nic.count("static inline uint32_t flow_mix") == 1


def test_a_handler_with_a_comment_answers_over_its_channel() -> None:
    """docs/channels.md's handler, comment and all."""
    with session(load_program(FLOW), RunOptions(input=TLS)) as s:
        s.wait_drained()
        reply = s.channel("first").request(b"?")
    assert struct.unpack("<2Q", reply[:16]) == tuple(expected_buckets(read_frames(TLS))[:2])


def write_program(tmp_path: Path, body: str, helpers: str = "") -> tuple[Path, int]:
    """A one-element program file whose body is `body`; returns the file and the line
    of the body's first line."""
    src = textwrap.dedent('''\
        from offlow import Element, Program, Sink, Source


        class Mine(Element):
            """A user's element."""

            helpers = r"""HELPERS"""
            body = r"""BODY"""


        def program() -> Program:
            p = Program("mine")
            src, mine, out = Source("src"), Mine("mine"), Sink("out")
            src >> mine >> out
            p.segment("all", [src, mine, out], device="host")
            return p
        ''').replace("HELPERS", helpers).replace("BODY", body)
    path = tmp_path / "mine.py"
    path.write_text(src)
    first = next(i for i, x in enumerate(src.splitlines(), 1) if x.lstrip().startswith("body"))
    return path, first


@pytest.mark.parametrize(("body", "at", "message"), [
    ("\n/* a field that is not there */\nstate->nosuch = 1;\n", 2,
     "`state->nosuch` is not a per-packet state field"),
    ("\nint x = 1 +;   // oops\n", 1, "C does not parse"),
    ("\n#include <stdio.h>\n", 1, "no include path"),
    ("\n/* never closed\n", 1, "unterminated comment"),
    ("\n#if 1\nint x = 0;\n", 1, "unterminated #if"),
])
def test_a_body_error_names_the_program_file_and_line(
        tmp_path: Path, capsys: pytest.CaptureFixture[str], body: str, at: int,
        message: str) -> None:
    path, first = write_program(tmp_path, body)
    assert main(["explain", str(path)]) == 2
    err = capsys.readouterr().err
    assert f"{path}:{first + at}" in err, err
    assert message in err and "Traceback" not in err
    assert err.count("offlow: error:") == 1


def test_a_c_compiler_error_names_the_program_file_and_line(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path, first = write_program(tmp_path, "\nuint32_t x = 1;\nx += undeclared_thing;\n")
    assert main(["run", str(path), "--count", "10"]) == 2
    err = capsys.readouterr().err
    assert f"{path}:{first + 2}:" in err and "undeclared_thing" in err, err
    assert "Traceback" not in err


def test_a_helper_error_names_the_program_file_and_line(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path, first = write_program(tmp_path, "\nEMIT(out);\n",
                                helpers="\nstatic inline int twice(int x) { return 2 * ; }\n")
    assert main(["explain", str(path)]) == 2
    err = capsys.readouterr().err
    helpers_at = next(i for i, x in enumerate(path.read_text().splitlines(), 1)
                      if x.lstrip().startswith("helpers"))
    assert f"{path}:{helpers_at + 1}: element `mine`: C does not parse" in err, err


def test_two_elements_may_define_the_same_macro_differently(tmp_path: Path) -> None:
    path = tmp_path / "two.py"
    path.write_text(textwrap.dedent('''\
        from offlow import Element, Program, Shared, Sink, Source


        class A(Element):
            tables = ("t",)
            body = r"""
            #define SLOT 1
            t[SLOT] += 1;
            """


        class B(Element):
            tables = ("t",)
            body = r"""
            #define SLOT 2   /* another SLOT: each body's macros are its own */
            t[SLOT] += 10;
            """


        def program() -> Program:
            p = Program("two")
            t = Shared("t", "uint64_t", 3)
            src, a, b, out = Source("src"), A("a", t=t), B("b", t=t), Sink("out")
            src >> a >> b >> out
            p.segment("all", [src, a, b, out], device="host")
            return p
        '''))
    s = run_example(program=path, count=50)
    assert s["ok"], s["errors"]
    assert s["tables"]["t"] == [0, 50, 500]


def test_typeof_is_read_as_reading_nothing() -> None:
    """`__typeof__(state->x)` names a type; it reads no field (C does not evaluate it)."""
    from offlow.passes.cbody import analyze_body

    info = analyze_body("__typeof__(state->a) v = 0; state->b = v;", element="e",
                        outputs=["out"], fields={"a": "uint32_t", "b": "uint32_t"})
    assert info.reads == frozenset() and info.writes == {"b"}
    with pytest.raises(OfflowError):
        load_program(FLOW, ["nosuch.device=host"])


def test_mangled_bodies_give_a_body_error_or_an_analysis_never_a_crash() -> None:
    """Random byte edits of real bodies (comments, directives, helpers, a map's lookups:
    mapvalue.py): the preprocessor and parser either accept them or give one BodyError,
    nothing else escapes."""
    import random

    from offlow.passes.cbody import BodyError, BodyInfo, Site, analyze_body
    from offlow.passes.mapvalue import MapLocal
    from tests.programs.flow_buckets import FlowBucket, Tally
    from tests.programs.flow_counts import FlowCount
    from tests.programs.proto_bytes import ProtoBytes

    rng = random.Random(22)
    seeds = [FlowBucket.body, Tally.body, FlowBucket.helpers + "\n", FlowCount.body,
             ProtoBytes.body]
    # helper functions a pointer into a table is followed into (tableuse.py), and a
    # caller of theirs: one of the two is mangled
    helpers = ("static void bump(uint32_t *c, int n) { if (n) { (*c)++; bump(c + 1, n - 1); } }"
               "\nstatic void both(uint32_t *a) { bump(a, 2); { int a = 0; (void)a; } }"
               "\nstatic void wide(uint64_t *w) { *w += 1; }\n")
    caller = ("uint32_t *p = &t[state->bucket & 3u];  /* ours */\nboth(p);\n"
              "{ uint8_t p = 1; (void)p; }\nbump(p, state->bucket);\n"
              "struct flows_key k = {0};\nwide(ofl_map_lookup(seen, &k));\n")
    maps = {"seen": MapLocal("flows", "uint64_t"), "per_proto": MapLocal("pt", "uint32_t")}
    alphabet = "{}()[];#/*\"'\\\n =+-<>!?:,.x0_\x00\xff"

    def mangled(seed: str) -> str:
        text = list(seed)
        for _ in range(rng.randint(1, 4)):
            k = rng.randrange(len(text) + 1)
            if rng.random() < 0.5 and k < len(text):
                del text[k]
            else:
                text.insert(k, rng.choice(alphabet))
        return "".join(text)

    fields = {"bucket": "uint8_t", "src4": "uint32_t", "dst4": "uint32_t", "l3_off": "uint16_t"}
    unmangled = analyze_body(caller, element="fuzz", outputs=["out"], fields=fields, maps=maps,
                             tables=["t"], helpers=helpers)
    assert unmangled.plain_updates == {"t"} and unmangled.plain_via == {
        ("t", "p", ""), ("t", "a", "both"), ("t", "c", "bump")}
    for i in range(260):
        body, extra = mangled(rng.choice(seeds)), {}
        if i >= 200:
            mine = rng.random() < 0.5
            body = mangled(caller) if mine else caller
            extra = {"tables": ["t"], "helpers": helpers if mine else mangled(helpers)}
        try:
            info = analyze_body(body, element="fuzz", outputs=["out"], fields=fields,
                                site=Site("prog.py", 10), maps=maps, **extra)
        except BodyError as err:
            assert "fuzz" in str(err)
        else:
            assert isinstance(info, BodyInfo)
