"""How a refused or failed request is answered: a 4xx (or 500) status and one line saying why, as JSON
{"error": ...} under /api and as the error page elsewhere; and the bound on a request's body, checked before it is
read."""

from __future__ import annotations

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse, Response
from starlette.exceptions import HTTPException as StarletteHTTPException

from convbench.core.errors import UsageError
from convbench.service.deps import service_state
from convbench.service.rendering import error_page

FORM_OVERHEAD = 64 << 10  # multipart boundaries and fields around the file


def one_line(request: Request, message: str, status: int, headers: dict | None = None) -> Response:
    message = " ".join(str(message).split()) or "refused"
    if request.url.path.startswith("/api/"):
        return JSONResponse({"error": message}, status_code=status, headers=headers)
    return error_page(message, status, service_state(request).banner, headers)


async def refused(request: Request, e: UsageError) -> Response:
    return one_line(request, str(e), getattr(e, "status", 400))


async def invalid(request: Request, e: RequestValidationError) -> Response:
    """A parameter that is not what the endpoint takes (`/api/submissions/abc`, hidden=maybe, no file): one line
    naming it, not FastAPI's list of errors."""
    first = (e.errors() or [{}])[0]
    where = " ".join(str(part) for part in first.get("loc", ()) if part != "body") or "the request"
    text = str(first.get("msg", "invalid"))
    return one_line(request, f"{where}: {text[:1].lower() + text[1:]}", 422)


async def http_error(request: Request, e: StarletteHTTPException) -> Response:
    return one_line(request, str(e.detail), e.status_code, getattr(e, "headers", None))


async def failed(request: Request, e: Exception) -> Response:
    """A bug of ours: one line for the client; the traceback goes to the server's log (uvicorn writes it)."""
    return one_line(request, f"the server failed on this request ({type(e).__name__}); the staff can see why in "
                             "its log", 500)


async def bounded_bodies(request: Request, call_next) -> Response:
    """A body over the upload limit is refused before it is read (the form parser would otherwise spool all of it
    to disk first); a POST must say its length."""
    if request.method == "POST":
        most = service_state(request).policy.max_upload_bytes
        length = request.headers.get("content-length")
        if length is None or not length.isdigit():
            return JSONResponse({"error": "send the upload with a Content-Length header"}, status_code=411)
        if int(length) > most + FORM_OVERHEAD:
            return JSONResponse({"error": f"the upload is over the {most} bytes a submission may have"},
                                status_code=413)
    return await call_next(request)


def install(app: FastAPI) -> None:
    """The handlers and the body bound, on `app`."""
    app.middleware("http")(bounded_bodies)
    app.add_exception_handler(UsageError, refused)
    app.add_exception_handler(RequestValidationError, invalid)
    app.add_exception_handler(StarletteHTTPException, http_error)
    app.add_exception_handler(Exception, failed)
