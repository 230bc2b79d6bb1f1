import pytest

from offlow.passes.cbody import BodyError, BodyInfo, analyze_body

FIELDS = {"ttl": "uint8_t", "l3_off": "uint16_t", "proto": "uint8_t", "hdr": "struct ofl_hdr"}
OUTS = ["out", "udp", "tcp", "other"]


def run(body: str, **kw: object) -> BodyInfo:
    kw.setdefault("element", "DecTTL")
    kw.setdefault("outputs", OUTS)
    kw.setdefault("fields", FIELDS)
    return analyze_body(body, **kw)  # type: ignore[arg-type]


def test_plain_read_and_write():
    info = run("state->ttl = state->proto;")
    assert info.reads == {"proto"}
    assert info.writes == {"ttl"}


def test_compound_assignment_is_read_and_write():
    info = run("state->ttl -= 1;")
    assert info.reads == {"ttl"} and info.writes == {"ttl"}
    assert info.kills == frozenset()


def test_increment_is_read_and_write():
    info = run("state->ttl++;\n--state->proto;")
    assert info.reads == {"ttl", "proto"} and info.writes == {"ttl", "proto"}


def test_member_of_field_write_counts_as_field_write():
    info = run("state->hdr.len = 4;")
    assert info.writes == {"hdr"} and info.reads == frozenset()


def test_indexed_field_write_reads_index_fields():
    info = run("state->hdr[state->l3_off] = 1;")
    assert info.writes == {"hdr"} and info.reads == {"l3_off"}
    assert info.kills == frozenset()


def test_kill_only_for_unconditional_top_level_assignment():
    info = run("state->ttl = 64;\nstate->proto = state->ttl;")
    assert info.kills == {"ttl", "proto"}
    assert info.reads == {"ttl"}


def test_conditional_write_is_not_a_kill():
    info = run("if (pkt->len > 20) state->ttl = 1;")
    assert info.writes == {"ttl"} and info.kills == frozenset()


def test_assignment_reading_itself_is_not_a_kill():
    assert run("state->ttl = state->ttl - 1;").kills == frozenset()


def test_read_in_earlier_statement_prevents_kill():
    info = run("uint8_t t = state->ttl;\nstate->ttl = t;")
    assert info.kills == frozenset()


def test_no_kill_after_possible_early_emit():
    info = run("if (pkt->len < 20) EMIT(other);\nstate->ttl = 1;\nEMIT(out);")
    assert info.kills == frozenset()


def test_early_drop_does_not_prevent_kill():
    info = run("if (pkt->len < 20) DROP();\nstate->ttl = 1;\nEMIT(out);")
    assert info.kills == {"ttl"}


def test_goto_disables_kills():
    info = run("again:\nstate->ttl = 1;\nif (state->proto) goto again;")
    assert info.kills == frozenset()


def test_address_of_state_field_touches_whole_state():
    info = run("ofl_fill(&state->ttl);")
    assert info.uses_whole_state
    assert info.reads == set(FIELDS) and info.writes == set(FIELDS)


def test_passing_state_touches_whole_state():
    info = run("ofl_helper(pkt, state);")
    assert info.uses_whole_state and info.reads == set(FIELDS)


def test_whole_state_use_before_assignment_prevents_kill():
    assert run("ofl_helper(state);\nstate->ttl = 1;").kills == frozenset()


def test_member_named_state_is_not_the_state_pointer():
    info = run("struct ofl_ctx c; c.state = 1; x->state = 2;")
    assert not info.uses_whole_state and info.reads == frozenset()


def test_emit_send_drop_are_recorded():
    info = run("SEND(udp);\nif (state->proto == 6) EMIT(tcp);\nDROP();")
    assert info.emits == {"udp", "tcp"} and info.drops


def test_uses_pkt():
    assert run("uint32_t n = pkt->len;").uses_pkt
    assert not run("state->ttl = 1;").uses_pkt


def test_fall_through_when_last_statement_is_not_terminal():
    assert run("state->ttl = 1;").may_fall_through
    assert run("").may_fall_through
    assert run("EMIT(out);\nreturn;").may_fall_through


def test_no_fall_through_after_emit_or_drop():
    assert not run("state->ttl = 1;\nEMIT(out);").may_fall_through
    assert not run("if (state->ttl) { EMIT(out); } else DROP();").may_fall_through
    assert not run("if (state->ttl) EMIT(out);\nCONSUME();").may_fall_through
    assert run("if (state->ttl) EMIT(out);").may_fall_through


def test_unknown_field_error_names_element_line_and_suggestion():
    with pytest.raises(BodyError) as exc:
        run("uint8_t x = 0;\nstate->tll = x;", fields={"ttl": "uint8_t", "l3_off": "uint16_t"})
    msg = str(exc.value)
    assert msg.startswith("element `DecTTL`, body line 2: `state->tll` is not a per-packet state "
                          "field")
    assert "declared fields: ttl, l3_off" in msg
    assert "Declare it in the element's `fields`" in msg
    assert "did you mean `ttl`?" in msg


