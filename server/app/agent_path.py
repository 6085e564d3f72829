"""The agents' routes (registration, claim, heartbeat, result), answered in front of FastAPI.

They are the requests a fleet sends most, and FastAPI's machinery around a route (its
middleware, routing, dependency solving, validation, background tasks) cost a request about as
much as the services behind it (docs/benchmarks.md, "The agents' requests in front of
FastAPI"). Here a request that reads as its route expects is answered directly: the same wire
models validate it, the same services answer it, domain errors translate as
server.app.errors translates them. Anything else (no Content-Length or a body over the limit,
another content type, an unexpected query, a body or path the models refuse) goes on to the
FastAPI route untouched, its body replayed, so that every refusal keeps its one shape and its
one place. The routes stay in the API (server.api.agents, server.api.jobs) for the schema and for
those requests.

A claim that may wait for work (`?wait=`) waits here, on the event loop, between its claims
(server.services.work): a thousand idle agents hold a thousand open requests, not threads.
Claims woken together by queued jobs ask together (`_Together`).
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import math
import re
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any

import anyio
import anyio.to_thread
from pydantic import BaseModel, ValidationError
from starlette.responses import JSONResponse, Response

from archvocab.errors import HwnasError
from archvocab.wire import (
    API_PREFIX,
    MAX_CLAIM_WAIT_S,
    AgentRegistration,
    JobLease,
    JobResult,
    LeaseRef,
)
from server.api.encoded import encoded
from server.app.errors import domain_answer
from server.services import agents, arrivals, jobs
from server.services.auth import Caller, agent_caller, enroller
from server.services.auth import caller as auth_caller
from server.services.context import Services

# Bounds the API's path parameters declare (server.api.deps): outside them, FastAPI answers.
_MAX_ID = 2**31 - 1
_MAX_AGENT_ID = 64


@dataclass
class _Answer:
    """What a handler decided, in a worker thread: the response, and a task for after it."""

    response: Response
    after: Callable[[], None] | None = None
    idle: bool = False  # a claim that found no work


# A handler's arguments: the services, the path's match, the query string, the body and the
# Authorization header. None: not this path's to answer, FastAPI's route answers instead.
Handler = Callable[[Services, re.Match, str, bytes, str | None], _Answer | None]


@dataclass(frozen=True)
class _Route:
    path: str  # the route's template, as its metrics and log label (ObserveRequests)
    pattern: re.Pattern
    handle: Handler
    reads_body: bool = True
    waits: bool = False  # a claim: it may wait for work (`_claim_wait`)
    # A registration: they take a worker thread one at a time (`AgentPath.registering`).
    registers: bool = False


def _model(kind: type[BaseModel], body: bytes) -> Any:
    """The body as `kind`, read as FastAPI reads it (json.loads, then validation); None when
    it does not read, for FastAPI's route to say why."""
    try:
        return kind.model_validate(json.loads(body))
    except (ValueError, RecursionError, ValidationError):
        return None


def _answered(step: Callable[[], _Answer]) -> _Answer:
    try:
        return step()
    except HwnasError as error:
        status, body, headers = domain_answer(error)
        return _Answer(JSONResponse(body, status_code=status, headers=headers))


def _id(text: str) -> int | None:
    value = int(text)
    return value if 1 <= value <= _MAX_ID else None


def _claim_wait(query: str) -> float | None:
    """The seconds a claim may wait for work, as FastAPI reads its one query parameter
    (`wait`, 0 to MAX_CLAIM_WAIT_S); None for any other query, which its route answers."""
    if not query:
        return 0.0
    name, _, value = query.partition("=")
    if name != "wait":
        return None
    try:
        seconds = float(value)
    except ValueError:
        return None
    return seconds if math.isfinite(seconds) and 0 <= seconds <= MAX_CLAIM_WAIT_S else None


