// #/new : start a search. The form builds the same JSON a client would send; the server
// validates it (one set of rules), and its 422 names the field, which is marked here. Its
// initial values are the API's own defaults (SearchCreate, read from the OpenAPI document),
// so the form, the CLI and a bare POST start the same search.
import { api, esc, saveToken, savedToken } from "./api.js";

export function mount(view) {
  view.innerHTML = `<h1>New search</h1><p class="empty">Loading the space kinds...</p>`;
  Promise.all([api("/spaces"), api("/proxies"), api("/agents"), requestDefaults()])
    .then(([spaces, proxies, agents, defaults]) => render(view, spaces, proxies, agents, defaults))
    .catch((error) => { view.innerHTML = `<p class="form-error">${esc(error.message)}</p>`; });
}

// SearchCreate's defaults the form shows, from the server's OpenAPI document.
export async function requestDefaults() {
  const response = await fetch("/openapi.json", { headers: { accept: "application/json" } });
  if (!response.ok) throw new Error(`the API's schema: ${response.status} ${response.statusText}`);
  const schemas = (await response.json()).components.schemas;
  const field = (schema, path) => path.split(".").reduce((node, key) => {
    const property = node.properties[key];
    return property.$ref ? schemas[property.$ref.split("/").pop()] : property;
  }, schemas[schema]);
  const strategy = field("SearchCreate", "strategy");
  return {
    strategy: strategy.default,
    // layer_scaled is a baseline's strategy: POST /baselines (hwnas baseline) starts those.
    strategies: strategy.enum.filter((s) => s !== "layer_scaled"),
    device_class: field("SearchCreate", "device_class").default,
    budget: field("SearchCreate", "budget.max_evaluations").default,
    seq_len: field("SearchCreate", "measurement.seq_len").default,
    seed: field("SearchCreate", "seed").default,
  };
}

function render(view, spaces, proxies, agents, defaults) {
  const classes = [...new Set(agents.map((a) => a.device_class))];
  const options = (values, selected) =>
    values.map((v) => `<option ${v === selected ? "selected" : ""}>${esc(v)}</option>`).join("");
  view.innerHTML = `<h1>New search</h1>
    <form class="new" id="new-search" novalidate>
      <label for="f-name">name</label><input id="f-name" name="name" placeholder="pi5 small">
      <label for="f-device_class">device class</label>
      <input id="f-device_class" name="device_class" list="device-classes" value="${esc(classes[0] || defaults.device_class)}">
      <datalist id="device-classes">${options(classes)}</datalist>
      <label for="f-kind">space kind</label>
      <select id="f-kind" name="space.kind">${options(spaces.map((s) => s.name), "gpt2")}</select>
      <label for="f-strategy">strategy</label>
      <select id="f-strategy" name="strategy">${options(defaults.strategies, defaults.strategy)}</select>
      <label for="f-proxy">proxy objective</label><select id="f-proxy" name="proxy"></select>
      <label>measured objectives</label>
      <span><label><input type="checkbox" name="latency_ms" checked> latency</label>
            <label><input type="checkbox" name="memory_mb" checked> peak memory</label></span>
      <label for="f-budget">budget (measurements)</label>
      <input id="f-budget" name="budget.max_evaluations" type="number" value="${defaults.budget}">
      <label for="f-max_latency_ms">max latency ms</label>
      <input id="f-max_latency_ms" name="constraints.max_latency_ms" type="number" step="any">
      <label for="f-max_memory_mb">max memory MB</label>
      <input id="f-max_memory_mb" name="constraints.max_memory_mb" type="number" step="any">
      <label for="f-seq_len">sequence length</label>
      <input id="f-seq_len" name="measurement.seq_len" type="number" value="${defaults.seq_len}">
      <label for="f-seed">seed</label><input id="f-seed" name="seed" type="number" value="${defaults.seed}">
      <label class="wide" for="f-extra">more settings as JSON, merged over the fields above
        (e.g. {"space": {"n_layer": {"min": 2, "max": 8}}})</label>
      <textarea id="f-extra" name="extra" placeholder="{}"></textarea>
      <label for="f-token">user token</label>
      <input id="f-token" type="password" autocomplete="off" value="${esc(savedToken())}"
        placeholder="hwnas_u_... (hwnas token create --kind user); kept in this browser">
      <div class="form-error" id="form-error" role="alert"></div>
      <button type="submit" class="wide">Start search</button>
    </form>`;
  const form = view.querySelector("form");
  const kind = form.querySelector("#f-kind");
  const fillProxies = () => {
    const usable = proxies.filter((p) => !p.kinds || p.kinds.includes(kind.value));
    form.querySelector("#f-proxy").innerHTML = options(usable.map((p) => p.name), "decoder_params");
  };
  kind.addEventListener("change", fillProxies);
  fillProxies();
  form.addEventListener("submit", (event) => {
    event.preventDefault();
    submit(form);
  });
  view.dataset.ready = "1";
}

function request(form) {
  const body = {};
  const set = (path, value) => {
    const keys = path.split(".");
    let node = body;
    for (const key of keys.slice(0, -1)) node = node[key] = node[key] || {};
    node[keys[keys.length - 1]] = value;
  };
  for (const input of form.querySelectorAll("input[name*='.'], input[name=name], input[name=device_class], input[name=seed], select[name]")) {
    if (input.name === "proxy" || input.value === "") continue;
    set(input.name, input.type === "number" ? Number(input.value) : input.value);
  }
  const measured = ["latency_ms", "memory_mb"].filter((o) => form.querySelector(`input[name=${o}]`).checked);
  body.objectives = [form.querySelector("#f-proxy").value, ...measured];
  const extra = form.querySelector("#f-extra").value.trim();
  return extra ? merge(body, JSON.parse(extra)) : body;
}

function merge(base, extra) {
  for (const [key, value] of Object.entries(extra)) {
    const both = value && typeof value === "object" && !Array.isArray(value) && typeof base[key] === "object";
    base[key] = both ? merge({ ...base[key] }, value) : value;
  }
  return base;
}

async function submit(form) {
  const error = form.querySelector("#form-error");
  for (const marked of form.querySelectorAll(".invalid")) marked.classList.remove("invalid");
  error.textContent = "";
  let body;
  try {
    body = request(form);
  } catch (exc) {
    error.textContent = `extra settings: not valid JSON (${exc.message})`;
    form.querySelector("#f-extra").classList.add("invalid");
    return;
  }
  saveToken(form.querySelector("#f-token").value.trim());
  try {
    const search = await api("/searches", { json: body });
    location.hash = `#/search/${search.id}`;
  } catch (exc) {
    error.textContent = exc.field ? `${exc.field}: ${exc.message}` : exc.message;
    error.dataset.field = exc.field || "";
    const input = exc.field && (form.querySelector(`[name="${exc.field}"]`)
      || form.querySelector(`[name$=".${exc.field.split(".").pop()}"]`));
    const target = exc.status === 401 || exc.status === 403 ? "#f-token" : "#f-extra";
    (input || form.querySelector(target)).classList.add("invalid");
  }
}
