"""The Python client of an hwnas server: what the `hwnas search` commands, the tests and
notebooks use.

    from hwnas.client import Client

    with Client("http://127.0.0.1:8000") as hw:
        search = hw.start_search(device_class="pi5", strategy="hwnas",
                                 budget={"max_evaluations": 300})
        hw.wait(search.id, on_progress=lambda s: print(s.progress.measured))
        for point in hw.pareto(search.id):
            print(point.arch_id, point.objectives)
        best = hw.pick(search.id, "latency_ms", min_decoder_params=5e6, max_memory_mb=300)
        print(best.pick.arch_id, [n.point.arch_id for n in best.neighbours])
        hw.export(point.arch_id, "torch", "model.py")   # then train it
        table = hw.points_frame(search.id)              # every result, as a pandas DataFrame

Every method returns the server's wire objects (pydantic models from `archvocab.wire`); an
error answer raises `ApiError`, which carries the status, the message and the field at fault.
"""

from __future__ import annotations

import logging
import os
import re
import time
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any, Literal

import httpx

from archvocab.wire import (
    API_PREFIX,
    AgentView,
    ArchitectureExport,
    CandidateInfo,
    FrontierPick,
    HypervolumeTrace,
    IntervalScope,
    SearchCreate,
    SearchInfo,
    SearchPoints,
    SearchReport,
    SpaceKindInfo,
    SpecForm,
    error_from,
)
from archvocab.wire import ApiError as ApiError  # re-exported: users catch it from here

DEFAULT_SERVER = "http://127.0.0.1:8000"
ExportFormat = Literal["json", "onnx", "torch"]
_SUFFIX = {"json": ".json", "onnx": ".onnx", "torch": ".py"}


TOKEN_ENV = "HWNAS_TOKEN"


STALL_S = 60.0  # Client.wait: how long nothing moves before a stall is reported
log = logging.getLogger("hwnas.client")


def moved(info: SearchInfo) -> tuple[int, ...]:
    """What changes while a search moves: its job counts."""
    p = info.progress
    return (p.proposed, p.queued, p.running, p.measured, p.failed, p.remeasured, p.remeasuring)


def stall_message(info: SearchInfo, idle_s: float) -> str:
    """One line: how long the search has not moved, what it waits for and how to start one."""
    waiting = info.agents.waiting_for_agent if info.agents else None
    return f"search {info.id} has not moved for {idle_s:.0f} s: {waiting}"


class StallWatch:
    """When a running search stalls: its counts unchanged for `stall_s` seconds while the
    server says no live agent can measure it (`agents.waiting_for_agent`). `stalled` answers
    the idle seconds once per stall, None otherwise; a move starts the watch again."""

    def __init__(self, stall_s: float) -> None:
        self.stall_s = stall_s
        self._last: tuple[int, ...] | None = None
        self._since = 0.0
        self._told = False

    def stalled(self, info: SearchInfo, now: float) -> float | None:
        counts = moved(info)
        if counts != self._last:
            self._last, self._since, self._told = counts, now, False
        waiting = info.agents is not None and info.agents.waiting_for_agent is not None
        idle_s = now - self._since
        if self._told or not waiting or idle_s < self.stall_s:
            return None
        self._told = True
        return idle_s


def _log_stall(info: SearchInfo, idle_s: float) -> None:
    log.warning("%s", stall_message(info, idle_s))


