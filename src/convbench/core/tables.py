"""Tables that fit the terminal without ever cutting a number: the one mechanism behind every table a command prints.

A column is one of three kinds:

- NUMBER: never wrapped, never shortened (a cut number reads as another number: `621…` for 621.123);
- NAME: an implementation, a submission's path, a layer: shortened in the middle where space is short
  (`/tmp/newc…/sub1`, `cpu-par…llel`), and kept unique (two submissions never read the same);
- TEXT: prose and shapes, wrapped at spaces.

When the table is wider than the terminal, FitTable gives up in this order, checking the width after each step:
headers wrap at spaces and hyphens; text columns narrow to their longest word; headers that have a short form take
it (a legend line under the table says what each stands for); names shrink. A table still too wide is printed
as several tables, each repeating the key columns; where even one column beside the keys is too wide, each row is
printed as lines of `header: value`."""

from __future__ import annotations

import io
import textwrap
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field

from rich.cells import cell_len
from rich.console import Console, ConsoleOptions, RenderableType, RenderResult
from rich.segment import Segment
from rich.table import Table
from rich.text import Text

NUMBER, NAME, TEXT = "number", "name", "text"
ELLIPSIS = "…"
NAME_MIN = 8  # a shortened name keeps at least this many columns: its start and its end still say which it is
TEXT_MIN = 12  # a text column narrows to its longest word, but not below this


def ellipsize_middle(name: str, width: int, head: int | None = None) -> str:
    """`name` in at most `width` columns: whole if it fits, else its first `head` characters (default: half the
    room), an ellipsis, and its end."""
    if cell_len(name) <= width:
        return name
    head = (width - 1) // 2 if head is None else head
    return _cut(name, head, width - 1 - head)


def shorten_unique(names: Sequence[str], width: int) -> list[str]:
    """Each name in at most `width` columns, cut in the middle, and names that differ still differ after the cut:
    the cut moves away from the middle, and the width grows only where no cut of that width tells them apart."""
    return [t.plain for t in _shorten_texts([Text(n) for n in names], width)]


def _cut(name, head: int, tail: int):
    """A str or a Text (whose styles the slices keep) with its middle replaced by the ellipsis."""
    return name[:head] + ELLIPSIS + name[len(name) - tail:]


def _heads(width: int) -> Iterable[int]:
    """Where to cut a name of `width` columns: the middle first, then ever further from it."""
    middle = (width - 1) // 2
    for step in range(width):
        for head in (middle - step, middle + step) if step else (middle,):
            if 1 <= head <= width - 2:
                yield head


def _shorten_texts(cells: Sequence[Text], width: int) -> list[Text]:
    """shorten_unique on a column's cells, styles kept; one cut for the whole column, so that names line up."""
    distinct = list(dict.fromkeys(c.plain for c in cells))
    longest = max((cell_len(p) for p in distinct), default=0)
    for w in range(max(width, 3), longest + 1):
        for head in _heads(w):
            shown = [p if cell_len(p) <= w else _cut(p, head, w - 1 - head) for p in distinct]
            if len(set(shown)) == len(distinct):
                return [c if cell_len(c.plain) <= w else _cut(c, head, w - 1 - head) for c in cells]
    return list(cells)


def _lines_width(text: Text | str) -> int:
    plain = text.plain if isinstance(text, Text) else text
    return max((cell_len(line) for line in plain.split("\n")), default=0)


def _longest_word(text: Text | str) -> int:
    plain = text.plain if isinstance(text, Text) else text
    return max((cell_len(w) for w in plain.split()), default=0)


def _wrap_header(header: str, width: int) -> str:
    """The header in lines of at most `width` columns where its words allow, broken at spaces and hyphens."""
    return "\n".join(textwrap.wrap(header, max(width, 1), break_long_words=False, break_on_hyphens=True)) or header


@dataclass
class _Column:
    header: str
    kind: str
    justify: str
    short: str | None
    means: str | None
    key: bool
    index: int  # its cell in each row
    shown: str = ""  # the header as printed (wrapped, or the short form)
    width: int | None = None  # set where a text column was narrowed

    def __post_init__(self):
        self.shown = self.header


