"""The grading service: the course's `rai` and its ranking, for staff who grade a whole class on a few GPUs.

    db.py         the tables (SQLAlchemy 2) and their migrations (Alembic, migrations/): SQLite by default,
                  PostgreSQL for a deployment
    store.py      what the service does with them: teams and their tokens, submissions stored before they are
                  acknowledged, jobs claimed and finished exactly once, the leaderboard, a team's history, the
                  gradebook
    jobs.py       grading on the Dask cluster: one task per submission on a worker with a GPU (resource GPU=1),
                  convbench grade in the sandbox there; the dispatcher that queues, re-queues and records
    lease.py      one `serve` per database: the lease it holds while it runs
    archive.py    uploads packed, read and unpacked as untrusted data
    sandboxing.py whether this machine may grade untrusted code (the sandbox's self-test)
    web.py        the web application (FastAPI + Jinja2 pages, each with a JSON twin under /api)

`convbench serve` and `worker` (cli/service.py), `teams` (cli/teams.py) and `submit` (cli/submit.py) start them."""

DEFAULT_DB = "sqlite:///convbench-service.db"  # a file in the folder `serve` starts in
DEFAULT_PORT = 8408
REPEATS = 3  # the largest size's timed calls per layer are 1 + REPEATS: their spread decides ties
