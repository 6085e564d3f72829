"""Jobs queued by one server process wake claims waiting in another (server.store.work_channel):
on PostgreSQL a transaction that queued jobs tells the other processes when it commits, and
only then; a listener whose connection is cut listens again."""

from __future__ import annotations

import time
from collections.abc import Callable
from pathlib import Path

import httpx
import pytest
import sqlalchemy as sa

from hwnas.testing.servers import api_client, serve
from server.services.context import Services
from server.settings import Settings
from server.store.store import Store
from server.store.work_channel import WorkChannel, decode, encode
from tests.factories import claim_waiting, register, search_request


def _until(check: Callable[[], bool], timeout_s: float = 30.0) -> None:
    deadline = time.monotonic() + timeout_s
    while not check():
        assert time.monotonic() < deadline, "the condition did not come about"
        time.sleep(0.01)


def _metric(url: str, name: str) -> float:
    for line in httpx.get(f"{url}/metrics").text.splitlines():
        if line.startswith(f"{name} "):
            return float(line.split()[1])
    raise AssertionError(f"no {name} in /metrics")


@pytest.mark.parametrize(
    "queued",
    [{"cpu-x86": 3}, {"cpu-x86": 1, "cuda-h100": 2}, {None: 1}, {"cpu-x86": 1, None: 2}, None],
)
def test_a_payload_reads_back_as_the_jobs_per_class_it_was_written_from(queued):
    sender, heard = decode(encode("me", queued))
    assert sender == "me"
    # Jobs of no known class wake every claim, as None does.
    assert heard == (None if queued is None or None in queued else queued)


@pytest.mark.parametrize(
    "payload",
    ["", "not json", "[1, 2]", '{"queued": {"a": 1}}', '{"from": "x", "queued": {"a": "many"}}'],
)
def test_a_payload_that_cannot_be_read_wakes_every_claim(payload):
    assert decode(payload)[1] is None


@pytest.fixture
def services(postgres_url):
    store = Store(Settings(database_url=postgres_url))
    services = Services(store)
    yield services
    store.close()


@pytest.fixture
def heard(postgres_url):
    """What a second process's listener hears, as a list it appends to."""
    got: list = []
    listener = WorkChannel(sa.make_url(postgres_url), got.append)
    listener.start()
    _until(lambda: listener.listening)
    got.clear()  # (a listener that connects wakes everyone once: nothing was heard before)
    yield got
    listener.stop()


def test_a_write_transaction_that_queued_jobs_is_heard_by_the_others_once_it_commits(
    services, heard
):
    store, work = services.store, services.work
    with store.write():
        work.queued("cpu-x86", 2)
        work.queued("cpu-x86", 1)
        work.queued("cuda-h100", 1)
        time.sleep(0.3)
        assert heard == []  # not before the commit
    _until(lambda: heard != [])
    assert heard == [{"cpu-x86": 3, "cuda-h100": 1}]


def test_a_transaction_rolled_back_tells_no_one_and_one_that_queued_nothing_says_nothing(
    services, heard
):
    store, work = services.store, services.work
    with pytest.raises(RuntimeError), store.write():
        work.queued("cpu-x86", 5)
        raise RuntimeError("a failure after the jobs were queued")
    with store.write():
        pass
    with store.write_rows():  # (claims' transactions run beside the others on PostgreSQL)
        work.queued()
    _until(lambda: heard != [])
    time.sleep(0.3)
    assert heard == [None]  # only the last: jobs of any class


def test_a_process_does_not_wake_its_claims_twice_for_its_own_jobs(services, postgres_url):
    # Its own notifications come back to its listener too; the commit woke its claims already.
    woken: list = []
    services.work.channel = channel = WorkChannel(sa.make_url(postgres_url), woken.append)
    other: list = []
    listener = WorkChannel(sa.make_url(postgres_url), other.append)
    with services.work.listening():
        listener.start()
        _until(lambda: channel.listening and listener.listening)
        woken.clear(), other.clear()
        with services.store.write():
            services.work.queued("cpu-x86", 1)
        _until(lambda: other != [])
        time.sleep(0.3)
    listener.stop()
    assert (woken, other) == ([], [{"cpu-x86": 1}])


def test_a_listener_whose_connection_is_cut_listens_again_and_wakes_every_claim(
    postgres_url,
):
    got: list = []
    listener = WorkChannel(sa.make_url(postgres_url), got.append, retry_s=0.05)
    listener.start()
    try:
        _until(lambda: listener.listening)
        got.clear()
        engine = sa.create_engine(postgres_url)
        with engine.connect() as connection:  # failure injection: the database drops it
            cut = connection.execute(
                sa.text(
                    "SELECT pg_terminate_backend(pid) FROM pg_stat_activity"
                    " WHERE query = 'LISTEN hwnas_work' AND pid <> pg_backend_pid()"
                )
            ).all()
        engine.dispose()
        assert cut == [(True,)]
        # Listening again, it wakes every claim once (notifications meanwhile were lost).
        _until(lambda: got == [None], timeout_s=10)
        assert listener.listening
    finally:
        listener.stop()
    assert not listener.listening


def test_a_claim_waiting_on_one_server_gets_the_job_of_a_search_created_on_another(
    tmp_path: Path, postgres_url: str
):
    # Two `hwnas serve` processes on one PostgreSQL database. The claim waits 25 s at the
    # first, which has never seen the other write (so it asks again on no timer): only the
    # work channel can bring it the job the second server queues.
    with (
        serve(tmp_path, postgres_url, "--no-auth", name="first") as first,
        serve(tmp_path, postgres_url, "--no-auth", name="second") as second,
        api_client(second.url) as http,
    ):
        assert _metric(first.url, "hwnas_work_heard_from_others") == 1
        agent = register(http)
        waiter, answers = claim_waiting(first.url, agent)
        _until(lambda: _metric(first.url, "hwnas_claims_waiting") == 1)
        created = time.monotonic()
        assert http.post("/api/v1/searches", json=search_request()).status_code == 201
        waiter.join(60)
        answered_s = time.monotonic() - created
        running = http.get("/api/v1/searches/1/candidates", params={"status": "running"}).json()
    assert [a.status_code for a in answers] == [200]
    assert [c["arch_id"] for c in running] == [answers[0].json()["arch_id"]]
    assert answered_s < 10, f"answered {answered_s:.1f} s after the job was queued"  # not 25
