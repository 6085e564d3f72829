"""The dashboard and the API at 20,000 candidates, against a 1,000-candidate baseline.

Two SQLite files, each holding one finished search written by `bench/large_search.py` (a
small one, the baseline, and a large one), and one real `hwnas serve` over each. A file per
size, not both searches in one, because /searches, /agents and /metrics read the whole
database: with a file each, their baseline is a small installation too. Then, for `--repeats`
rounds, small and large interleaved (the order alternates each round):

1. the API: wall time and bytes (gzip on the wire, as a browser asks) of every endpoint the
   dashboard reads, `--calls` times each; /points also with `?after=last-10`, the live poll;
2. the page, in headless chromium: a fresh load of `#/search/ID` until the page says it is
   ready (`#view[data-ready=1]`; page clock from navigation start and Python's wall clock),
   the page's own timings of that update (`window.hwnasTimings`), the JS heap, then a sort
   on latency and the "frontier only" filter on and off, each timed in the page from the
   click to the table's forced layout (the click is handled synchronously).

Medians per size and metric and the large/small ratio go to a table and `--json`.

    .venv/bin/python -m bench.dashboard_scale [--small 1000] [--large 20000] [--repeats 5]
        [--calls 3] [--workdir DIR] [--json bench/results/dashboard_scale.json]
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import platform
import shlex
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from datetime import datetime, timezone
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
sys.path[:] = [p for p in sys.path if Path(p or ".").resolve() != HERE]  # bench/proxies.py
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

import httpx  # noqa: E402

CHROMIUM, CHROMEDRIVER = "/usr/bin/chromium", "/usr/bin/chromedriver"
ENDPOINTS = {  # what the dashboard reads, by name; {id} and {after} filled per search
    "searches": "/api/v1/searches",
    "search": "/api/v1/searches/{id}",
    "points": "/api/v1/searches/{id}/points",
    "points_after": "/api/v1/searches/{id}/points?after={after}",
    "report": "/api/v1/searches/{id}/report",
    "hypervolume": "/api/v1/searches/{id}/hypervolume",
    "pareto": "/api/v1/searches/{id}/pareto",
    "agents": "/api/v1/agents",
    "metrics": "/metrics",
}
PAGE_TIMINGS = ("fetch_ms", "rows_ms", "table_ms", "proxy_latency_ms", "proxy_memory_ms")
PAGE_TIMINGS += ("latency_memory_ms", "cube_ms", "hypervolume_ms", "total_ms")
# Records when #view turns ready, on the page's own clock (ms from navigation start).
READY_PROBE = """new MutationObserver((_, obs) => {
  const view = document.getElementById('view');
  if (view && view.dataset.ready === '1') { window.hwnasReadyAt = performance.now(); obs.disconnect(); }
}).observe(document, {subtree: true, attributes: true, attributeFilter: ['data-ready']});"""
# Clicks an element and forces the table's layout; sorting and filtering are synchronous.
CLICK = """const el = document.querySelector(arguments[0]);
const t0 = performance.now();
el.click();
document.querySelector('#table tbody').offsetHeight;
const ms = performance.now() - t0;
const row = document.querySelector('#table tbody tr');
return [ms, row ? row.dataset.arch : null, document.querySelector('#table .table-count').textContent];"""
SORT = '#table th[data-key="latency_ms"]'
FILTER = "#frontier-only"


def search_name(size: int) -> str:
    return f"dashboard_scale {size} candidates"


def build(workdir: Path, size: int, label: str) -> Path:
    """The search's database, filled unless `workdir` has it from an earlier run."""
    db = workdir / f"{label}-{size}.db"
    if not db.exists():
        from bench.large_search import fill  # server + search code: only when building

        started = time.perf_counter()
        fill(db, size, seed=0, name=search_name(size))
        print(f"built {db} ({size} candidates) in {time.perf_counter() - started:.0f} s")
    return db


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


@contextlib.contextmanager
def serve(db: Path, log: Path):
    """A real `hwnas serve` over `db` on a loopback port; yields its base URL."""
    port = free_port()
    cmd = [sys.executable, "-m", "hwnas", "serve", "--port", str(port), "--db", str(db)]
    with log.open("w") as out:
        proc = subprocess.Popen(cmd, stdout=out, stderr=subprocess.STDOUT)
        try:
            url = f"http://127.0.0.1:{port}"
            wait_healthy(url, proc, log)
            yield url
        finally:
            proc.terminate()
            proc.wait(timeout=30)