@dataclass
class _Row:
    cells: list[Text]
    end_section: bool


@dataclass
class FitTable:
    """A rich Table that fits the console it is printed on (see the module's docstring). `style` goes to each
    rich Table it prints (box, pad_edge, collapse_padding, ...)."""

    title: str | None = None
    caption: str | None = None
    style: dict = field(default_factory=dict)
    columns: list[_Column] = field(default_factory=list)
    rows: list[_Row] = field(default_factory=list)

    def add_column(self, header: str, kind: str = NUMBER, *, short: str | None = None, means: str | None = None,
                   justify: str | None = None, key: bool = False) -> None:
        """`short`: the header where the whole one does not fit, and `means` what the legend says it stands for
        (default: the whole header); `key`: repeated in each part of a split table (default: the first column)."""
        self.columns.append(_Column(header, kind, justify or ("right" if kind == NUMBER else "left"), short, means,
                                    key, len(self.columns)))

    def add_row(self, *cells: str | Text | None, end_section: bool = False) -> None:
        """Cells as rich markup (str) or Text; a value that is not markup (a user's path) must come as Text."""
        texts = [c if isinstance(c, Text) else Text.from_markup(c or "") for c in cells]
        self.rows.append(_Row(texts + [Text("")] * (len(self.columns) - len(texts)), end_section))

    def __rich_console__(self, console: Console, options: ConsoleOptions) -> RenderResult:
        yield from fit(self, options.max_width)


def fit(table: FitTable, width: int) -> list[RenderableType]:
    """What to print for `table` in `width` columns: one table, several, or the rows stacked."""
    columns = [_Column(c.header, c.kind, c.justify, c.short, c.means, c.key, c.index) for c in table.columns]
    rows = [_Row(list(r.cells), r.end_section) for r in table.rows]
    if not any(c.key for c in columns) and columns:
        columns[0].key = True
    legend: list[str] = []
    steps = (_wrap_headers, _narrow_text, _abbreviate_headers, _shorten_names)
    for step in steps:
        if _width(table, columns, rows) <= width:
            break
        step(table, columns, rows, width, legend)
    caption = "\n".join(([table.caption] if table.caption else []) + (["; ".join(legend)] if legend else [])) or None
    if _width(table, columns, rows) <= width:
        return [_build(table, columns, rows, table.title, caption)]
    parts = _split(table, columns, rows, width)
    if parts is None:
        return _stacked(table, caption)
    # the caption as a line of its own: wrapped to the terminal, not to the narrower parts
    return [_build(table, part, rows, table.title if i == 0 else None) for i, part in enumerate(parts)] + \
        ([Text.from_markup(caption)] if caption else [])


def _column_width(col: _Column, rows: list[_Row]) -> int:
    if col.width is not None:
        return col.width
    return max(_lines_width(col.shown), _content_width(col, rows))


def _content_width(col: _Column, rows: list[_Row]) -> int:
    return max((_lines_width(r.cells[col.index]) for r in rows), default=0)


def _build(table: FitTable, columns: list[_Column], rows: list[_Row], title=None, caption=None) -> Table:
    """A rich Table of these columns (all of the table's, or a part of them, in order) at their current widths."""
    out = Table(title=title, caption=caption, **table.style)
    for col in columns:
        wraps = col.kind == TEXT and col.width is not None
        # fold, not ellipsis: were rich ever to narrow a column, a value would take two lines rather than lose digits
        out.add_column(Text(col.shown), justify=col.justify, no_wrap=not wraps, width=col.width if wraps else None,
                       overflow="fold")
    for r in rows:
        out.add_row(*(r.cells[col.index] for col in columns), end_section=r.end_section)
    return out


def _rendered_width(table: Table) -> int:
    console = Console(width=100_000, file=io.StringIO(), highlight=False, color_system=None)
    lines = console.render_lines(table, console.options, pad=False)
    return max((Segment.get_line_length(line) for line in lines), default=0)