def _claim(services: Services, match: re.Match, query: str, body: bytes, auth: str | None):
    agent_id = match["agent_id"]
    if _claim_wait(query) is None or len(agent_id) > _MAX_AGENT_ID or "\x00" in agent_id:
        return None

    def step() -> _Answer:
        lease = jobs.claim(services, agent_id, agent_caller(services.store, auth))
        if lease is None:
            return _Answer(Response(status_code=204), idle=True)
        return _Answer(encoded(lease))

    return _answered(step)


def _heartbeat(services: Services, match: re.Match, query: str, body: bytes, auth: str | None):
    job_id, ref = _id(match["job_id"]), _model(LeaseRef, body)
    if query or job_id is None or ref is None:
        return None

    def step() -> _Answer:
        who = agent_caller(services.store, auth)
        return _Answer(encoded(jobs.heartbeat(services.store, job_id, ref, who)))

    return _answered(step)


# The query a result may carry, as FastAPI reads a bool: anything else goes to its route.
_CLAIM_NEXT = {"": False, "claim_next=true": True, "claim_next=false": False}


def _result(services: Services, match: re.Match, query: str, body: bytes, auth: str | None):
    job_id, result = _id(match["job_id"]), _model(JobResult, body)
    claim_next = _CLAIM_NEXT.get(query)
    if job_id is None or result is None or claim_next is None:
        return None

    def step() -> _Answer:
        # As server.api.jobs.submit_result: the search hears of it once the answer has gone.
        who = agent_caller(services.store, auth)
        receipt, search_id = jobs.report(services, job_id, result, who, claim_next)
        after = None
        if search_id is not None:
            after = lambda: arrivals.settle_after_answer(services, search_id)  # noqa: E731
        return _Answer(encoded(receipt), after)

    return _answered(step)


def _register(services: Services, match: re.Match, query: str, body: bytes, auth: str | None):
    registration = _model(AgentRegistration, body)
    if query or registration is None:
        return None

    def step() -> _Answer:
        # As server.api.agents.register_agent, its Enroller dependency first.
        who = auth_caller(services.store, auth)
        enroller(who)
        info = agents.register_agent(services, registration, enrolled_by=who)
        return _Answer(encoded(info, status_code=201))

    return _answered(step)


ROUTES = (
    _Route(
        f"{API_PREFIX}/agents",
        re.compile(rf"{re.escape(API_PREFIX)}/agents"),
        _register,
        registers=True,
    ),
    _Route(
        f"{API_PREFIX}/agents/{{agent_id}}/claim",
        re.compile(rf"{re.escape(API_PREFIX)}/agents/(?P<agent_id>[^/]+)/claim"),
        _claim,
        reads_body=False,
        waits=True,
    ),
    _Route(
        f"{API_PREFIX}/jobs/{{job_id}}/heartbeat",
        re.compile(rf"{re.escape(API_PREFIX)}/jobs/(?P<job_id>[0-9]{{1,10}})/heartbeat"),
        _heartbeat,
    ),
    _Route(
        f"{API_PREFIX}/jobs/{{job_id}}/result",
        re.compile(rf"{re.escape(API_PREFIX)}/jobs/(?P<job_id>[0-9]{{1,10}})/result"),
        _result,
    ),
)

Receive = Callable[[], Awaitable[dict]]