def wait_healthy(url: str, proc: subprocess.Popen, log: Path) -> None:
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline and proc.poll() is None:
        with contextlib.suppress(httpx.TransportError):
            if httpx.get(f"{url}/healthz", timeout=1).status_code == 200:
                return
        time.sleep(0.2)
    raise RuntimeError(f"server did not start: {log.read_text()[-2000:]}")


def find_search(http: httpx.Client, size: int) -> int:
    for search in http.get("/api/v1/searches").raise_for_status().json():
        if search["name"] == search_name(size):
            return search["id"]
    raise RuntimeError(f"no search named {search_name(size)!r}: delete the workdir's file")


def time_api(http: httpx.Client, search_id: int, size: int, calls: int) -> dict[str, list]:
    """Per endpoint: `calls` wall times (ms, body read and decoded) and the wire bytes."""
    out: dict[str, list] = {}
    for name, template in ENDPOINTS.items():
        path = template.format(id=search_id, after=max(0, size - 10))
        for _ in range(calls):
            started = time.perf_counter()
            response = http.get(path).raise_for_status()
            ms = 1000 * (time.perf_counter() - started)
            out.setdefault(f"api {name} ms", []).append(ms)
        out.setdefault(f"api {name} kB", []).append(response.num_bytes_downloaded / 1000)
    return out


def browser():
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service

    opts = webdriver.ChromeOptions()
    opts.binary_location = CHROMIUM
    for arg in ("--headless=new", "--no-sandbox", "--disable-gpu", "--window-size=1400,1800"):
        opts.add_argument(arg)
    opts.add_argument("--disable-background-networking")
    opts.add_argument("--enable-unsafe-swiftshader")
    opts.add_argument("--enable-precise-memory-info")
    driver = webdriver.Chrome(service=Service(CHROMEDRIVER), options=opts)
    driver.execute_cdp_cmd("Page.addScriptToEvaluateOnNewDocument", {"source": READY_PROBE})
    return driver


def time_page(driver, url: str, search_id: int, visit: int) -> tuple[dict, dict]:
    """One fresh load of the search's page (a new query string each time), then a sort and
    the frontier filter on and off: timings (ms, MB) and what the page showed."""
    from selenium.webdriver.support.ui import WebDriverWait

    started = time.perf_counter()
    driver.get(f"{url}/dashboard/?visit={visit}#/search/{search_id}")
    WebDriverWait(driver, 300, poll_frequency=0.02).until(
        lambda d: d.execute_script("return window.hwnasReadyAt !== undefined")
    )
    sample = {"page wall ms": 1000 * (time.perf_counter() - started)}
    state = driver.execute_script(
        "const v = document.getElementById('view');"
        "return [window.hwnasReadyAt, window.hwnasTimings, v.dataset.results, v.dataset.frontier,"
        " performance.memory ? performance.memory.usedJSHeapSize : null];"
    )
    ready, timings, results, frontier, heap = state
    sample["page ready ms"] = ready
    sample.update({f"page {k}": timings[k] for k in PAGE_TIMINGS})
    sample["page js heap MB"] = heap / 1e6 if heap else float("nan")
    shown = {"results": int(results), "frontier": int(frontier)}
    for name, selector in (("sort", SORT), ("filter on", FILTER), ("filter off", FILTER)):
        ms, first, count = driver.execute_script(CLICK, selector)
        sample[f"page {name} ms"] = ms
        shown[name] = {"first": first, "count": count}
    return sample, shown


