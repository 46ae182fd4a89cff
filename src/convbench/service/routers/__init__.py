"""The service's routes, one APIRouter per audience: api.py (programs: JSON under /api), admin.py (the staff:
/api/admin), pages.py (people: HTML pages, each the twin of an /api route)."""
