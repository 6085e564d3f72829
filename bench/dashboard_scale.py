"""The dashboard and the API at 20,000 candidates, against a 1,000-candidate baseline.

Two SQLite files, one finished search each (`bench/large_search.py`), one `hwnas serve` over
each: a file per size because /searches, /agents and /metrics read the whole database. For
`--repeats` rounds, small and large interleaved (order alternating), it times every endpoint
the dashboard reads (gzip, as a browser asks; /points also `?after=N-10`, the live poll), and
in headless chromium a fresh load of the search's page until `#view[data-ready=1]`, the page's
own step timings, its JS heap, and a sort and the "frontier only" filter (click to layout).
Medians, large/small ratios and every sample go to a table and `--json`; docs/benchmarks.md
says how to read them.

    .venv/bin/python -m bench.dashboard_scale [--small 1000] [--large 20000] [--repeats 5]
        [--calls 3] [--workdir DIR] [--json bench/results/dashboard_scale.json]
"""

from __future__ import annotations

import argparse
import contextlib
import json
import shlex
import statistics
import sys
import tempfile
import time
from datetime import UTC, datetime
from pathlib import Path

import httpx

from bench.machine import commit, machine
from hwnas.testing.servers import serve

HERE = Path(__file__).resolve().parent

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
  if (view && view.dataset.ready === '1') {
    window.hwnasReadyAt = performance.now();
    obs.disconnect();
  }
}).observe(document, {subtree: true, attributes: true, attributeFilter: ['data-ready']});"""
# Clicks an element and forces the table's layout; sorting and filtering are synchronous.
CLICK = """const el = document.querySelector(arguments[0]);
const t0 = performance.now();
el.click();
document.querySelector('#table tbody').offsetHeight;
const ms = performance.now() - t0;
const rows = [...document.querySelectorAll('#table tbody tr')];
const top = rows.slice(0, 5).map((r) => r.dataset.arch);
const count = document.querySelector('#table .table-count').textContent;
return [ms, top, count];"""
ARGS = ("--headless=new", "--no-sandbox", "--disable-gpu", "--window-size=1400,1800")
ARGS += ("--disable-background-networking", "--enable-unsafe-swiftshader")
ARGS += ("--enable-precise-memory-info", "--js-flags=--expose-gc")
ARGS += ("--disable-features=BackForwardCache",)
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
    # No GPU, so WebGL is SwiftShader; the heap read after a collection (expose-gc); no
    # back/forward cache, so earlier loads don't linger in the page's process.
    for arg in ARGS:
        opts.add_argument(arg)
    driver = webdriver.Chrome(service=Service(CHROMEDRIVER), options=opts)
    driver.execute_cdp_cmd("Page.addScriptToEvaluateOnNewDocument", {"source": READY_PROBE})
    return driver


def time_page(driver, url: str, search_id: int, visit: int) -> tuple[dict, dict]:
    """One fresh load of the search's page (a new query string each time), then a sort and
    the frontier filter on and off: timings (ms, MB) and what the page showed."""
    from selenium.webdriver.support.ui import WebDriverWait

    started = time.perf_counter()
    driver.get(f"{url}/dashboard/?visit={visit}#/search/{search_id}")
    settled = WebDriverWait(driver, 300, poll_frequency=0.02).until(
        lambda d: d.execute_script("return window.hwnasReadyAt && performance.now()")
    )
    sample = {"page wall ms": 1000 * (time.perf_counter() - started)}
    state = driver.execute_script(
        "const v = document.getElementById('view'); gc();"
        "return [window.hwnasReadyAt, window.hwnasTimings, v.dataset.results, v.dataset.frontier,"
        " performance.memory.usedJSHeapSize];"
    )
    ready, timings, results, frontier, heap = state
    sample["page ready ms"] = ready
    sample["page settled ms"] = settled
    sample.update({f"page {k}": timings[k] for k in PAGE_TIMINGS})
    sample["page js heap MB"] = heap / 1e6  # chromium's performance.memory
    shown = {"results": int(results), "frontier": int(frontier)}
    for name, selector in (("sort", SORT), ("filter on", FILTER), ("filter off", FILTER)):
        ms, top, count = driver.execute_script(CLICK, selector)
        sample[f"page {name} ms"] = ms
        shown[name] = {"top": top, "count": count}
    return sample, shown


def run(args: argparse.Namespace, workdir: Path) -> dict:
    sizes = {"small": args.small, "large": args.large}
    dbs = {label: build(workdir, size, label) for label, size in sizes.items()}
    samples: dict[str, dict[str, list]] = {label: {} for label in sizes}
    checks: dict[str, list] = {label: [] for label in sizes}
    with contextlib.ExitStack() as stack:
        # A benchmark on loopback: what it measures does not depend on tokens.
        urls = {
            k: stack.enter_context(serve(workdir, db, "--no-auth", name=k)).url
            for k, db in dbs.items()
        }
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
    small, large = medians["small"], medians["large"]
    ratios = {k: large[k] / small[k] if small[k] else None for k in small}
    return {
        "command": shlex.join(["python", "-m", "bench.dashboard_scale", *args.argv]),
        "date": datetime.now(UTC).isoformat(timespec="seconds"),
        "commit": commit(),
        "machine": {**machine(), "chromium": browser_version},
        "sizes": sizes,
        "search_ids": ids,
        "repeats": args.repeats,
        "calls": args.calls,
        "medians": medians,
        "ratios": ratios,
        "samples": samples,
        "checks": checks,
    }


def print_table(result: dict) -> None:
    from rich.console import Console
    from rich.table import Table

    small, large = (f"{result['sizes'][k]:,}" for k in ("small", "large"))
    med, ratios = result["medians"], result["ratios"]

    def cell(label: str, key: str) -> str:
        return f"{med[label][key]:.1f}"

    def times(key: str) -> str:
        return "-" if ratios[key] is None else f"{ratios[key]:.1f}x"

    api = Table(title=f"API: medians of {result['repeats']} x {result['calls']} calls")
    for column in ("endpoint", f"ms {small}", f"ms {large}", "ratio", f"kB {small}", f"kB {large}"):
        api.add_column(column, justify="left" if column == "endpoint" else "right")
    for name in ENDPOINTS:
        ms, kb = f"api {name} ms", f"api {name} kB"
        row = [cell("small", ms), cell("large", ms), times(ms)]
        api.add_row(name, *row, cell("small", kb), cell("large", kb))
    page = Table(title=f"page: medians of {result['repeats']} loads")
    for column in ("metric", small, large, "ratio"):
        page.add_column(column, justify="left" if column == "metric" else "right")
    for key in (k for k in ratios if k.startswith("page ")):
        page.add_row(key[5:], cell("small", key), cell("large", key), times(key))
    Console().print(api, page)


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
