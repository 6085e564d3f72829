"""`hwnas serve`."""

from __future__ import annotations

import argparse
import os
import sys

import uvicorn
from sqlalchemy.orm import Session

from server.app import asgi
from server.app.factory import create_app
from server.app.logs import configure_logging
from server.services import auth
from server.settings import Settings, utcnow
from server.store.database import make_engine
from server.store.schema import SchemaMismatch


def serve(args: argparse.Namespace) -> int:
    configure_logging(args.log_format, args.log_level)
    settings = Settings(
        database_url=Settings.database_url_from(args.db),
        lease_seconds=args.lease_seconds,
        max_request_bytes=int(args.max_request_mb * 2**20),
        auth=not args.no_auth,
        private_reads=args.private_reads,
    )
    if args.workers < 1:
        print("hwnas serve: --workers must be >= 1", file=sys.stderr)
        return 2
    try:
        prepare_database(settings, args.db)
    except SchemaMismatch as exc:
        print(f"hwnas serve: {exc}", file=sys.stderr)
        return 2
    host = "127.0.0.1" if args.host in ("0.0.0.0", "::") else args.host
    print(f"hwnas: dashboard at http://{host}:{args.port}/dashboard/", file=sys.stderr)
    # log_config=None keeps uvicorn from installing its own handlers, so its lines reach ours
    # in the same format; its access log is off because the app logs each request itself.
    common = {
        "host": args.host,
        "port": args.port,
        "log_config": None,
        "log_level": args.log_level,
        "access_log": False,
        # Longer than clients' keep-alive (httpx: 5 s), so the client always closes an idle
        # connection first; equal timeouts race, and a request sent as the server closes
        # fails before the app sees it (bench/load.py --keepalive-s 5 showed it).
        "timeout_keep_alive": 75,
    }
    if args.workers == 1:
        uvicorn.run(create_app(settings), **common)
        return 0
    # Several processes: each imports server.app.asgi, which reads the settings from here.
    asgi.hand_over(settings, args.log_format, args.log_level)
    uvicorn.run(asgi.APP, workers=args.workers, **common)
    return 0


def prepare_database(settings: Settings, db: str) -> None:
    """Migrate once, before any worker starts; with authentication, make the first tokens."""
    engine = make_engine(settings.database_url)
    try:
        if not settings.auth:
            print(
                "hwnas: authentication is OFF (--no-auth): anyone who can reach this "
                "server can start searches and act as an agent",
                file=sys.stderr,
            )
            return
        with Session(engine, expire_on_commit=False) as session, session.begin():
            made = auth.bootstrap(session, utcnow(), os.environ.get(auth.AGENT_TOKEN_ENV))
        for row, secret in made:
            if row.name == f"${auth.AGENT_TOKEN_ENV}":
                print(
                    f"hwnas: ${auth.AGENT_TOKEN_ENV} is now an agent enrollment token",
                    file=sys.stderr,
                )
            elif row.kind == "user":
                print(
                    f"hwnas: first start: user token {row.name!r}, shown once:\n"
                    f"    export HWNAS_TOKEN={secret}",
                    file=sys.stderr,
                )
            else:
                print(
                    f"hwnas: first start: agent enrollment token {row.name!r}, shown once:\n"
                    f"    hwnas agent --token {secret} ...",
                    file=sys.stderr,
                )
        if made:
            print(
                f"hwnas: more with `hwnas token create --db {db} --kind user|agent --name N`",
                file=sys.stderr,
            )
    finally:
        engine.dispose()
