// #/search/ID : one search. Frontier slices, a 3-D view, the baseline, the hypervolume over
// time and the sortable candidate table; while the search runs, only results newer than the
// last seen are fetched (points?after=N), and of the frontier only what changed
// (points?frontier_since=TOKEN).
import { ApiError, api, esc, fmt, progressBar } from "./api.js";
import { poll } from "./app.js";
import { convergence, cube, label, slice } from "./plots.js";
import { SortableTable } from "./table.js";

const HARDWARE = ["latency_ms", "memory_mb"];
// A large running search redraws its plots at most this often (a redraw of tens of thousands
// of points costs about a second in software WebGL); the table and the facts follow every poll.
const LARGE_ROWS = 3000, LARGE_REDRAW_MS = 10000;
const FRONTIER_DRAWN = 3000;

export function mount(view, [id]) {
  view.innerHTML = `
    <h1 id="title">search ${esc(id)}</h1>
    <div class="facts" id="facts"></div>
    <div id="waiting" role="status" hidden
      style="background:#fff8e1;border:1px solid #e0b400;padding:.5rem .8rem;margin:0 0 .8rem"></div>
    <details id="baseline-hint" class="hint" hidden></details>
    <p id="no-results" class="empty" hidden></p>
    <div class="plots" hidden>
      <div class="plot" id="plot-proxy-latency"></div>
      <div class="plot" id="plot-proxy-memory"></div>
      <div class="plot" id="plot-latency-memory"></div>
      <div class="plot" id="plot-3d"></div>
      <div class="plot" id="plot-hypervolume"></div>
    </div>
    <h2>Candidates</h2>
    <div class="toolbar">
      <label><input type="checkbox" id="frontier-only"> frontier only</label>
      <label><input type="checkbox" id="hide-failed"> hide failures</label>
    </div>
    <div id="table"></div>`;
  const state = { id, rows: [], last: 0, frontier: new Set(), baseline: null, table: null };
  return poll(() => refresh(view, state), 2);
}

async function refresh(view, state) {
  const started = performance.now();
  const info = await api(`/searches/${state.id}`);
  // Past FRONTIER_DRAWN points only the nominal frontier is drawn (renderData), so only its
  // intervals and groups are read: a hundredth of them at 100,000 candidates. The frontier is
  // read whole again when that changes.
  const scope = info.frontier_size > FRONTIER_DRAWN ? "nominal" : "all";
  const since = state.token && state.scope === scope
    ? `&frontier_since=${encodeURIComponent(state.token)}` : "";
  state.scope = scope;
  const url = `/searches/${state.id}/points?spec=summary&intervals=${scope}`;
  let points = await api(`${url}&after=${state.last}${since}`);
  if (state.epoch !== undefined && points.epoch !== state.epoch) {
    // Earlier rows changed (hypervolumes backfilled once the normalisation was fixed).
    state.rows = [];
    points = await api(`${url}&after=0`);
  }
  state.epoch = points.epoch;
  const fetched = performance.now();
  if (!state.columns) setUp(view, state, points);
  for (const values of points.rows) state.rows.push(asRow(points.columns, values, state.proxy));
  const timings = { fetch_ms: fetched - started, rows_ms: performance.now() - fetched };
  state.last = points.last;
  // Re-measurements move frontier points and intervals without adding result rows.
  const frontierChanged = takeFrontier(state, points);
  if (state.baseline === null) state.baseline = await baseline(state);
  state.status = info.status;
  renderFacts(view, info, state);
  renderWaiting(view, info);
  await renderBaselineHint(view, info, state);
  const changed = points.rows.length || frontierChanged || !view.dataset.ready;
  const finished = info.status !== "running";
  const due = state.rows.length < LARGE_ROWS || finished
    || performance.now() - (state.drawnAt || 0) > LARGE_REDRAW_MS;
  if ((changed || state.drawPending) && due) {
    Object.assign(timings, await renderData(view, state));
    state.drawnAt = performance.now();
    state.drawPending = false;
  } else if (changed) {
    state.table.setRows(state.rows);
    view.dataset.results = String(state.rows.length);
    state.drawPending = true;
  }
  // How long this update took, by step: read by the scale benchmark (bench/dashboard_scale.py).
  window.hwnasTimings = { ...timings, total_ms: performance.now() - started };
  view.dataset.ready = "1";
  view.dataset.status = info.status;
  return info.status === "running";
}

