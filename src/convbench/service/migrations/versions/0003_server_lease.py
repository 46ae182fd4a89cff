"""One `convbench serve` per database: the lease row a server holds while it runs (lease.py).

Revision ID: 0003
Revises: 0002
Create Date: 2026-12-02
"""

import sqlalchemy as sa
from alembic import op

revision = "0003"
down_revision = "0002"
branch_labels = None
depends_on = None


def upgrade() -> None:
    table = op.create_table(
        "server_lease",
        sa.Column("id", sa.Integer, primary_key=True),
        sa.Column("holder", sa.String(64), nullable=True),
        sa.Column("host", sa.String(255), nullable=True),
        sa.Column("pid", sa.Integer, nullable=True),
        sa.Column("url", sa.String(255), nullable=True),
        sa.Column("acquired", sa.DateTime(timezone=True), nullable=True),
        sa.Column("heartbeat", sa.DateTime(timezone=True), nullable=True),
        sa.Column("generation", sa.Integer, nullable=False),
    )
    # the one row, free: taking the lease is then always an UPDATE (a compare-and-swap), never a racing INSERT
    op.bulk_insert(table, [{"id": 1, "generation": 0}])


def downgrade() -> None:
    op.drop_table("server_lease")
