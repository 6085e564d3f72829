"""`hwnas token create | list | revoke`: token administration, straight in the server's
database on the server's host (whoever can open the database is its admin already)."""

from __future__ import annotations

import argparse
import json
import sys

from rich.console import Console
from rich.table import Table

from server.services import auth
from server.settings import Settings, utcnow
from server.store.database import READ, WRITE, make_engine
from server.store.rows import TokenRow
from server.store.schema import SchemaMismatch


def run(args: argparse.Namespace) -> int:
    try:
        engine = make_engine(Settings.database_url_from(args.db))
    except SchemaMismatch as exc:
        print(f"hwnas token: {exc}", file=sys.stderr)
        return 2
    from sqlalchemy.orm import Session

    out = Console(highlight=False)
    # A create or a revoke writes: on SQLite its transaction begins as a write (BEGIN
    # IMMEDIATE), as the store's do (server.store.database.WRITE), so that it waits its turn
    # beside a running server rather than upgrading a read.
    bind = engine.execution_options(**(READ if args.token_command == "list" else WRITE))
    try:
        with Session(bind) as session, session.begin():
            if args.token_command == "create":
                row, secret = auth.create_token(session, args.name, args.kind, utcnow())
                if args.json:
                    print(json.dumps({**_view(row), "token": secret}))
                else:
                    what = "user token" if args.kind == "user" else "agent enrollment token"
                    print(f"{what} {row.id} ({row.name}), shown once:", file=sys.stderr)
                    print(secret)
                return 0
            if args.token_command == "list":
                rows = auth.list_tokens(session)
                if args.json:
                    print(json.dumps([_view(r) for r in rows]))
                else:
                    out.print(_table(rows))
                return 0
            revoked = auth.revoke_token(session, args.name_or_id, utcnow())
            if not revoked:
                print(
                    f"hwnas token revoke: no live token named {args.name_or_id!r}", file=sys.stderr
                )
                return 1
            if args.json:
                print(json.dumps([_view(r) for r in revoked]))
            else:
                for row in revoked:
                    print(f"revoked {row.kind} token {row.id} ({row.name})")
            return 0
    finally:
        engine.dispose()


def _view(row: TokenRow) -> dict:
    return {
        "id": row.id,
        "name": row.name,
        "kind": row.kind,
        "created_at": row.created_at.isoformat(),
        "revoked_at": row.revoked_at.isoformat() if row.revoked_at else None,
    }


def _table(rows: list[TokenRow]) -> Table:
    table = Table("id", "name", "kind", "created (UTC)", "revoked (UTC)")
    for row in rows:
        table.add_row(
            str(row.id),
            row.name,
            row.kind,
            f"{row.created_at:%Y-%m-%d %H:%M}",
            f"{row.revoked_at:%Y-%m-%d %H:%M}" if row.revoked_at else "",
        )
    return table