def _width(table: FitTable, columns: list[_Column], rows: list[_Row]) -> int:
    """The width of these columns as a table, without its title and caption (rich wraps those to the table)."""
    return _rendered_width(_build(table, columns, rows))


def _wrap_headers(table, columns, rows, width, legend) -> None:
    """A header wider than its column's values: in lines as wide as the values (or its longest word)."""
    for col in columns:
        content = col.width or _content_width(col, rows)
        if _lines_width(col.shown) > content:
            col.shown = _wrap_header(col.header, content)


def _header_min(col: _Column) -> int:
    return max((cell_len(w) for w in col.shown.replace("\n", " ").split()), default=0)


def _shorten_names(table, columns, rows, width, legend) -> None:
    """Take the excess from the name columns, the widest first, down to NAME_MIN (or their header's word)."""
    excess = _width(table, columns, rows) - width
    names = [c for c in columns if c.kind == NAME]
    widths = [_column_width(c, rows) for c in names]
    _take(widths, [max(NAME_MIN, _header_min(c)) for c in names], excess)
    for col, w in zip(names, widths):
        for r, cell in zip(rows, _shorten_texts([r.cells[col.index] for r in rows], w)):
            r.cells[col.index] = cell


def _narrow_text(table, columns, rows, width, legend) -> None:
    """Take the excess from the text columns (rich wraps them at spaces), the widest first, down to their longest
    word."""
    texts = [c for c in columns if c.kind == TEXT]
    widths = [_column_width(c, rows) for c in texts]
    floor = [max(min(TEXT_MIN, w), _header_min(c), max((_longest_word(r.cells[c.index]) for r in rows), default=0))
             for c, w in zip(texts, widths)]
    _take(widths, floor, _width(table, columns, rows) - width)
    for col, w in zip(texts, widths):
        if w < _column_width(col, rows):
            col.width = w


def _take(widths: list[int], floor: list[int], excess: int) -> None:
    """Narrow `widths` by `excess` in all, a column at a time from the widest, none below its floor."""
    while excess > 0:
        room = [j for j in range(len(widths)) if widths[j] > floor[j]]
        if not room:
            return
        widths[max(room, key=lambda j: widths[j])] -= 1
        excess -= 1


def _abbreviate_headers(table, columns, rows, width, legend) -> None:
    for col in columns:
        if col.short is not None:
            col.shown = col.short
            legend.append(f"{col.short}: {col.means or col.header}")


def _split(table, columns, rows, width) -> list[list[_Column]] | None:
    """The columns in parts that each fit, every part led by the key columns; None where one column does not."""
    keys = [c for c in columns if c.key]
    parts: list[list[_Column]] = []
    current = list(keys)
    for col in (c for c in columns if not c.key):
        if _width(table, sorted(current + [col], key=lambda c: c.index), rows) <= width:
            current.append(col)
            continue
        if len(current) == len(keys):  # even alone beside the keys it is too wide
            return None
        parts.append(current)
        current = keys + [col]
        if _width(table, current, rows) > width:
            return None
    parts.append(current)
    parts = [sorted(part, key=lambda c: c.index) for part in parts]
    for part in parts:  # a part with room to spare gives its text columns back their width
        narrowed = [c for c in part if c.width is not None and not c.key]
        for col in narrowed:
            col.width = None
        if narrowed and _width(table, part, rows) > width:
            _narrow_text(table, part, rows, width, [])
    return parts




def _stacked(table, caption) -> list[RenderableType]:
    """Each row as lines of `header: value` (names whole: a line has room), a blank line between rows."""
    out: list[RenderableType] = [Text.from_markup(table.title, style="italic")] if table.title else []
    for r in table.rows:
        if not any(c.plain for c in r.cells):
            continue
        for col in table.columns:
            if r.cells[col.index].plain:
                out.append(Text(f"{col.header}: ") + r.cells[col.index])
        out.append(Text(""))
    if caption:
        out.append(Text(caption))
    return out
