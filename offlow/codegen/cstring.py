"""C string literals of names a user chose (an element's may hold quotes, backslashes,
any letter): what codegen writes where the runtime reads a name back."""

from __future__ import annotations


def c_string(text: str) -> str:
    """`text` as one C string literal: printable ASCII as it is (`"` and `\\` escaped),
    every other byte of its UTF-8 as an octal escape (the runtime sees the same bytes)."""
    body = "".join(c if c.isascii() and c.isprintable() and c not in '"\\' else
                   ("\\" + c if c in '"\\' else "".join(f"\\{b:03o}" for b in c.encode()))
                   for c in text)
    return f'"{body}"'
