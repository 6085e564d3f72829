// The frontier plots: 2-D slices, a 3-D view and the hypervolume over time, with plotly.js.
// Every measured candidate is drawn dimmed behind the frontier; past LARGE points the dimmed
// cloud, and past LARGE frontier points the frontier too (wide intervals keep most of a large
// search on the frontier beyond noise), are drawn with WebGL (scattergl): SVG takes seconds.

const LARGE = 3000;
// The 3-D view is context, not data to read point by point: past this many points every
// k-th is drawn, of the cloud and of the frontier (software WebGL in a 3-D scene is slow).
const CUBE_CLOUD = 4000;
// The 2-D cloud likewise past this many (software WebGL draws a 100,000-point cloud for
// seconds after the page is ready); 20,000 still shows its shape and its edges.
const CLOUD_2D = 20000;
const LABELS = { latency_ms: "latency (ms)", memory_mb: "peak memory (MB)" };
// Box select and lasso select nothing here; without them the toolbar is shorter.
const CONFIG = {
  responsive: true,
  displaylogo: false,
  displayModeBar: "hover",
  modeBarButtonsToRemove: ["select2d", "lasso2d"],
};
// The toolbar stands upright in the right margin, clear of the left-aligned title above.
const MODEBAR = { orientation: "v" };
const MARGIN_2D = { l: 60, r: 40, t: 40, b: 50 };
const FRONTIER = "#2f6fde", BASELINE = "#e07b1a", CLOUD = "#8a93a6", OVER = "#d98c8f";

// Shorter axis titles for the 3-D view, where long ones run out of its box.
const SHORT = { latency_ms: "latency ms", memory_mb: "memory MB", decoder_params: "params" };

export const label = (name) => LABELS[name] || name.replaceAll("_", " ");

export function slice(div, x, y, data) {
  const { frontier, baseline, intervals } = data;
  const [cloudName, rows] = every(data.rows, "measured", CLOUD_2D);
  const cloudType = rows.length > LARGE ? "scattergl" : "scatter";
  const traces = [
    {
      name: cloudName,
      type: cloudType,
      mode: "markers",
      x: rows.map((r) => r[x]),
      y: rows.map((r) => r[y]),
      text: rows.map((r) => r.hover),
      hoverinfo: "text",
      marker: { size: 5, opacity: 0.35, color: rows.map((r) => (r.feasible ? CLOUD : OVER)) },
    },
  ];
  if (baseline.length) {
    const sorted = baseline.slice().sort((a, b) => a[x] - b[x]);
    traces.push({
      name: "layer-scaled baseline",
      type: "scatter",
      mode: "lines+markers",
      x: sorted.map((r) => r[x]),
      y: sorted.map((r) => r[y]),
      text: sorted.map((r) => r.hover),
      hoverinfo: "text",
      line: { color: BASELINE, dash: "dot" },
      marker: { color: BASELINE, size: 7, symbol: "diamond" },
    });
  }
  traces.push({
    name: data.frontierName || "frontier",
    type: frontier.length > LARGE ? "scattergl" : "scatter",
    mode: "markers",
    x: frontier.map((r) => r[x]),
    y: frontier.map((r) => r[y]),
    text: frontier.map((r) => r.hover),
    hoverinfo: "text",
    // Filled: on the frontier whatever the noise; hollow: the noise cannot tell.
    marker: {
      color: FRONTIER,
      size: 9,
      symbol: frontier.map((r) => (r.certain === false ? "circle-open" : "circle")),
      line: { color: FRONTIER, width: 1.5 },
    },
    error_x: errorBars(frontier, x, intervals),
    error_y: errorBars(frontier, y, intervals),
  });
  const layout = {
    title: { text: `${label(y)} vs ${label(x)}`, font: { size: 14 }, x: 0.02, xanchor: "left" },
    xaxis: { title: { text: label(x) }, automargin: true },
    yaxis: { title: { text: label(y) }, automargin: true },
    margin: MARGIN_2D,
    modebar: MODEBAR,
    legend: { orientation: "h", y: -0.25 },
    hovermode: "closest",
    uirevision: `${x}-${y}`, // keeps the user's zoom across live updates
  };
  return Plotly.react(div, traces, layout, CONFIG);
}

