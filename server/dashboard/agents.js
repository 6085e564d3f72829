// #/agents : every registered agent: device, last seen, jobs done, failures.
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
  const rows = agents.map((a) => {
    const fp = a.fingerprint;
    const online = a.online; // seen within the server's lease period
    const device = [fp.cpu_model, fp.accelerator].filter(Boolean).join(" + ");
    return `<tr data-agent="${esc(a.agent_id)}">
      <td class="text">${esc(a.name || a.agent_id)}</td>
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