def run(args: argparse.Namespace, workdir: Path) -> dict:
    sizes = {"small": args.small, "large": args.large}
    dbs = {label: build(workdir, size, label) for label, size in sizes.items()}
    samples: dict[str, dict[str, list]] = {label: {} for label in sizes}
    checks: dict[str, list] = {label: [] for label in sizes}
    with contextlib.ExitStack() as stack:
        urls = {k: stack.enter_context(serve(db, workdir / f"{k}.log")) for k, db in dbs.items()}
        http = {k: stack.enter_context(client(u)) for k, u in urls.items()}
        ids = {k: find_search(http[k], sizes[k]) for k in sizes}
        driver = browser()
        stack.callback(driver.quit)
        for label in sizes:  # warm-up, not kept: plotly.min.js into the cache, server imports
            time_api(http[label], ids[label], sizes[label], 1)
            time_page(driver, urls[label], ids[label], 0)
        for rnd in range(args.repeats):
            order = list(sizes) if rnd % 2 == 0 else list(reversed(sizes))
            for label in order:
                extend(samples[label], time_api(http[label], ids[label], sizes[label], args.calls))
            for label in order:
                page, shown = time_page(driver, urls[label], ids[label], rnd + 1)
                extend(samples[label], {k: [v] for k, v in page.items()})
                checks[label].append(shown)
            print(f"round {rnd + 1}/{args.repeats} done")
        browser_version = driver.capabilities.get("browserVersion")
    return summarise(args, sizes, ids, samples, checks, browser_version)


def client(url: str) -> httpx.Client:
    return httpx.Client(base_url=url, timeout=120, headers={"accept-encoding": "gzip"})


def extend(into: dict[str, list], new: dict[str, list]) -> None:
    for key, values in new.items():
        into.setdefault(key, []).extend(values)


def summarise(args, sizes, ids, samples, checks, browser_version) -> dict:
    medians = {
        label: {k: statistics.median(v) for k, v in per.items()} for label, per in samples.items()
    }
    ratios = {
        k: medians["large"][k] / medians["small"][k] if medians["small"][k] else None
        for k in medians["small"]
    }
    return {
        "command": "python -m bench.dashboard_scale " + shlex.join(args.argv),
        "date": datetime.now(timezone.utc).isoformat(timespec="seconds"),
        "machine": machine(browser_version),
        "sizes": sizes,
        "search_ids": ids,
        "repeats": args.repeats,
        "calls": args.calls,
        "medians": medians,
        "ratios": ratios,
        "samples": samples,
        "checks": checks,
    }


def machine(browser_version: str | None) -> dict:
    cpu = next(
        (line.split(":", 1)[1].strip() for line in _cpuinfo() if line.startswith("model name")),
        platform.processor(),
    )
    return {
        "nproc": os.cpu_count(),
        "cpu": cpu,
        "platform": platform.platform(),
        "python": platform.python_version(),
        "chromium": browser_version,
    }


def _cpuinfo() -> list[str]:
    with contextlib.suppress(OSError):
        return Path("/proc/cpuinfo").read_text().splitlines()
    return []


def print_table(result: dict) -> None:
    from rich.console import Console
    from rich.table import Table

    small, large = result["sizes"]["small"], result["sizes"]["large"]
    table = Table(title=f"medians of {result['repeats']} interleaved rounds")
    for column in ("metric", f"{small:,}", f"{large:,}", "large / small"):
        table.add_column(column, justify="left" if column == "metric" else "right")
    for key, ratio in result["ratios"].items():
        a, b = result["medians"]["small"][key], result["medians"]["large"][key]
        table.add_row(key, f"{a:.1f}", f"{b:.1f}", "-" if ratio is None else f"{ratio:.1f}x")
    Console().print(table)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--small", type=int, default=1_000, help="the baseline's candidates")
    parser.add_argument("--large", type=int, default=20_000)
    parser.add_argument("--repeats", type=int, default=5, help="interleaved rounds")
    parser.add_argument("--calls", type=int, default=3, help="calls per endpoint per round")
    parser.add_argument("--workdir", type=Path, help="keep (and reuse) the databases here")
    parser.add_argument("--json", type=Path, default=HERE / "results" / "dashboard_scale.json")
    args = parser.parse_args(argv)
    args.argv = sys.argv[1:] if argv is None else list(argv)
    with contextlib.ExitStack() as stack:
        workdir = args.workdir or Path(stack.enter_context(tempfile.TemporaryDirectory()))
        workdir.mkdir(parents=True, exist_ok=True)
        result = run(args, workdir)
    args.json.parent.mkdir(parents=True, exist_ok=True)
    args.json.write_text(json.dumps(result, indent=1) + "\n")
    print_table(result)
    print(f"wrote {args.json}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
