"""`hwnas serve`."""

from __future__ import annotations

import argparse
import sys

import uvicorn

from server.app import create_app
from server.db import SchemaMismatch
from server.logs import configure_logging
from server.settings import Settings


def serve(args: argparse.Namespace) -> int:
    configure_logging(args.log_format, args.log_level)
    settings = Settings(
        database_url=Settings.database_url_from(args.db), lease_seconds=args.lease_seconds
    )
    try:
        app = create_app(settings)
    except SchemaMismatch as exc:
        print(f"hwnas serve: {exc}", file=sys.stderr)
        return 2
    host = "127.0.0.1" if args.host in ("0.0.0.0", "::") else args.host
    print(f"hwnas: dashboard at http://{host}:{args.port}/dashboard/", file=sys.stderr)
    # log_config=None keeps uvicorn from installing its own handlers, so its lines reach ours
    # in the same format; its access log is off because the app logs each request itself.
    uvicorn.run(
        app,
        host=args.host,
        port=args.port,
        log_config=None,
        log_level=args.log_level,
        access_log=False,
    )
    return 0
