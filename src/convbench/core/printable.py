"""Text from a user's kernel (what it printed, its exception's message) shown where a person reads it: a terminal
interprets escape sequences (clear the screen, retitle the window, rewrite earlier lines) and a page can be made to
read backwards (bidirectional overrides). `visible` shows each such character as its escape (`\\x1b`, `\\u202e`)
instead; newlines and tabs stay."""

from __future__ import annotations

import re

# C0 and C1 controls and DEL except newline and tab; the bidirectional embeddings, overrides and isolates; the line
# and paragraph separators (a line break to some readers)
_HIDDEN = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f\u061c\u200e\u200f\u2028-\u202e\u2066-\u2069]")


def _escape(match: re.Match) -> str:
    code = ord(match.group())
    return f"\\x{code:02x}" if code < 0x100 else f"\\u{code:04x}"


def visible(text: str) -> str:
    """`text` with every control and text-direction character written as its escape; CR LF read as LF."""
    return _HIDDEN.sub(_escape, text.replace("\r\n", "\n"))

