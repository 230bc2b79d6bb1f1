"""`offlow run --json`'s text (offlow/jsontext.py): what json.dumps(indent=2) writes,
but an array of numbers on one line, and the same value read back."""

from __future__ import annotations

import json

from offlow.jsontext import dumps


def test_without_arrays_of_numbers_it_is_json_dumps_indented() -> None:
    v = {"program": "p", "segments": [{"segment": "a", "cores": [], "drops_by_element": {}},
                                      "x\u00e9\n"], "ok": True, "mtu_why": None,
         "errors": ["one", ["two"]], "flags": [True, False], "n": {5: "int key"}}
    assert dumps(v) == json.dumps(v, indent=2)


def test_an_array_of_numbers_is_one_line_and_reads_back_the_same() -> None:
    hist = [0] * 1000 + [3, -2.5, 2**70]
    v = {"tables": {"hist": hist, "store": {"kind": "kv_store", "items": 4}},
         "queues": [{"packets_by_instance": [3, 2], "fields": ["ip", "len"]}]}
    text = dumps(v)
    assert json.loads(text) == v
    lines = text.splitlines()
    assert f'    "hist": {json.dumps(hist)},' in lines
    assert '      "packets_by_instance": [3, 2],' in lines
    assert '        "ip",' in lines  # (strings: one per line, as json.dumps writes them)
    assert len(lines) < 25
