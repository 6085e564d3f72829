// #/agents : every registered agent: device, last seen, jobs done, failures. A machine's
// agent registers anew each time it starts: registrations with the same name, device class
// and fingerprint are one row, the latest, with how many there were.
import { ago, api, esc } from "./api.js";
import { poll } from "./app.js";

export function mount(view) {
  view.innerHTML = `<h1>Agents</h1><div id="agents"></div>`;
  return poll(async () => {
    render(view.querySelector("#agents"), await api("/agents"));
    view.dataset.ready = "1";
    return true;
  }, 5);
}

function render(box, agents) {
  if (!agents.length) {
    box.innerHTML = `<p class="empty">No agent has registered. On a device:
      <code>hwnas agent --server ${esc(location.origin)} --device-class NAME</code></p>`;
    return;
  }
  const rows = machines(agents).map(({ latest: a, earlier }) => {
    const fp = a.fingerprint;
    const online = a.online; // seen within the server's lease period
    const device = [fp.cpu_model, fp.accelerator].filter(Boolean).join(" + ");
    const restarts = earlier.length
      ? `<span class="registrations" title="earlier registrations: ${esc(earlier.map((e) => `${e.agent_id} (${e.jobs_done} jobs, ${e.failures} failures)`).join(", "))}">${earlier.length + 1} registrations</span>`
      : "";
    return `<tr data-agent="${esc(a.agent_id)}" data-earlier="${esc(earlier.map((e) => e.agent_id).join(" "))}">
      <td class="text">${esc(a.name || a.agent_id)}${restarts}</td>
      <td class="text">${esc(a.device_class)}</td>
      <td class="text">${esc(device)}</td>
      <td class="text">${esc(fp.machine)} / ${fp.cores} cores / ${(fp.ram_bytes / 2 ** 30).toFixed(1)} GiB</td>
      <td class="text">${esc((fp.runtimes || []).join(", "))}</td>
      <td class="text ${online ? "status-finished" : "status-cancelled"}">${online ? "online" : "offline"}</td>
      <td class="text" title="${esc(a.last_seen_at)}">${ago(a.last_seen_at)}</td>
      <td>${a.jobs_done}</td>
      <td>${a.failures}</td>
    </tr>`;
  });
  box.innerHTML = `<table id="agents-table"><thead><tr>
    <th class="text">agent</th><th class="text">device class</th><th class="text">device</th>
    <th class="text">machine</th><th class="text">runtimes</th><th class="text">state</th>
    <th class="text">last seen</th><th>jobs done</th><th>failures</th>
    </tr></thead><tbody>${rows.join("")}</tbody></table>`;
}

// One entry per machine (name, device class, fingerprint), in the order of its latest
// registration: {latest, earlier: the older registrations, oldest first}.
function machines(agents) {
  const groups = new Map();
  const byTime = agents.slice().sort((a, b) => Date.parse(a.registered_at) - Date.parse(b.registered_at));
  for (const agent of byTime) {
    const key = JSON.stringify([agent.name, agent.device_class, canonical(agent.fingerprint)]);
    const group = groups.get(key);
    if (group) group.earlier.push(group.latest);
    // Re-inserted: the map's order is that of each machine's latest registration.
    groups.delete(key);
    groups.set(key, { latest: agent, earlier: group ? group.earlier : [] });
  }
  return [...groups.values()];
}

// The fingerprint with its keys in one order, so that equal fingerprints compare equal.
const canonical = (value) => (value && typeof value === "object" && !Array.isArray(value)
  ? Object.keys(value).sort().map((k) => [k, canonical(value[k])])
  : value);
