"""What every service shares in one server process: the store, and the caches this process
keeps of what the store says (the live engines, the result tables).

The store is the truth; a cache here is rebuilt from its rows whenever it is missing or stale,
so any number of processes can serve one database. `create_app` makes one `Services` and the
routes hand it to the service functions that need a cache; the others take the store alone.
"""

from __future__ import annotations

from datetime import datetime

from server.services.engines import EngineCache
from server.services.leases import ExpiryWatch
from server.services.result_tables import ResultTables
from server.services.work import WorkSignal
from server.store.store import Store
from server.store.work_channel import WorkChannel


class Services:
    def __init__(self, store: Store) -> None:
        self.store = store
        self.engines = EngineCache()
        self.results = ResultTables()
        # Agents whose last claim to this process found no work, with their device class
        # (server.services.jobs.claim; a waiting claim is woken by its class's jobs).
        self.idle_agents: dict[str, str] = {}
        # (search id, created at) -> what every lease of the search says besides the job
        # (server.services.jobs._terms).
        # When a claim next needs to look for expired leases (server.services.leases).
        self.expiry = ExpiryWatch()
        # device class -> (when, how many of its agents were live) (searches.live_agents)
        self.live_counts: dict[str, tuple[datetime, int]] = {}
        self.lease_terms: dict[tuple[int, object], dict] = {}
        # An engine a failed write told something is forgotten with the rollback.
        store.observe(self.engines)
        # Claims waiting for work (`claim?wait=`), woken when jobs queued here commit, and on
        # PostgreSQL when other processes' do (the channel listens while the app runs).
        self.work = WorkSignal()
        if store.row_locks:
            self.work.channel = WorkChannel(store.db.url, self.work.wake)
        store.observe(self.work, rows=True)
