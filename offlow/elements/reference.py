"""The element reference (docs/element-reference.md), generated from the element
classes themselves: ports and their types, parameters and tables, the per-packet fields
each writes (with what they hold and their byte order) and reads, found by the same body
analysis the compiler runs, and the reasons each drops packets for.

    python -m offlow.elements.reference > docs/element-reference.md

A test compares the file with this output, so the reference cannot go stale."""

from __future__ import annotations

import inspect
from collections.abc import Callable, Iterable

from offlow.dsl import Element, Handler, Shared
from offlow.dsl.where import class_site, code_site
from offlow.elements import (
    crypto,
    headers,
    kvs,
    lso,
    router,
    sequencer,
    sketch,
    streams,
    tsp,
    words,
)
from offlow.passes.cbody import Site, analyze_body

MODULES = (headers, router, kvs, sketch, lso, streams, crypto, tsp, sequencer, words)
# Elements whose constructor needs arguments: an example of each.
_EXAMPLES: dict[str, Callable[[], Element]] = {
    "Classify": lambda: headers.Classify({"tls": (6, 443), "dns": (17, 53)}),
    "Count": lambda: headers.Count(slot=0, counts=Shared("counts", "uint64_t", 1)),
    "LookupIPv4": lambda: router.LookupIPv4(routes=router.lpm4_table("routes", "t.txt")),
    "LookupIPv6": lambda: router.LookupIPv6(routes=router.lpm6_table("routes", "t.txt")),
    "KvServe": lambda: kvs.KvServe(store=kvs.kv_store("store")),
    "PCSA": lambda: sketch.PCSA(sketch=sketch.pcsa_table("sketch")),
    "PcsaSummary": lambda: sketch.PcsaSummary(sketch=sketch.pcsa_table("sketch")),
    "Segment": lambda: lso.Segment(port=lso.send_port("port"), kinds=lso.kind_counts("kinds")),
    "CountMin": lambda: sketch.CountMin(depth=4, width=1024, threshold=100,
                                        sketch=sketch.countmin_table("flows", 4, 1024)),
    "Filter": lambda: streams.Filter(attr=1, op=">", value=100),
    "Map": lambda: streams.Map(attrs=(1, 2, 3)),
    "Aggregate": lambda: streams.Aggregate(fn="avg", attr=1, size=10, advance=5),
    "BSort": lambda: streams.BSort(slack=20),
    "Join": lambda: streams.Join(size=10, left_port=7001, right_port=7002, left_key=1,
                                 right_key=1),
    "Resample": lambda: streams.Resample(size=10, left_port=7001, right_port=7002, attr=1),
    "CbcEncrypt": lambda: crypto.CbcEncrypt(keys=crypto.cbc_keys("keys", "keys.txt")),
    "CbcDecrypt": lambda: crypto.CbcDecrypt(keys=crypto.cbc_keys("keys", "keys.txt")),
    "ClimbJobs": lambda: tsp.ClimbJobs("jobs", cities=tsp.climbers_table("cities", "x.tsp")),
    "Sequence": lambda: sequencer.Sequence(base=7000, groups=8,
                                           seqs=sequencer.sequencer_table("seqs", 8)),
    "CountWords": lambda: words.CountWords(slots=1024, words=words.word_table("counts", 1024)),
}


def library() -> list[type[Element]]:
    """Every element class of the library, module by module, in file order."""
    out = []
    for m in MODULES:
        classes = [c for _, c in inspect.getmembers(m, inspect.isclass)
                   if issubclass(c, Element) and c.__module__ == m.__name__]
        out += sorted(classes, key=lambda c: class_site(c)[1])
    return out


def declared_fields() -> dict[str, tuple[str, str]]:
    """Every per-packet field the library declares: its C type and what it holds (from
    the first class that declares it)."""
    out: dict[str, tuple[str, str]] = {}
    for cls in library():
        for k, v in cls.fields.items():
            out.setdefault(k, (v, cls.field_docs.get(k, "")))
    return out


def _ports(ports: Iterable[object]) -> str:
    return ", ".join(f"`{p.name}` ({p.type})" for p in ports) or "none"  # type: ignore[attr-defined]