class AgentPath:
    """ASGI middleware: the agents' routes answered here when they read as expected."""

    def __init__(self, app, services: Services, max_bytes: int) -> None:  # noqa: ANN001
        self.app = app
        self.services = services
        self.max_bytes = max_bytes
        self.together = _Together(services)
        # Registrations queue here, one in a worker thread at a time. A fleet starting at once
        # sends its registrations together, and each agent claims as soon as it is
        # registered; with the registrations all in worker threads, queued at the write lock,
        # every first claim waited behind the registrations still to come (docs/benchmarks.md,
        # "Registered agents before new ones"). One at a time, an agent's first claim waits
        # for one registration at most, and no agent gets its first job later than before.
        self.registering = anyio.CapacityLimiter(1)

    async def __call__(self, scope, receive, send) -> None:  # noqa: ANN001 - ASGI callables
        if scope["type"] != "http" or scope["method"] != "POST":
            await self.app(scope, receive, send)
            return
        for route in ROUTES:
            match = route.pattern.fullmatch(scope["path"])
            if match is not None:
                break
        else:
            await self.app(scope, receive, send)
            return
        headers = dict(scope["headers"])
        body = b""
        if route.reads_body:
            length = headers.get(b"content-length", b"")
            # FastAPI reads a body without a content type as no JSON at all (a 422)
            json_body = headers.get(b"content-type", b"").startswith(b"application/json")
            if not length.isdigit() or int(length) > self.max_bytes or not json_body:
                await self.app(scope, receive, send)  # FastAPI and the body limit say why
                return
            body = await _body(receive)
        authorization = headers.get(b"authorization")
        scope["route"] = route
        query = scope["query_string"].decode("latin-1")
        auth = None if authorization is None else authorization.decode("latin-1")

        limiter = self.registering if route.registers else None

        async def handle() -> _Answer | None:
            return await anyio.to_thread.run_sync(
                route.handle, self.services, match, query, body, auth, limiter=limiter
            )

        waits = route.waits and not self.services.work.closed  # a stopping server holds none
        wait_s = (_claim_wait(query) or 0.0) if waits else 0.0
        if wait_s > 0:
            agent_id = match["agent_id"]
            answer = await self._claim_waiting(handle, wait_s, receive, agent_id, auth)
        else:
            answer = await handle()
        if answer is None:
            await self.app(scope, _replay(body, receive), send)
            return
        await answer.response(scope, receive, send)
        if answer.after is not None:
            await anyio.to_thread.run_sync(answer.after)

    async def _claim_waiting(
        self,
        claim: Callable[[], Awaitable[_Answer | None]],
        wait_s: float,
        receive: Receive,
        agent_id: str,
        auth: str | None,
    ) -> _Answer | None:
        """A claim that may wait `wait_s` for work (server.services.work): asked again each
        time this process commits queued jobs or hears that another did (PostgreSQL), and
        every `_RECHECK_S` where it cannot hear those, until it gets a job, the time is up,
        the server stops (`WorkSignal.close`), or the client goes away (then it takes none).
        Waiting holds no worker thread. Woken, it first asks with the claims woken with it
        (`_Together`), then on its own if that brought no job."""
        work = self.services.work
        others_unheard = self.services.engines.shared and not work.hears_others
        recheck_s = _RECHECK_S if others_unheard else wait_s
        deadline = time.monotonic() + wait_s
        # Registered before the claim, so that a wake while it runs counts; by the agent's
        # device class once a claim of it has found nothing (before: woken by any work).
        idle = self.services.idle_agents
        waiting = _Waiting(work.waiter(idle.get(agent_id)))
        try:
            answer = await claim()
            if answer is None or not answer.idle:
                return answer
            async with anyio.create_task_group() as group:
                group.start_soon(_watch_disconnect, receive, waiting)
                while answer is not None and answer.idle:
                    left = deadline - time.monotonic()
                    if left <= 0:
                        break
                    with anyio.move_on_after(min(left, recheck_s)) as timer:
                        await waiting.event.wait()
                    if waiting.gone or work.closed:
                        break  # gone, or the server stops: "no work"
                    if timer.cancelled_caught and left <= recheck_s:
                        break  # the wait is over with no wake: "no work"
                    work.forget(waiting.event)
                    waiting.event = work.waiter(idle.get(agent_id))
                    woken = not timer.cancelled_caught
                    answer = (await self.together.claim(agent_id, auth)) if woken else None
                    if answer is None:
                        answer = await claim()
                group.cancel_scope.cancel()
        finally:
            work.forget(waiting.event)
        return answer


