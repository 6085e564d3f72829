// The page's router: #/ searches, #/search/ID, #/agents, #/new. Each page's mount() returns
// a function that stops its timers when the user leaves it.
import * as searches from "./searches.js";
import * as search from "./search.js";
import * as agents from "./agents.js";
import * as form from "./form.js";

const ROUTES = [
  [/^#?\/?$/, "searches", searches],
  [/^#\/search\/(\d+)$/, "search", search],
  [/^#\/agents$/, "agents", agents],
  [/^#\/new$/, "new", form],
];

let unmount = () => {};

function route() {
  unmount();
  const hash = location.hash || "#/";
  const view = document.getElementById("view");
  view.innerHTML = "";
  view.removeAttribute("data-ready");
  const match = ROUTES.find(([pattern]) => pattern.test(hash));
  const [pattern, name, page] = match || ROUTES[0];
  document.body.dataset.page = name;
  for (const a of document.querySelectorAll("nav a")) {
    a.classList.toggle("active", a.dataset.nav === (name === "search" ? "searches" : name));
  }
  unmount = page.mount(view, (hash.match(pattern) || []).slice(1)) || (() => {});
}

export function showError(error) {
  const box = document.getElementById("error");
  box.textContent = error ? String(error.message || error) : "";
  box.hidden = !error;
}

export function markLive() {
  document.getElementById("live").textContent = `updated ${new Date().toLocaleTimeString()}`;
}

// Polls `step` every `seconds` while it returns true; errors are shown and polling goes on.
export function poll(step, seconds) {
  let timer = null, stopped = false;
  const tick = async () => {
    let again = true;
    try {
      again = await step();
      showError(null);
      markLive();
    } catch (error) {
      showError(error);
    }
    if (!stopped && again !== false) timer = setTimeout(tick, seconds * 1000);
  };
  tick();
  return () => { stopped = true; clearTimeout(timer); };
}

window.addEventListener("hashchange", route);
route();
