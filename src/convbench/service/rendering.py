"""The pages' templates (Jinja2, autoescaped; every value shown with its control characters escaped first, by
core/printable.py), and the error page."""

from __future__ import annotations

import math
from pathlib import Path

import jinja2
from fastapi import Request
from fastapi.responses import HTMLResponse
from fastapi.templating import Jinja2Templates
from markupsafe import Markup

from convbench.core.printable import visible
from convbench.service import TIME_RULE, wording
from convbench.service.db import Team


def _shown(value):
    """Every value a page shows: its control characters escaped (a kernel's output, its error's message, a file
    name), before HTML escaping."""
    return visible(value) if isinstance(value, str) and not isinstance(value, Markup) else value


def number(value, places: int = 1, scale: float = 1.0) -> str:
    """A number as a table shows it (value x scale, `places` decimals, thousands separated); "" for anything else (a
    part of a feedback that is missing, or not a number)."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return ""
    try:
        scaled = float(value) * scale
    except OverflowError:  # an int past any float
        return ""
    return f"{scaled:,.{places}f}" if math.isfinite(scaled) else ""


TEMPLATES = Jinja2Templates(env=jinja2.Environment(
    loader=jinja2.FileSystemLoader(str(Path(__file__).with_name("templates"))), autoescape=True, finalize=_shown))
TEMPLATES.env.globals.update(progress_line=wording.progress_line, time_line=wording.time_line, ms=wording.ms,
                             TIME_RULE=TIME_RULE)
TEMPLATES.env.filters["ms"] = wording.ms
TEMPLATES.env.filters["num"] = number


def page(request: Request, name: str, viewer: Team | None, banner: str | None, **context) -> HTMLResponse:
    """Template `name` with the navigation's signed-in team (`viewer`) and the unsandboxed banner, if any."""
    return TEMPLATES.TemplateResponse(request, name, {"viewer": viewer, "banner": banner, **context})


def error_page(message: str, status: int, banner: str | None, headers: dict | None = None) -> HTMLResponse:
    return HTMLResponse(TEMPLATES.get_template("error.html").render(message=message, status=status, banner=banner),
                        status_code=status, headers=headers)