class _Together:
    """Claims woken in one turn of the event loop, asked together: one write transaction
    leases each the job queued for it (`jobs.claim_together`), `_TOGETHER_MOST` at a time. A
    claim that gets no job this way (None) asks on its own, which also asks the searches for
    more and answers any refusal."""

    def __init__(self, services: Services) -> None:
        self.services = services
        self._asks: list[tuple[str, str | None, asyncio.Future]] = []
        self._asking: set[asyncio.Task] = set()  # the loop holds its tasks weakly

    async def claim(self, agent_id: str, auth: str | None) -> _Answer | None:
        loop = asyncio.get_running_loop()
        answer = loop.create_future()
        self._asks.append((agent_id, auth, answer))
        if len(self._asks) == 1:  # the claims woken with this one join it meanwhile
            loop.call_later(_GATHER_S, self._ask)
        return await answer

    def _ask(self) -> None:
        asks, self._asks = self._asks, []
        for start in range(0, len(asks), _TOGETHER_MOST):
            task = asyncio.ensure_future(self._lease(asks[start : start + _TOGETHER_MOST]))
            self._asking.add(task)
            task.add_done_callback(self._asking.discard)

    async def _lease(self, asks: list[tuple[str, str | None, asyncio.Future]]) -> None:
        try:
            leases = await anyio.to_thread.run_sync(self._claim, [a[:2] for a in asks])
        except Exception:  # noqa: BLE001 - each then asks on its own, which says what went wrong
            leases = [None] * len(asks)
        for (_, _, answer), lease in zip(asks, leases, strict=True):
            if not answer.done():
                answer.set_result(None if lease is None else _Answer(encoded(lease)))

    def _claim(self, asks: list[tuple[str, str | None]]) -> list[JobLease | None]:
        store = self.services.store
        callers: dict[int, Caller] = {}
        for index, (_, auth) in enumerate(asks):
            with contextlib.suppress(HwnasError):  # its own claim says why
                callers[index] = agent_caller(store, auth)
        known = [(asks[i][0], caller) for i, caller in callers.items()]
        leases = iter(jobs.claim_together(self.services, known))
        return [next(leases) if i in callers else None for i in range(len(asks))]


# How long the first claim woken waits for the others woken with it to join: they resume in
# the same turn of the event loop (`WorkSignal.wake`), give or take a step or two.
_GATHER_S = 0.002
# Claims asked together at most: one transaction holds the write lock for all of them, and a
# result sent meanwhile waits for the whole of it.
_TOGETHER_MOST = 50


# How often a waiting claim asks again with no wake, once this process has seen that others
# write the store (`engines.shared`) and it does not hear what they queue (SQLite has no work
# channel; on PostgreSQL, while the channel's connection is down). A process alone queues
# every job itself (or its lease schedule requeues it, which wakes too), so its claims wait
# out their time.
_RECHECK_S = 1.0


@dataclass
class _Waiting:
    event: Any  # asyncio.Event: set by the next wake (server.services.work) or a disconnect
    gone: bool = False  # the client went away


async def _watch_disconnect(receive: Receive, waiting: _Waiting) -> None:
    while (await receive())["type"] != "http.disconnect":
        pass
    waiting.gone = True
    waiting.event.set()


async def _body(receive: Receive) -> bytes:
    chunks = []
    while True:
        message = await receive()
        if message["type"] != "http.request":
            break  # the client went away: whatever came is what there is
        chunks.append(message.get("body", b""))
        if not message.get("more_body", False):
            break
    return b"".join(chunks)


def _replay(body: bytes, receive: Receive) -> Receive:
    """`receive` for the app behind, giving it the body already read."""
    sent = False

    async def replayed() -> dict:
        nonlocal sent
        if sent:
            return await receive()
        sent = True
        return {"type": "http.request", "body": body, "more_body": False}

    return replayed
