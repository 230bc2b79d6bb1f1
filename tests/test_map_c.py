"""The shared hash map's C side (runtime/lib/map/tests/test_map.c: sizes refused, `full`
counted, deletes in probe runs, random sequences against a model), built plain and with
ASan+UBSan."""

from __future__ import annotations

from pathlib import Path

import pytest

from offlow import ctlwire
from offlow.dsl.values import MAP_ENTRIES_MAX, MAP_KEY_MAX, MAP_VALUE_MAX
from tests.ctools import assert_passed, build_c, lib_test, run_c


@pytest.mark.parametrize("sanitize", [False, True], ids=["plain", "asan"])
def test_map_against_a_model(sanitize: bool) -> None:
    exe = build_c([lib_test("map", "test_map")], "test_map", ["map"], sanitize)
    res = run_c(exe)
    assert_passed(res)


@pytest.mark.parametrize("sanitize", [False, True], ids=["plain", "asan"])
def test_map_control_messages_and_mailbox(sanitize: bool) -> None:
    """runtime/lib/map/tests/test_map_ctl.c: message sizes, info, the layout in pieces,
    get/set/delete, full, a walk; requests through the mailbox racing the core's own
    changes, the map equal to both models after."""
    exe = build_c([lib_test("map", "test_map_ctl")], "test_map_ctl", ["map"], sanitize)
    res = run_c(exe)
    assert_passed(res)


@pytest.mark.parametrize("sanitize", [False, True], ids=["plain", "asan"])
def test_map_control_requests_longer_than_a_message(sanitize: bool) -> None:
    """runtime/lib/map/tests/test_map_ctl_big.c: a map of 57-byte keys through the
    staging buffers (ctl_stage.h) and the mailbox: a set applied whole when run, long
    replies read in parts, a client that died half-way, malformed parts, an array of
    64-byte elements, and staged requests racing the core's own changes."""
    exe = build_c([lib_test("map", "test_map_ctl_big")], "test_map_ctl_big", ["map"], sanitize)
    res = run_c(exe)
    assert_passed(res)


def test_the_control_client_uses_the_runtimes_sizes_and_letters(tmp_path: Path) -> None:
    """offlow/ctlwire.py's sizes and letters are those of runtime ctl.h and map_ctl.h
    (printed by a C program built against them)."""
    src = tmp_path / "ctlwire.c"
    src.write_text('#include <stdio.h>\n#include "offlow/map_ctl.h"\n'
                   'int main(void) { printf("%d %d %d %u %d %c%c%c%c\\n", OFL_CTL_MSG_MAX, '
                   "OFL_CTL_REPLY_MAX, OFL_CTL_PART_MAX, OFL_CTL_STAGE_MAX, OFL_MAP_CTL_KV_MAX, "
                   "OFL_CTL_STAGE_BEGIN, OFL_CTL_STAGE_PART, OFL_CTL_STAGE_RUN, OFL_CTL_READ); "
                   "return 0; }\n")
    res = run_c(build_c([src], "ctlwire", ["map"]))
    assert res.returncode == 0, res.stderr
    letters = (ctlwire.STAGE_BEGIN + ctlwire.STAGE_PART + ctlwire.STAGE_RUN + ctlwire.READ)
    assert res.stdout.split() == [str(n) for n in (
        ctlwire.MSG_MAX, ctlwire.REPLY_MAX, ctlwire.PART_MAX, ctlwire.STAGE_MAX,
        ctlwire.MAP_KV_MAX)] + [letters.decode()]


def test_the_dsl_checks_the_runtimes_map_limits(tmp_path: Path) -> None:
    """offlow/dsl/values.py's key, value and entries limits are map.h's (printed by a C
    program built against it): a declaration the DSL takes, the runtime opens."""
    src = tmp_path / "maplimits.c"
    src.write_text('#include <stdio.h>\n#include "offlow/map.h"\n'
                   'int main(void) { printf("%u %u %u\\n", OFL_MAP_KEY_MAX, OFL_MAP_VALUE_MAX, '
                   "OFL_MAP_ENTRIES_MAX); return 0; }\n")
    res = run_c(build_c([src], "maplimits", ["map"]))
    assert res.returncode == 0, res.stderr
    assert res.stdout.split() == [str(n) for n in (MAP_KEY_MAX, MAP_VALUE_MAX, MAP_ENTRIES_MAX)]
