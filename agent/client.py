"""The agent's side of the server API, over an injected `httpx.Client`.

The client is given an `httpx.Client` whose base_url is the server root, so tests can pass
one bound to a real app (Starlette's TestClient is an httpx.Client) or a MockTransport.
Connection problems surface as `httpx.TransportError`; the worker decides what to retry.
"""

from __future__ import annotations

import logging
from typing import Any

import httpx
from pydantic import ValidationError

from archvocab.wire import (
    API_PREFIX,
    AgentInfo,
    AgentRegistration,
    ApiError,
    JobLease,
    JobResult,
    LeaseRef,
    error_from,
)


class AgentUnknown(ApiError):
    """404 for our agent id, e.g. after the server's database was reset: register again."""


class Refused(ApiError):
    """401 or 403 that retrying cannot fix: the enrollment token is missing, wrong or revoked
    (at registration), or the server refuses the credential it issued (at a claim)."""


REFUSALS = (401, 403)


def quiet_http_requests() -> None:
    """httpx logs every request at INFO (`HTTP Request: POST .../claim "HTTP/1.1 204 No
    Content"`): an idle agent's every poll. The agent logs what matters itself, so httpx is
    heard from WARNING up, unless its logger was given a level of its own."""
    http = logging.getLogger("httpx")
    if http.level == logging.NOTSET:
        http.setLevel(logging.WARNING)


class BadLease(Exception):
    """A claimed job whose lease did not validate; the ids are kept so it can be failed."""

    def __init__(self, job_id: int, lease_id: str, message: str) -> None:
        super().__init__(f"job {job_id}: {message}")
        self.job_id = job_id
        self.lease_id = lease_id
        self.message = message


class AgentClient:
    """Register, claim, heartbeat and report results: one method per endpoint."""

    def __init__(self, http: httpx.Client, enrollment_token: str | None = None) -> None:
        """`enrollment_token`: registers the agent where the server has authentication; the
        server then issues the agent its own credential, used for everything else."""
        self.http = http
        self.enrollment_token = enrollment_token
        self.credential: str | None = None
        # Whether the server has accepted `credential` yet: one it refuses straight after
        # issuing it is refused for good, not forgotten.
        self._accepted = False

    def _post(
        self,
        path: str,
        body: Any = None,
        ok: tuple[int, ...] = (200,),
        token: str | None = None,
        longer_s: float = 0.0,
    ) -> httpx.Response:
        """`longer_s`: how much longer than the client's read timeout the answer may take."""
        token = token or self.credential
        headers = {"Authorization": f"Bearer {token}"} if token else None
        timeout: Any = httpx.USE_CLIENT_DEFAULT  # (its type is private to httpx)
        if longer_s:
            t = self.http.timeout
            read = None if t.read is None else t.read + longer_s
            timeout = httpx.Timeout(connect=t.connect, read=read, write=t.write, pool=t.pool)
        response = self.http.post(API_PREFIX + path, json=body, headers=headers, timeout=timeout)
        if response.status_code not in ok:
            # 404 for our agent id, or 401 for a credential the server accepted before: the
            # server forgot this agent (its database was reset, or the enrollment token
            # revoked): register again. Any other 401 or 403 is for good (Refused).
            status = response.status_code
            forgot = status == 404 and path.startswith("/agents/")
            forgot = forgot or (status == 401 and self.credential is not None and self._accepted)
            refusal = error_from(response, method="POST", path=API_PREFIX + path)
            kind = AgentUnknown if forgot else Refused if status in REFUSALS else None
            if kind is not None:
                raise kind(
                    refusal.status,
                    refusal.message,
                    refusal.field,
                    refusal.body,
                    method="POST",
                    path=API_PREFIX + path,
                )
            raise refusal
        if token is not None and token == self.credential:
            self._accepted = True
        return response

    def register(self, registration: AgentRegistration) -> AgentInfo:
        """POST /agents -> 201 AgentInfo; keeps the credential it carries for later calls.
        Raises Refused on 401/403 (the enrollment token is missing, wrong or revoked)."""
        self.credential, self._accepted = None, False
        response = self._post(
            "/agents",
            registration.model_dump(mode="json"),
            ok=(200, 201),
            token=self.enrollment_token,
        )
        try:
            info = AgentInfo.model_validate(response.json())
        except ValueError as exc:  # not JSON, or not an AgentInfo (pydantic errors are ValueErrors)
            raise ApiError(
                response.status_code, str(exc), method="POST", path=API_PREFIX + "/agents"
            ) from None
        self.credential = info.credential
        return info

    def claim(self, agent_id: str, wait_s: float = 0.0) -> JobLease | None:
        """POST /agents/{id}/claim -> a JobLease, or None on 204 (no work for our class).
        `wait_s`: the server may hold the claim open that long for work (`claim?wait=`, a
        long poll), answering as soon as a job is leased.

        Raises AgentUnknown on 404 (or 401 for a credential accepted before), Refused on any
        other 401/403, BadLease when the lease does not validate.
        """
        query = f"?wait={wait_s:g}" if wait_s > 0 else ""
        response = self._post(f"/agents/{agent_id}/claim{query}", ok=(200, 204), longer_s=wait_s)
        if response.status_code == 204:
            return None
        path = f"{API_PREFIX}/agents/{agent_id}/claim"
        return _lease(_json(response, path), response.status_code, path)

    def heartbeat(self, job_id: int, lease: LeaseRef) -> bool:
        """POST /jobs/{id}/heartbeat; False when the lease is gone (409, or 404 no such job)."""
        body = lease.model_dump(mode="json")
        return self._lease_call(f"/jobs/{job_id}/heartbeat", body) is not None

    def submit(self, job_id: int, result: JobResult) -> bool:
        """POST /jobs/{id}/result; False when the lease is gone (409, or 404 no such job)."""
        body = result.model_dump(mode="json")
        return self._lease_call(f"/jobs/{job_id}/result", body) is not None

    def submit_then_claim(self, job_id: int, result: JobResult) -> tuple[bool, JobLease | None]:
        """POST /jobs/{id}/result?claim_next=true: (accepted, the agent's next job leased to
        it, or None for no work). (False, None) when the lease is gone (409, or 404 no such
        job). Raises BadLease when the next job's lease does not validate."""
        path = f"/jobs/{job_id}/result?claim_next=true"
        response = self._lease_call(path, result.model_dump(mode="json"))
        if response is None:
            return False, None
        data = _json(response, API_PREFIX + path)
        lease = data.get("next") if isinstance(data, dict) else None
        if lease is None:
            return True, None
        return True, _lease(lease, response.status_code, API_PREFIX + path)

    def _lease_call(self, path: str, body: dict[str, Any]) -> httpx.Response | None:
        """The answer, or None when the lease is gone (409, or 404 no such job)."""
        try:
            return self._post(path, body)
        except ApiError as exc:
            if exc.status in (404, 409):
                return None
            raise


def _json(response: httpx.Response, path: str) -> Any:
    try:
        return response.json()
    except ValueError as exc:
        raise ApiError(response.status_code, f"not JSON: {exc}", method="POST", path=path) from None


def _lease(data: Any, status: int, path: str) -> JobLease:
    """A lease the server sent; BadLease when it names a job but does not validate."""
    try:
        return JobLease.model_validate(data)
    except ValidationError as exc:
        if isinstance(data, dict) and isinstance(data.get("job_id"), int) and "lease_id" in data:
            raise BadLease(data["job_id"], str(data["lease_id"]), str(exc)) from None
        raise ApiError(status, f"unreadable lease: {exc}", method="POST", path=path) from None
