"""The body parser: pycparser's C parser, taught the GNU C that gcc takes in element
bodies and helpers (`-std=gnu11`) and pycparser does not. For analysis only: the C
compiler sees the code as written. Each spelling becomes the standard C nodes that read
and write what it reads and writes, so the passes after (cbody, tableuse, mapvalue)
need no case of their own:

- `case LO ... HI:` (a case range): a Case whose expression is the pair `LO, HI`;
- `[LO ... HI] = v` in an initializer (a range designator): an ArrayDesignator of the
  pair `LO, HI`;
- `a ?: b` (the conditional with its middle left out): `a ? a : b` (it reads `a`; that
  gcc evaluates `a` once changes nothing the analysis counts);
- `asm [volatile] [inline] [goto] ("template" : outputs : inputs : clobbers : labels);`
  (`__asm__`, `__asm` too): a block of a call `__asm__(INPUT, ...)` (the inputs read),
  then an assignment to each output (`"=r"(x)`: `x = __asm__()`; a `+` constraint,
  read and written: `x += __asm__()`), then for each label of an asm goto `if
  (__asm__()) goto LABEL;` (it may jump there). A pointer given as an input is a bare
  expression the passes already take as reaching what it points to.

Preprocessor spellings (`__attribute__`, `__extension__`, `__volatile__`) are the
preprocessor's business (runtime/build.toml's `preprocess` flags)."""

from __future__ import annotations

from pycparser import c_ast, c_parser

ASM = frozenset({"asm", "__asm__", "__asm"})
_ASM_QUALIFIERS = frozenset({"VOLATILE", "INLINE", "GOTO"})
_SECTIONS = ("outputs", "inputs", "clobbers", "labels")


class GnuCParser(c_parser.CParser):
    """pycparser's CParser with the GNU spellings of the module's doc."""

    def _parse_statement(self) -> c_ast.Node:
        tok = self._peek()
        if (tok is not None and tok.type == "ID" and tok.value in ASM
                and self._peek_type(2) in {"LPAREN", *_ASM_QUALIFIERS}):
            return self._parse_asm_statement()
        return super()._parse_statement()

    def _parse_labeled_statement(self) -> c_ast.Node:
        if self._peek_type() != "CASE":
            return super()._parse_labeled_statement()
        case_tok = self._advance()
        expr = self._parse_constant_expression()
        if self._accept("ELLIPSIS"):
            expr = c_ast.ExprList([expr, self._parse_constant_expression()], expr.coord)
        self._expect("COLON")
        if self._starts_statement():
            stmt = self._parse_pragmacomp_or_statement()
        else:
            stmt = c_ast.EmptyStatement(self._tok_coord(case_tok))
        return c_ast.Case(expr, [stmt], self._tok_coord(case_tok))

    def _parse_designator(self) -> c_ast.Node:
        tok = self._accept("LBRACKET")
        if tok is None:
            return super()._parse_designator()
        expr = self._parse_constant_expression()
        if self._accept("ELLIPSIS"):
            expr = c_ast.ExprList([expr, self._parse_constant_expression()], expr.coord)
        self._expect("RBRACKET")
        return c_ast.ArrayDesignator(expr, self._tok_coord(tok))

    def _parse_conditional_expression(self) -> c_ast.Node:
        expr = self._parse_binary_expression()
        if not self._accept("CONDOP"):
            return expr
        if self._accept("COLON"):  # a ?: b
            return c_ast.TernaryOp(expr, expr, self._parse_conditional_expression(),
                                   expr.coord)
        iftrue = self._parse_expression()
        self._expect("COLON")
        return c_ast.TernaryOp(expr, iftrue, self._parse_conditional_expression(),
                               expr.coord)

    def _parse_asm_statement(self) -> c_ast.Node:
        """`asm ...;` (the module's doc) as the block that does what it does to data."""
        asm_tok = self._advance()
        coord = self._tok_coord(asm_tok)
        while self._peek_type() in _ASM_QUALIFIERS:
            self._advance()
        self._expect("LPAREN")
        self._parse_unified_string_literal()  # the template: text, not C
        parts: dict[str, list[tuple[str, c_ast.Node]]] = {s: [] for s in _SECTIONS}
        at = -1
        while True:
            if self._accept("COLON"):
                at += 1
            elif self._accept("COLONCOLON"):  # (`::`: two sections, the first empty)
                at += 2
            else:
                break
            if at >= len(_SECTIONS):
                self._parse_error("an asm statement has at most four `:` sections "
                                  "(outputs, inputs, clobbers, labels)", coord)
            if self._peek_type() not in {"COLON", "COLONCOLON", "RPAREN"}:
                parts[_SECTIONS[at]] = self._asm_section(_SECTIONS[at])
        self._expect("RPAREN")
        self._expect("SEMI")
        call = c_ast.FuncCall(c_ast.ID("__asm__", coord), c_ast.ExprList(
            [e for _, e in parts["inputs"]], coord) if parts["inputs"] else None, coord)
        items: list[c_ast.Node] = [call]
        for constraint, lvalue in parts["outputs"]:
            items.append(c_ast.Assignment("+=" if "+" in constraint else "=", lvalue,
                                          c_ast.FuncCall(c_ast.ID("__asm__", coord), None,
                                                         coord), coord))
        for _, label in parts["labels"]:
            assert isinstance(label, c_ast.ID)
            items.append(c_ast.If(c_ast.FuncCall(c_ast.ID("__asm__", coord), None, coord),
                                  c_ast.Goto(label.name, coord), None, coord))
        return c_ast.Compound(items, coord)

    def _asm_section(self, section: str) -> list[tuple[str, c_ast.Node]]:
        """One section's comma-separated items: operands `[name] "constraint" (expr)`
        (outputs, inputs), clobbers ("memory": a string, kept as one) or labels."""
        out: list[tuple[str, c_ast.Node]] = []
        while True:
            if section == "labels":
                tok = self._expect("ID")
                out.append(("", c_ast.ID(tok.value, self._tok_coord(tok))))
            elif section == "clobbers":
                lit = self._parse_unified_string_literal()
                out.append((lit.value, lit))
            else:
                if self._accept("LBRACKET"):  # a symbolic name
                    self._advance()
                    self._expect("RBRACKET")
                constraint = self._parse_unified_string_literal().value
                self._expect("LPAREN")
                out.append((constraint, self._parse_expression()))
                self._expect("RPAREN")
            if not self._accept("COMMA"):
                return out
