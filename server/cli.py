"""`hwnas serve`."""

from __future__ import annotations

import argparse
import sys

import uvicorn

from server.app import create_app
from server.db import SchemaMismatch
from server.settings import Settings


def serve(args: argparse.Namespace) -> int:
    settings = Settings(
        database_url=Settings.database_url_from(args.db), lease_seconds=args.lease_seconds
    )
    try:
        app = create_app(settings)
    except SchemaMismatch as exc:
        print(f"hwnas serve: {exc}", file=sys.stderr)
        return 2
    uvicorn.run(app, host=args.host, port=args.port, log_level="info")
    return 0