class Client:
    """A connection to one hwnas server. Pass `http` to use your own httpx.Client (a
    Starlette TestClient works too)."""

    def __init__(
        self,
        server: str = DEFAULT_SERVER,
        *,
        token: str | None = None,
        timeout: float = 30.0,
        http: httpx.Client | None = None,
    ) -> None:
        """`token`: a user token (`hwnas token create --kind user`); default $HWNAS_TOKEN.
        A server with authentication needs one to start and cancel searches."""
        self.server = server.rstrip("/")
        self._own = http is None
        token = token if token is not None else os.environ.get(TOKEN_ENV)
        headers = {"Authorization": f"Bearer {token}"} if token else {}
        self.http = http or httpx.Client(base_url=self.server, timeout=timeout, headers=headers)
        if http is not None and headers:
            self.http.headers.update(headers)

    def close(self) -> None:
        if self._own:
            self.http.close()

    def __enter__(self) -> Client:
        return self

    def __exit__(self, *_exc: object) -> None:
        self.close()

    # -- searches ---------------------------------------------------------------------------
    def start_search(
        self, request: SearchCreate | Mapping[str, Any] | None = None, **fields: Any
    ) -> SearchInfo:
        """Start a search from a SearchCreate, a dict, keyword fields, or a dict plus
        overriding fields. Validated by the server (`ApiError` names the field)."""
        body = request.model_dump(mode="json") if isinstance(request, SearchCreate) else {}
        if isinstance(request, Mapping):
            body = dict(request)
        body.update(fields)
        return SearchInfo.model_validate(self._call("POST", "/searches", json=body))

    def start_baseline(self, request: Mapping[str, Any]) -> SearchInfo:
        """Measure a space's layer-scaled baseline on a device class (POST /baselines)."""
        return SearchInfo.model_validate(self._call("POST", "/baselines", json=dict(request)))

    def searches(self) -> list[SearchInfo]:
        return [SearchInfo.model_validate(s) for s in self._call("GET", "/searches")]

    def search(self, search_id: int) -> SearchInfo:
        return SearchInfo.model_validate(self._call("GET", f"/searches/{search_id}"))

    def cancel(self, search_id: int) -> SearchInfo:
        return SearchInfo.model_validate(self._call("POST", f"/searches/{search_id}/cancel"))

    def wait(
        self,
        search_id: int,
        *,
        poll_s: float = 2.0,
        timeout_s: float | None = None,
        on_progress: Callable[[SearchInfo], None] | None = None,
        stall_s: float = STALL_S,
        on_stall: Callable[[SearchInfo, float], None] | None = None,
    ) -> SearchInfo:
        """Poll until the search is no longer running; `on_progress` sees every poll.

        A stall (nothing measured, failed, started or queued for `stall_s` seconds while the
        server says no live agent can measure the search) is reported once per stall to
        `on_stall(info, idle_s)`, or as a warning on the `hwnas.client` logger without one:
        the warning says what the search waits for and the command that starts an agent.
        TimeoutError after `timeout_s`."""
        deadline = None if timeout_s is None else time.monotonic() + timeout_s
        watch = StallWatch(stall_s)
        while True:
            info = self.search(search_id)
            if on_progress is not None:
                on_progress(info)
            if info.status != "running":
                return info
            idle_s = watch.stalled(info, time.monotonic())
            if idle_s is not None:
                (on_stall or _log_stall)(info, idle_s)
            if deadline is not None and time.monotonic() >= deadline:
                raise TimeoutError(f"search {search_id} still running after {timeout_s} s")
            time.sleep(poll_s)

    def pareto(
        self,
        search_id: int,
        *,
        order_by: str | None = None,
        desc: bool | None = None,
        limit: int | None = None,
        offset: int = 0,
        bounds_on: Literal["value", "interval"] | None = None,
        **bounds: float,
    ) -> list[CandidateInfo]:
        """The frontier's points; with `bounds` (min_<objective> / max_<objective>, e.g.
        `max_latency_ms=20, min_decoder_params=5e6`) those that meet them, applied to the best
        estimates (`bounds_on="interval"`: to the whole intervals), ordered by `order_by`
        (best first unless `desc` says otherwise), from `offset` on, at most `limit`."""
        params = _query(
            order_by=order_by,
            desc=desc,
            limit=limit,
            offset=offset or None,
            bounds_on=bounds_on,
            **bounds,
        )
        data = self._call("GET", f"/searches/{search_id}/pareto", params=params)
        return [CandidateInfo.model_validate(c) for c in data]

    def pick(
        self,
        search_id: int,
        order_by: str,
        *,
        desc: bool | None = None,
        neighbours: int | None = None,
        bounds_on: Literal["value", "interval"] | None = None,
        **bounds: float,
    ) -> FrontierPick:
        """The best frontier point by `order_by` that meets `bounds` (as `pareto`), the
        frontier points next to it in that order (`neighbours` on each side, default 2) and
        the rest of its frontier group. ApiError 404 names the bound that left no point and
        the point closest to meeting it."""
        params = _query(
            order_by=order_by, desc=desc, neighbours=neighbours, bounds_on=bounds_on, **bounds
        )
        data = self._call("GET", f"/searches/{search_id}/pick", params=params)
        return FrontierPick.model_validate(data)

    def candidates(
        self,
        search_id: int,
        status: str | None = None,
        limit: int | None = None,
        offset: int = 0,
    ) -> list[CandidateInfo]:
        """Candidates with their full measurements, in proposal order (a page with `limit`)."""
        params: dict[str, Any] = {"offset": offset}
        if status:
            params["status"] = status
        if limit is not None:
            params["limit"] = limit
        data = self._call("GET", f"/searches/{search_id}/candidates", params=params)
        return [CandidateInfo.model_validate(c) for c in data]

    def points(
        self,
        search_id: int,
        after: int = 0,
        frontier_since: str | None = None,
        spec: SpecForm = "full",
        intervals: IntervalScope = "all",
    ) -> SearchPoints:
        """Every told result as one compact table (only those numbered after `after`), and the
        frontier (only what changed since the `frontier_token` given as `frontier_since`);
        each row's spec as its plain data, or (`spec="summary"`) as one line; the intervals
        and groups of every frontier member, or (`intervals="nominal"`) of its nominal points."""
        params: dict[str, Any] = {"after": after, "spec": spec, "intervals": intervals}
        if frontier_since is not None:
            params["frontier_since"] = frontier_since
        data = self._call("GET", f"/searches/{search_id}/points", params=params)
        return SearchPoints.model_validate(data)

    def points_frame(self, search_id: int) -> Any:
        """The results as a pandas DataFrame (needs pandas), with `on_frontier`."""
        import pandas as pd  # only notebooks need it

        table = self.points(search_id)
        frame = pd.DataFrame(table.rows, columns=table.columns)
        frame["on_frontier"] = frame["arch_id"].isin(set(table.frontier))
        return frame

    def hypervolume(self, search_id: int) -> HypervolumeTrace:
        data = self._call("GET", f"/searches/{search_id}/hypervolume")
        return HypervolumeTrace.model_validate(data)

    def report(self, search_id: int) -> SearchReport:
        return SearchReport.model_validate(self._call("GET", f"/searches/{search_id}/report"))

    # -- architectures (by id, or a unique prefix of 8 or more characters) -------------------
    def architecture(self, arch_id: str) -> ArchitectureExport:
        """Its full id, spec, parameter counts and the searches that proposed it."""
        return ArchitectureExport.model_validate(self._call("GET", f"/architectures/{arch_id}"))

    # -- the rest ---------------------------------------------------------------------------
    def agents(self) -> list[AgentView]:
        return [AgentView.model_validate(a) for a in self._call("GET", "/agents")]

    def spaces(self) -> list[SpaceKindInfo]:
        return [SpaceKindInfo.model_validate(s) for s in self._call("GET", "/spaces")]

    def health(self) -> dict[str, Any]:
        return self._check(self.http.get("/healthz"))

    def export(
        self,
        arch_id: str,
        format: ExportFormat = "json",
        path: str | Path | None = None,
        **params: Any,
    ) -> Path | dict[str, Any]:
        """An architecture exported for training: the spec (json), an ONNX file or a PyTorch
        module definition (torch). Written to `path` (a folder gets the server's file name);
        without a path, json returns the dict and the others go to the current folder.
        `arch_id`: its id or a unique prefix of 8 or more characters."""
        # the server makes an ONNX file in a child process the first time: minutes at worst
        slow = {"timeout": max(self.http.timeout.read or 0, 600)} if format == "onnx" else {}
        response = self.http.get(
            f"{API_PREFIX}/architectures/{arch_id}/export",
            params={"format": format, **params},
            **slow,
        )
        if format == "json" and path is None:
            return self._check(response)
        self._check(response, parse=False)
        target = Path(path) if path is not None else Path.cwd()
        if target.is_dir():
            target = target / _file_name(response, arch_id, format)
        target.write_bytes(response.content)
        return target

    # -- plumbing ---------------------------------------------------------------------------
    def _call(self, method: str, path: str, **kwargs: Any) -> Any:
        return self._check(self.http.request(method, f"{API_PREFIX}{path}", **kwargs))

    @staticmethod
    def _check(response: httpx.Response, parse: bool = True) -> Any:
        if response.status_code >= 400:
            raise error_from(response)
        if not parse or response.status_code == 204:
            return None
        return response.json()


def _query(**params: Any) -> dict[str, Any]:
    """Query parameters that are set (httpx sends booleans as true/false)."""
    return {name: value for name, value in params.items() if value is not None}


def _file_name(response: httpx.Response, arch_id: str, format: ExportFormat) -> str:
    """The server's file name (it names the full id whatever prefix was asked for)."""
    match = re.search(r'filename="([^"/\\]+)"', response.headers.get("content-disposition", ""))
    if match:
        return match.group(1)
    if format == "json":
        arch_id = response.json().get("arch_id", arch_id)
    return f"hwnas-{arch_id}{_SUFFIX[format]}"