function setUp(view, state, points) {
  state.columns = points.columns;
  state.objectives = points.objectives;
  state.proxy = points.objectives.find((o) => !HARDWARE.includes(o)) || "decoder_params";
  const proxy = label(state.proxy);
  const number = (key, title, digits) => ({
    key, label: title, value: (r) => r[key], html: (r) => fmt(r[key], digits),
  });
  // A re-measured result shows its best estimate, as the plots and /candidates do.
  const hardwareColumn = (key, title) => ({
    key, label: title, value: (r) => measuredValue(state, r, key),
    html: (r) => fmt(measuredValue(state, r, key), 4),
  });
  const columns = [
    number("result", "#"),
    { key: "arch_id", label: "arch id", text: true, value: (r) => r.arch_id,
      html: (r) => `<span class="mono" title="${r.arch_id}">${r.arch_id.slice(0, 12)}</span>` },
    { key: "status", label: "status", text: true, value: (r) => r.status, html: (r) => r.status },
    { key: "on_frontier", label: "frontier", value: (r) => (state.frontier.has(r.arch_id) ? 1 : 0),
      html: (r) => (state.frontier.has(r.arch_id) ? "&#9679;" : "") },
    number(state.proxy, proxy, 4),
    hardwareColumn("latency_ms", "latency ms"),
    hardwareColumn("memory_mb", "memory MB"),
    { key: "feasible", label: "in bounds", value: (r) => r.feasible,
      html: (r) => (r.feasible === null ? "" : r.feasible ? "yes" : "no") },
    number("generation", "gen"),
    { key: "export", label: "export", text: true, value: (r) => r.arch_id,
      html: (r) => ["torch", "onnx", "json"]
        .map((f) => `<a href="/api/v1/architectures/${r.arch_id}/export?format=${f}">${f}</a>`)
        .join(" ") },
    // Last and cut to the cell's width (the whole summary on hover): the one column whose
    // width grows with the space, so the export links stay on screen at 1400 px.
    { key: "spec", label: "architecture", text: true, className: "clip", value: (r) => r.summary,
      html: (r) => `<span title="${esc(r.summary)}">${esc(r.summary)}</span>` },
  ];
  if (state.proxy !== "decoder_params") columns.splice(5, 0, number("decoder_params", "decoder params", 4));
  state.table = new SortableTable(view.querySelector("#table"), columns, {
    rowClass: (r) => `${state.frontier.has(r.arch_id) ? "frontier" : ""} ${r.status}`,
    rowId: (r) => r.arch_id,
  });
  const filters = () => {
    const frontierOnly = view.querySelector("#frontier-only").checked;
    const hideFailed = view.querySelector("#hide-failed").checked;
    state.table.setFilter((r) => (!frontierOnly || state.frontier.has(r.arch_id))
      && (!hideFailed || r.status !== "failed"));
  };
  view.querySelector("#frontier-only").addEventListener("change", filters);
  view.querySelector("#hide-failed").addEventListener("change", filters);
}

// A hardware value of result `r`: the mean of its quiet measurements where it was measured
// again (the server's `estimates`), else its one measurement.
function measuredValue(state, r, key) {
  return state.estimates?.[r.arch_id]?.[key] ?? r[key];
}

// `r` as plotted: at its best estimate, the hover saying so, where it was measured again.
function atEstimate(state, r) {
  const estimate = state.estimates?.[r.arch_id];
  if (!estimate) return r;
  const mean = `mean of its measurements: latency ${fmt(estimate.latency_ms, 4)} ms, memory ${fmt(estimate.memory_mb, 4)} MB`;
  return { ...r, ...estimate, hover: `${mean}<br>first: ${r.hover}` };
}

function asRow(columns, values, proxy) {
  const row = new ResultRow(proxy);
  columns.forEach((name, i) => { row[name] = values[i]; });  // "summary": the spec in one line
  return row;
}

// A result: its columns' values, and the text a plot shows on hover, made when a plot first
// asks (plots draw a fraction of a large search's rows; making it for all took 0.2 s at
// 100,000).
class ResultRow {
  constructor(proxy) {
    this.proxy = proxy;
  }

  get hover() {
    this.hoverText ??= [
      `<b>${this.arch_id.slice(0, 12)}</b> (#${this.result})`,
      `${label(this.proxy)}: ${fmt(this[this.proxy], 4)}`,
      `latency: ${fmt(this.latency_ms, 4)} ms, memory: ${fmt(this.memory_mb, 4)} MB`,
      esc(this.summary),
    ].join("<br>");
    return this.hoverText;
  }
}

async function baseline(state) {
  // The report names the layer-scaled baseline measured on the same device class, if any.
  try {
    const report = await api(`/searches/${state.id}/report`);
    if (!report.baseline) return [];
    const table = await api(`/searches/${report.baseline.baseline_search_id}/points?spec=summary`);
    return table.rows.map((v) => asRow(table.columns, v, state.proxy))
      .filter((r) => r.status === "measured")
      .map((r) => ({ ...r, hover: `baseline<br>${r.hover}` }));
  } catch (error) {
    if (error instanceof ApiError) return [];
    throw error;
  }
}

