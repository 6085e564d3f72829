"""`hwnas serve`."""

from __future__ import annotations

import argparse

import uvicorn

from server.app import create_app
from server.settings import Settings


def serve(args: argparse.Namespace) -> int:
    settings = Settings(
        database_url=Settings.database_url_from(args.db), lease_seconds=args.lease_seconds
    )
    uvicorn.run(create_app(settings), host=args.host, port=args.port, log_level="info")
    return 0
