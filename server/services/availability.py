"""Whether a search will move: the agents of its device class that could measure it, and what
its user is told when none can (the API's `agents` and `warnings` on a search, which the CLI
and the dashboard show), with the command that would start one."""

from __future__ import annotations

from dataclasses import dataclass

from sqlalchemy import func, select
from sqlalchemy.orm import Session

from archvocab.wire import AgentAvailability, SearchStatus
from server.services.agents import fingerprint_capabilities, online_since
from server.store.rows import AgentRow, SearchRow
from server.store.store import Store

# Online agents whose fingerprints are read to count those able to run a search: a device
# class is one kind of hardware, so past a few its agents' capabilities agree.
_READ = 64
_KNOWN_LISTED = 20  # device classes named in a warning, at most


@dataclass(frozen=True)
class ClassAgents:
    """One device class's agents: ever registered, online, and what (up to 64 of) the online
    ones can measure with, as (runtimes, devices) pairs."""

    registered: int
    online: int
    capabilities: tuple[tuple[tuple[str, ...], tuple[str, ...]], ...]

    def able(self, runtime: str, device: str) -> int:
        return sum(runtime in runs and device in devices for runs, devices in self.capabilities)


class Fleet:
    """The agents by device class, read once per request (a list of searches shares it)."""

    def __init__(self, store: Store, session: Session) -> None:
        self.session = session
        self.since = online_since(store)
        self.auth = store.settings.auth
        self._classes: dict[str, ClassAgents] = {}
        self._known: list[str] | None = None

    def of(self, device_class: str) -> ClassAgents:
        if device_class not in self._classes:
            self._classes[device_class] = self._read(device_class)
        return self._classes[device_class]

    def _read(self, device_class: str) -> ClassAgents:
        mine = AgentRow.device_class == device_class
        registered = self.session.scalar(select(func.count(AgentRow.id)).where(mine)) or 0
        online = select(AgentRow.fingerprint).where(mine, AgentRow.last_seen_at >= self.since)
        count = self.session.scalar(select(func.count()).select_from(online.subquery())) or 0
        pairs = (fingerprint_capabilities(f) for f in self.session.scalars(online.limit(_READ)))
        capabilities = tuple((tuple(r), tuple(d)) for r, d in pairs)
        return ClassAgents(registered=registered, online=count, capabilities=capabilities)

    def known_classes(self) -> list[str]:
        """Device classes some agent registered with (the first 20, sorted)."""
        if self._known is None:
            query = select(AgentRow.device_class).distinct().order_by(AgentRow.device_class)
            self._known = list(self.session.scalars(query.limit(_KNOWN_LISTED)))
        return self._known


def agent_command(device_class: str, server_url: str | None, auth: bool) -> str:
    """The command that starts an agent of `device_class` for this server."""
    server = server_url or "<this server's URL>"
    token = "HWNAS_AGENT_TOKEN=<agent enrollment token> " if auth else ""
    return f"{token}hwnas agent --server {server} --device-class {device_class}"


def availability(search: SearchRow, fleet: Fleet, server_url: str | None) -> AgentAvailability:
    """The search's agents, with what it waits for while it runs and none of them can measure."""
    agents = fleet.of(search.device_class)
    able = agents.able(search.runtime, search.device)
    counts = {"online": agents.online, "able": able, "ever_registered": agents.registered}
    if search.status != SearchStatus.RUNNING or able:
        return AgentAvailability(**counts)
    command = agent_command(search.device_class, server_url, fleet.auth)
    why = _why_waiting(search, agents)
    return AgentAvailability(
        **counts,
        waiting_for_agent=f"{why}: nothing is measured until one is; start one with `{command}`",
        command=command,
    )


def _why_waiting(search: SearchRow, agents: ClassAgents) -> str:
    named = f"device class {search.device_class!r}"
    if not agents.registered:
        return f"no agent of {named} has ever registered with this server"
    if not agents.online:
        return (
            f"no agent of {named} is online ({agents.registered} registered, none seen within "
            "a lease period)"
        )
    return (
        f"{agents.online} agent(s) of {named} online, but none can measure with runtime "
        f"{search.runtime!r} on device {search.device!r}"
    )


def warnings(search: SearchRow, fleet: Fleet, server_url: str | None) -> list[str]:
    """What a running search's user should know at once: no agent of its device class ever
    registered (a typo, or the agents not started yet), naming the classes that have some."""
    if search.status != SearchStatus.RUNNING or fleet.of(search.device_class).registered:
        return []
    known = fleet.known_classes()
    classes = f"classes with agents: {', '.join(known)}" if known else "no agent has registered"
    command = agent_command(search.device_class, server_url, fleet.auth)
    return [
        f"no agent of device class {search.device_class!r} has ever registered with this "
        f"server ({classes}), so nothing will be measured until one does; start one with "
        f"`{command}`"
    ]