// [trace name, rows]: past `most` rows every k-th, and the name says so.
function every(rows, name, most) {
  const step = Math.ceil(rows.length / most);
  return step > 1 ? [`${name} (every ${step}th)`, rows.filter((_, i) => i % step === 0)] : [name, rows];
}

// Where a re-measurement of each frontier point should fall, on a measured axis; not drawn
// past LARGE points, where the bars would hide the points and keep WebGL busy for seconds.
function errorBars(points, axis, intervals) {
  if (points.length > LARGE) return { visible: false };
  if (!points.some((r) => intervals?.[r.arch_id]?.[axis])) return { visible: false };
  const bound = (r, i) => (intervals[r.arch_id]?.[axis] || [r[axis], r[axis]])[i];
  return {
    type: "data",
    symmetric: false,
    array: points.map((r) => bound(r, 1) - r[axis]),
    arrayminus: points.map((r) => r[axis] - bound(r, 0)),
    color: FRONTIER,
    thickness: 1,
    width: 3,
  };
}

export function cube(div, axes, data) {
  const [x, y, z] = axes;
  const trace = (name, rows, marker) => ({
    name,
    type: "scatter3d",
    mode: "markers",
    x: rows.map((r) => r[x]),
    y: rows.map((r) => r[y]),
    z: rows.map((r) => r[z]),
    text: rows.map((r) => r.hover),
    hoverinfo: "text",
    marker,
  });
  const traces = [
    trace(...every(data.rows, "measured", CUBE_CLOUD), { size: 2, opacity: 0.25, color: CLOUD }),
    trace(...every(data.frontier, data.frontierName || "frontier", CUBE_CLOUD),
      { size: 4, color: FRONTIER }),
  ];
  if (data.baseline.length) {
    traces.push(trace("layer-scaled baseline", data.baseline, { size: 4, color: BASELINE }));
  }
  // Labels sit outside the unit cube and turn with it: a farther camera, short titles and
  // few ticks keep them inside the box whatever the view's width.
  const axis = (name) => ({
    title: { text: SHORT[name] || label(name), font: { size: 11 } },
    nticks: 4,
    tickfont: { size: 10 },
    tickformat: name === "decoder_params" ? "~s" : ".3~g",
  });
  const layout = {
    title: { text: "3-D frontier", font: { size: 14 }, x: 0.02, xanchor: "left" },
    scene: {
      xaxis: axis(x),
      yaxis: axis(y),
      zaxis: axis(z),
      aspectmode: "cube",
      camera: { eye: { x: 1.75, y: 1.75, z: 1.05 } },
      domain: { x: [0, 1], y: [0.1, 1] },
    },
    margin: { l: 10, r: 40, t: 40, b: 10 },
    modebar: MODEBAR,
    legend: { orientation: "h", x: 0, y: 0, yanchor: "bottom" },
    uirevision: "cube",
  };
  return Plotly.react(div, traces, layout, CONFIG);
}

export function convergence(div, rows) {
  // A step line ("hv") needs only the results where the volume changed, and the last one
  // (the line runs on to it): the same line from a few thousand points, not every result.
  const told = [];
  let held = null;
  for (const r of rows) {
    if (r.hypervolume === null) continue;
    held = told.length && r.hypervolume === told[told.length - 1].hypervolume ? r : null;
    if (!held) told.push(r);
  }
  if (held) told.push(held);
  const trace = {
    name: "hypervolume",
    type: told.length > LARGE ? "scattergl" : "scatter",
    mode: "lines",
    x: told.map((r) => r.result),
    y: told.map((r) => r.hypervolume),
    line: { color: FRONTIER, shape: "hv" },
  };
  const layout = {
    title: { text: "hypervolume of the measured frontier", font: { size: 14 }, x: 0.02,
      xanchor: "left" },
    xaxis: { title: { text: "results" }, automargin: true },
    yaxis: { title: { text: "normalised hypervolume" }, rangemode: "tozero", automargin: true },
    margin: MARGIN_2D,
    modebar: MODEBAR,
    uirevision: "hv",
  };
  return Plotly.react(div, [trace], layout, CONFIG);
}

