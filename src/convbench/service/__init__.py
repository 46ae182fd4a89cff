"""The grading service: the course's `rai` and its ranking, for staff who grade a whole class on a few GPUs.

    db.py         the tables (SQLAlchemy 2) and their migrations (Alembic, migrations/): SQLite by default,
                  PostgreSQL for a deployment
    store.py      what the service does with them: teams and their tokens, submissions stored before they are
                  acknowledged, jobs claimed and finished exactly once, the leaderboard, a team's history, the
                  gradebook
    jobs.py       grading on the Dask cluster: one task per submission on a worker with a GPU (resource GPU=1),
                  convbench grade in the sandbox there; the dispatcher that queues, re-queues and records
    cluster.py    the graders as a Dask cluster: a local one (a worker per GPU), a running scheduler's, or this
                  machine's GPUs joining one (`convbench worker`)
    server.py     `convbench serve`: the port, the database's lease, the graders, the dispatcher, the web server
    lease.py      one `serve` per database: the lease it holds while it runs
    archive.py    uploads packed, read and unpacked as untrusted data
    sandboxing.py whether this machine may grade untrusted code (the sandbox's self-test)
    web.py        the web application (FastAPI + Jinja2 pages, each with a JSON twin under /api), wired from
                  policy.py, deps.py (its dependencies), routers/ (api, admin, pages), uploads.py, views.py,
                  handlers.py, rendering.py and charts.py

`convbench serve` and `worker` (cli/service.py: the options), `teams` (cli/teams.py) and `submit` (cli/submit.py)
start them."""

DEFAULT_DB = "sqlite:///convbench-service.db"  # a file in the folder `serve` starts in
DEFAULT_PORT = 8408
REPEATS = 3  # the largest size's timed calls per layer are 1 + REPEATS: their spread decides ties
# The one rule for the time a grade is ranked by, stated wherever it is shown (the leaderboard, a submission's page,
# `convbench submit`) and used by the gradebook: jobs.grade_job computes it (op_time_s, spread_s).
TIME_RULE = ("Σ Op Time: at the largest size, each conv layer's Op Time is the median of its timed calls (each "
             "checked); Σ is the sum of those medians, so the per-layer Op Times add up to it. Spread: the fastest "
             "and slowest Σ of one timed call of every layer, with Σ itself; overlapping spreads share a rank. The "
             "leaderboard, a submission's page, convbench submit and the gradebook show this Σ. Layer Time (the "
             "graded run's whole layer, timed once) is shown apart and never ranked.")
