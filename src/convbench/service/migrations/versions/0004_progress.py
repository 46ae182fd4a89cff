"""A running submission's progress: the grader's current step, its place among the job's steps, when it began.

Revision ID: 0004
Revises: 0003
Create Date: 2026-12-02
"""

import sqlalchemy as sa
from alembic import op

revision = "0004"
down_revision = "0003"
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table("submissions") as batch:
        batch.add_column(sa.Column("step", sa.String(64), nullable=True))
        batch.add_column(sa.Column("step_index", sa.Integer(), nullable=True))
        batch.add_column(sa.Column("step_count", sa.Integer(), nullable=True))
        batch.add_column(sa.Column("step_started", sa.DateTime(timezone=True), nullable=True))


def downgrade() -> None:
    with op.batch_alter_table("submissions") as batch:
        for column in ("step_started", "step_count", "step_index", "step"):
            batch.drop_column(column)