def test_syntax_error_reports_body_line():
    with pytest.raises(BodyError) as exc:
        run("state->ttl = 1;\nuint8_t x = 2;\nfoo bar;")
    msg = str(exc.value)
    assert "element `DecTTL`, body line 3: C does not parse" in msg
    assert "check the statement before it" in msg


def test_missing_semicolon_at_end_reports_last_line():
    with pytest.raises(BodyError, match="does not parse: unexpected end of the body"):
        run("state->ttl = 1;\nEMIT(out)\n")


def test_emit_unknown_port():
    with pytest.raises(BodyError) as exc:
        run("\n\n\nEMIT(udpp);", element="Classify", outputs=["udp", "tcp", "other"])
    msg = str(exc.value)
    assert msg.startswith(
        "element `Classify`, body line 4: EMIT(`udpp`): no output port `udpp`; "
        "outputs are: udp, tcp, other"
    )
    assert "did you mean `udp`?" in msg


@pytest.mark.parametrize("body", ["EMIT();", "EMIT(out, udp);", "SEND(1);", "EMIT(pkt->len);"])
def test_emit_and_send_need_exactly_one_port_name(body: str):
    with pytest.raises(BodyError, match="takes exactly one output port name"):
        run(body)


def test_drop_with_arguments_is_an_error():
    with pytest.raises(BodyError, match=r"body line 1: DROP\(\) takes no arguments"):
        run("DROP(out);")
    with pytest.raises(BodyError, match=r"body line 2: CONSUME\(\) takes no arguments"):
        run("state->ttl = 1;\nCONSUME(1);")


def test_return_with_value_is_an_error():
    with pytest.raises(BodyError) as exc:
        run("state->ttl = 1;\nreturn 1;", element="X")
    assert str(exc.value) == (
        "element `X`, body line 2: use EMIT(port) or DROP() instead of `return value`"
    )


def test_plain_return_is_allowed():
    info = run("if (state->ttl == 0) return;\nEMIT(out);")
    assert info.emits == {"out"} and info.reads == {"ttl"}


def test_struct_types_and_calls_parse():
    body = (
        "struct ofl_eth_hdr *eth = (struct ofl_eth_hdr *)pkt->data;\n"
        "size_t n = sizeof(struct ofl_eth_hdr);\n"
        "bool ok = ofl_check(eth, n) && true;\n"
        "int8_t d = (int8_t)-1; uint64_t ts = pkt->ts_ns;\n"
        "if (!ok || ts == 0) DROP();\n"
    )
    info = run(body)
    assert info.uses_pkt and info.drops and info.reads == frozenset()


def test_extra_typedefs_and_parameter_names():
    info = run("ofl_flow_key_t k; k.port = port_param; ofl_table_put(flows, &k);",
               typedefs=["ofl_flow_key_t"], names=["port_param", "flows"])
    assert not info.uses_whole_state and info.may_fall_through


def test_realistic_ipv4_body():
    body = (
        "struct ofl_ipv4_info info;\n"
        "int rc = ofl_parse_ipv4(pkt->data, pkt->len, state->l3_off, &info);\n"
        "if (rc < 0) DROP();\n"
        "state->ttl = info.ttl;\n"
        "state->proto = info.proto;\n"
        "switch (state->proto) {\n"
        "case 17: EMIT(udp);\n"
        "case 6: EMIT(tcp);\n"
        "default: break;\n"
        "}\n"
        "EMIT(other);\n"
    )
    info = run(body, element="ParseIPv4")
    assert info.reads == {"l3_off", "proto"}
    assert info.writes == {"ttl", "proto"}
    assert info.kills == {"ttl", "proto"}
    assert info.emits == {"udp", "tcp", "other"}
    assert info.drops and info.uses_pkt and not info.uses_whole_state
    assert not info.may_fall_through


def test_drop_why_names_one_of_the_elements_reasons():
    info = run("if (state->ttl == 0) DROP_WHY(expired);\nEMIT(out);", reasons=["expired"])
    assert info.drops and info.emits == {"out"}
    assert not run("DROP_WHY(expired);", reasons=["expired"]).may_fall_through
    with pytest.raises(BodyError, match=r"DROP_WHY\(\) takes one of the element's drop "
                                        r"reasons \(its `drops`\): expired \(did you mean "
                                        r"`expired`\?\)"):
        run("DROP_WHY(expird);", reasons=["expired"])
    with pytest.raises(BodyError, match=r"\(none declared\)"):
        run("DROP_WHY(expired);")