def entry(cls: type[Element]) -> list[str]:
    """The reference entry of one element class."""
    el = _EXAMPLES.get(cls.__name__, cls)()
    doc = inspect.cleandoc(cls.__doc__ or "(no description)")
    out = [f"## {cls.__name__}", "", f"`{cls.__module__}.{cls.__name__}`"
           + (" (a channel handler)" if isinstance(el, Handler) else ""), "", doc, ""]
    if not isinstance(el, Handler):
        out.append(f"- inputs: {_ports(el.inputs)}")
        outs = _ports(el.outputs)
        if "outputs" in vars(el):
            outs += " (set by its arguments; shown for the example " \
                    f"`{_EXAMPLE_TEXT.get(cls.__name__, '')}`)"
        out.append(f"- outputs: {outs}")
    if cls.params:
        out.append("- parameters: " + ", ".join(f"`{k}` ({v})" for k, v in cls.params.items()))
    if cls.tables:
        out.append("- tables: " + ", ".join(f"`{t}`" for t in cls.tables))
    names = [*cls.params, *cls.tables, *(("msg", "len") if isinstance(el, Handler) else ())]
    fields = declared_fields()
    info = analyze_body(el.body, element=cls.__name__, outputs=[p.name for p in el.outputs],
                        fields={k: t for k, (t, _) in fields.items()}, names=names,
                        helpers=cls.helpers, reasons=list(cls.drops),
                        site=Site(*code_site(el, "body")))
    writes = sorted(info.writes)
    if writes:
        out.append("- writes:")
        out += [f"  - `{f}` ({fields[f][0]}): {fields[f][1]}"
                + ("" if f in cls.fields else " (it updates it)") for f in writes]
    reads = sorted(info.reads - set(cls.fields))
    if reads:
        out.append("- reads: " + ", ".join(f"`{f}`" for f in reads)
                   + " (written by an element before it)")
    if cls.drops:
        out.append("- drops (counted per reason):")
        out += [f"  - `{r}`: {d}" for r, d in cls.drops.items()]
    elif info.drops:
        out.append("- drops: counted at the element (see its description)")
    if cls.batch_body:
        out.append("- a vector element: where its segment takes packets in batches, its batch "
                   "body runs over each batch (docs/elements.md)")
    out.append("")
    return out


_EXAMPLE_TEXT = {"Classify": 'Classify({"tls": (6, 443), "dns": (17, 53)})'}


def reference() -> str:
    """The whole reference as Markdown."""
    out = ["# Element reference", "",
           "Generated from the element classes by `python -m offlow.elements.reference` "
           "(a test checks it is current). Fields are per-packet state (`state->FIELD`); "
           "multi-byte fields are in host byte order unless said otherwise. An element "
           "reads the fields listed under reads: some element before it must write them "
           "(a compile error says so otherwise). Port types: an output of type `ip.v4` "
           "feeds inputs of type `ip.v4`, `ip` or `any` ([elements.md](elements.md)).", ""]
    for m in MODULES:
        first = (inspect.getdoc(m) or "").split("\n\n")[0].replace("\n", " ")
        out += [f"# {m.__name__}", "", first, ""]
        for cls in library():
            if cls.__module__ == m.__name__:
                out += entry(cls)
        out += _makers(m)
    return "\n".join(out).rstrip() + "\n"


def _makers(m: object) -> list[str]:
    """The module's public functions (the tables its elements use) and their docs."""
    fns = [(n, f) for n, f in inspect.getmembers(m, inspect.isfunction)
           if f.__module__ == getattr(m, "__name__", "") and not n.startswith("_")]
    out: list[str] = []
    for name, fn in sorted(fns, key=lambda nf: inspect.getsourcelines(nf[1])[1]):
        doc = inspect.cleandoc(fn.__doc__ or "").replace("\n", " ")
        args = ", ".join(p.name + ("" if p.default is p.empty else f"={p.default!r}")
                         for p in inspect.signature(fn).parameters.values())
        out += [f"## {name}({args})", "", doc, ""]
    return out


if __name__ == "__main__":
    print(reference(), end="")