function renderFacts(view, info, state) {
  const p = info.progress;
  const hv = p.hypervolume === null ? "-" : p.hypervolume.toFixed(4);
  view.querySelector("#title").textContent = `${info.name || "search"} (#${info.id})`;
  view.querySelector("#facts").innerHTML = `
    <span class="status-${info.status}"><b>${info.status}</b> ${esc(info.finish_reason || "")}</span>
    <span>${progressBar(p.measured + p.failed, p.budget)}</span>
    <span>device class <b>${esc(info.device_class)}</b></span>
    <span>strategy <b>${esc(info.request.strategy)}</b></span>
    <span>space <b>${esc(info.request.space.kind || "gpt2")}</b></span>
    <span>running <b>${p.running}</b>, queued <b>${p.queued}</b>, failed <b>${p.failed}</b></span>
    <span title="frontier points the noise could not tell apart, measured again once the budget was spent">re-measured <b id="remeasured">${p.remeasured}</b> of ${p.remeasure_budget}</span>
    <span title="filled: on the frontier whatever a re-measurement gives; hollow: the noise cannot tell it on or off">frontier <b id="frontier-size">${info.frontier_size}</b>${info.noise ? `, certain <b id="frontier-certain">${info.noise.certain_frontier_size}</b>` : ""}</span>
    <span>hypervolume <b>${hv}</b></span>
    ${noiseFacts(info.noise)}
    <span>baseline <b id="baseline">${state.baseline && state.baseline.length ? `${state.baseline.length} depths` : "none"}</b></span>`;
}

// "baseline none" says how to measure the baseline this search's report compares with: the
// same space kind, device class and measurement settings (server/services/report.py).
async function renderBaselineHint(view, info, state) {
  const box = view.querySelector("#baseline-hint");
  const needed = !state.baseline?.length && info.request.strategy !== "layer_scaled";
  box.hidden = !needed;
  if (!needed || box.dataset.search === String(info.id)) return;
  const command = await baselineCommand(info);
  box.innerHTML = `<summary>No layer-scaled baseline to compare this search with: how to
    measure one</summary>
    On this device class, with this search's space and measurement settings (agents measure it
    like a search; 16 depths unless <code class="mono">--layers</code> says fewer):
    <code class="mono command">${esc(command)}</code>
    <small>Where the server has authentication, set <code class="mono">HWNAS_TOKEN</code> to a
    user token. README: "Layer-scaled baselines and the report". Reload this page once it
    has finished.</small>`;
  box.dataset.search = String(info.id);
}

async function baselineCommand(info) {
  const { space, measurement } = info.request;
  const kind = space.kind || "gpt2";
  // Only the settings that differ from the kind's defaults, to keep the command short.
  const kinds = await api("/spaces");
  const defaults = kinds.find((k) => k.name === kind)?.defaults || {};
  const changed = Object.fromEntries(Object.entries(space)
    .filter(([key, value]) => key !== "kind" && JSON.stringify(value) !== JSON.stringify(defaults[key])));
  const quote = (text) => `'${text.replaceAll("'", "'\\''")}'`;
  const parts = ["hwnas baseline --server", location.origin, "--device-class", info.device_class,
    "--kind", kind];
  if (Object.keys(changed).length) parts.push("--space", quote(JSON.stringify(changed)));
  if (measurement) parts.push("--measurement", quote(JSON.stringify(measurement)));
  return parts.join(" ");
}

