// #/ : every search, with status and progress, refreshed while any is running.
import { api, esc, fmt, progressBar } from "./api.js";
import { poll } from "./app.js";

export function mount(view) {
  view.innerHTML = `<h1>Searches</h1><div id="searches"></div>`;
  return poll(async () => {
    const searches = await api("/searches");
    render(view.querySelector("#searches"), searches);
    view.dataset.ready = "1";
    return true;
  }, 3);
}

function render(box, searches) {
  if (!searches.length) {
    box.innerHTML = `<p class="empty">No searches yet. <a href="#/new">Start one.</a></p>`;
    return;
  }
  const rows = searches
    .slice()
    .reverse()
    .map((s) => {
      const p = s.progress;
      const hv = p.hypervolume === null ? "" : p.hypervolume.toFixed(4);
      return `<tr data-search="${s.id}">
        <td>${s.id}</td>
        <td class="text"><a href="#/search/${s.id}">${esc(s.name || `search ${s.id}`)}</a></td>
        <td class="text">${esc(s.device_class)}</td>
        <td class="text">${esc(s.request.space.kind || "gpt2")}</td>
        <td class="text">${esc(s.request.strategy)}</td>
        <td class="text status-${s.status}">${s.status}</td>
        <td class="text">${progressBar(p.measured + p.failed, p.budget)}</td>
        <td>${s.frontier_size}</td>
        <td>${hv}</td>
        <td class="text">${esc(new Date(s.created_at).toLocaleString())}</td>
      </tr>`;
    });
  box.innerHTML = `<table id="searches-table"><thead><tr>
    <th>id</th><th class="text">name</th><th class="text">device class</th><th class="text">space</th>
    <th class="text">strategy</th><th class="text">status</th><th class="text">measured</th>
    <th>frontier</th><th>hypervolume</th><th class="text">started</th>
    </tr></thead><tbody>${rows.join("")}</tbody></table>`;
}
