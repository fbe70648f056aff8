"""Each agent's tokens witness a trail of their own: the agent joins the key.

Before, the first token to post under a session id held its trail, so a token
bound to one agent could start the trail of another agent's session and have
that agent's recorder refused and its report held to a prefix it never wrote.
Rows posted by a token bound to no agent keep ``""``.

Revision ID: 0008
Revises: 0007
Create Date: 2026-12-02
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0008"
down_revision: str | Sequence[str] | None = "0007"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

TABLE = "witnessed_entries"
PK = "pk_witnessed_entries"


def upgrade() -> None:
    op.execute(sa.text(f"UPDATE {TABLE} SET agent = '' WHERE agent IS NULL"))
    with op.batch_alter_table(TABLE, recreate="always") as batch:
        batch.drop_constraint(PK, type_="primary")
        batch.alter_column(
            "agent", existing_type=sa.Text(), nullable=False, server_default=sa.text("''")
        )
        batch.create_primary_key(PK, ["session_id", "agent", "idx"])


def downgrade() -> None:
    # One trail per session id again: of several agents' trails, the first by name stays.
    op.execute(
        sa.text(
            f"DELETE FROM {TABLE} WHERE agent <> (SELECT MIN(w.agent) FROM {TABLE} w "
            f"WHERE w.session_id = {TABLE}.session_id AND w.idx = 0)"
        )
    )
    with op.batch_alter_table(TABLE, recreate="always") as batch:
        batch.drop_constraint(PK, type_="primary")
        batch.alter_column("agent", existing_type=sa.Text(), nullable=True, server_default=None)
        batch.create_primary_key(PK, ["session_id", "idx"])
    op.execute(sa.text(f"UPDATE {TABLE} SET agent = NULL WHERE agent = ''"))