// A search nothing can measure says so, with the command that would start an agent for it:
// the server's warnings (no agent of the class ever registered) or its note on the agents.
function renderWaiting(view, info) {
  const box = view.querySelector("#waiting");
  const waiting = info.agents?.waiting_for_agent;
  const lines = info.warnings?.length ? info.warnings : waiting ? [waiting] : [];
  const code = (line) => esc(line).replace(/`([^`]+)`/g, '<code class="mono">$1</code>');
  box.innerHTML = lines.map((line) => `<div>${code(line)}</div>`).join("");
  box.dataset.command = lines.length ? info.agents?.command || "" : "";
  box.hidden = !lines.length;
}

// How far a value may move when measured again (the bars on the frontier points), and the
// results kept off the frontier because the machine was busy when they were measured.
function noiseFacts(noise) {
  if (!noise) return "";
  const pct = (rel) => `-${((1 - rel[0]) * 100).toFixed(0)}/+${((rel[1] - 1) * 100).toFixed(0)}%`;
  const widths = Object.entries(noise.interval_rel).map(([m, rel]) => `${esc(m)} ${pct(rel)}`);
  return `<span id="noise" title="${(noise.confidence * 100).toFixed(0)}% interval of a re-measurement in a fresh process, from ${noise.reference_readings} readings of the reference architecture">
      re-measurement within <b>${widths.join(", ")}</b></span>
    <span>busy results <b id="busy-results">${noise.busy_results}</b> (off the frontier)</span>`;
}

async function renderData(view, state) {
  const measured = state.rows.filter((r) => r.status === "measured");
  // Wide intervals can keep most of a large search on the frontier beyond noise: past
  // FRONTIER_DRAWN points only its nominal points are drawn as the frontier, the points only
  // the noise keeps there stay in the cloud behind (the table still marks them all).
  const front = measured.filter((r) => state.frontier.has(r.arch_id));
  const nominalOnly = front.length > FRONTIER_DRAWN || state.scope === "nominal";
  const drawn = nominalOnly ? front.filter((r) => state.groups?.[r.arch_id] === r.arch_id) : front;
  const data = {
    rows: measured.map((r) => atEstimate(state, r)),
    frontierName: nominalOnly ? `nominal frontier (${drawn.length} of ${front.length})` : "frontier",
    // A re-measured point is drawn at the mean of its measurements (atEstimate).
    frontier: drawn
      .map((r) => atEstimate(state, r))
      .map((r) => ({
        ...r,
        certain: state.certain.has(r.arch_id),
        hover: `${state.certain.has(r.arch_id) ? "certain" : "within noise"}<br>${r.hover}`,
      })),
    intervals: state.intervals || {},
    baseline: state.baseline || [],
  };
  const p = state.proxy;
  const timings = {};
  const timed = async (name, draw) => {
    const start = performance.now();
    await draw();
    timings[name] = performance.now() - start;
  };
  await timed("table_ms", () => state.table.setRows(state.rows));
  view.dataset.results = String(state.rows.length);
  view.dataset.frontier = String(state.frontier.size);
  if (!showPlots(view, state, measured.length)) return timings;
  const $ = (id) => view.querySelector(id);
  await timed("proxy_latency_ms", () => slice($("#plot-proxy-latency"), p, "latency_ms", data));
  await timed("proxy_memory_ms", () => slice($("#plot-proxy-memory"), p, "memory_mb", data));
  await timed("latency_memory_ms", () =>
    slice($("#plot-latency-memory"), "latency_ms", "memory_mb", data));
  await timed("cube_ms", () => cube($("#plot-3d"), [p, "latency_ms", "memory_mb"], data));
  await timed("hypervolume_ms", () => convergence($("#plot-hypervolume"), state.rows));
  return timings;
}

// Axes around nothing say nothing: until a candidate is measured, a note stands in for the
// plots. The plots are shown before they are first drawn, so that plotly sizes them.
function showPlots(view, state, measured) {
  const note = view.querySelector("#no-results");
  const running = state.status === "running";
  note.textContent = running
    ? `No results yet — waiting for agents to measure the first candidates${state.rows.length ? ` (${state.rows.length} failed)` : ""}.`
    : `No measured results: nothing to plot${state.rows.length ? ` (${state.rows.length} failed)` : ""}.`;
  note.hidden = measured > 0;
  view.querySelector(".plots").hidden = measured === 0;
  return measured > 0;
}

// The answer's frontier: the whole of it, or (with frontier_since) the arch ids whose place
// changed, each replacing what was held for it. Returns whether anything changed.
function takeFrontier(state, points) {
  state.token = points.frontier_token;
  if (points.frontier_since == null) {
    const changed = !sameSet(state.frontier, points.frontier)
      || JSON.stringify(points.intervals) !== JSON.stringify(state.intervals || {});
    state.frontier = new Set(points.frontier);
    state.intervals = points.intervals;
    state.groups = points.groups;
    state.certain = new Set(points.certain || []);
    state.estimates = points.estimates;
    return changed;
  }
  for (const arch of [...points.frontier, ...points.left]) {
    state.frontier.delete(arch);
    state.certain.delete(arch);
    delete state.intervals[arch];
    delete state.groups[arch];
    delete state.estimates[arch];
  }
  for (const arch of points.frontier) state.frontier.add(arch);
  for (const arch of points.certain) state.certain.add(arch);
  Object.assign(state.intervals, points.intervals);
  Object.assign(state.groups, points.groups);
  Object.assign(state.estimates, points.estimates);
  return points.frontier.length + points.left.length > 0;
}

function sameSet(set, list) {
  return set.size === list.length && list.every((x) => set.has(x));
}
