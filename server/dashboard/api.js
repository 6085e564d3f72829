// The REST API, as the page uses it, and small formatting helpers.

export class ApiError extends Error {
  constructor(status, message, field) {
    super(message);
    this.status = status;
    this.field = field;
  }
}

// The user token (hwnas token create --kind user), kept in this browser once entered in the
// new-search form; sent with every request, so servers with private reads work too.
const TOKEN_KEY = "hwnas.token";
export const savedToken = () => localStorage.getItem(TOKEN_KEY) || "";
export function saveToken(token) {
  if (token) localStorage.setItem(TOKEN_KEY, token);
  else localStorage.removeItem(TOKEN_KEY);
}

export async function api(path, options = {}) {
  const init = { ...options, headers: { accept: "application/json", ...(options.headers || {}) } };
  const token = savedToken();
  if (token) init.headers.authorization = `Bearer ${token}`;
  if (options.json !== undefined) {
    init.method = init.method || "POST";
    init.body = JSON.stringify(options.json);
    init.headers["content-type"] = "application/json";
  }
  const response = await fetch(`/api/v1${path}`, init);
  const body = await response.json().catch(() => null);
  if (!response.ok) {
    let field = body && body.field;
    if (!field && body && Array.isArray(body.detail) && body.detail.length) {
      field = body.detail[0].loc.filter((p) => p !== "body" && p !== "query").join(".");
    }
    const message = (body && (body.message || body.detail)) || response.statusText;
    throw new ApiError(response.status, typeof message === "string" ? message : JSON.stringify(message), field);
  }
  return body;
}

const ESCAPES = { "&": "&amp;", "<": "&lt;", ">": "&gt;", '"': "&quot;", "'": "&#39;" };
export const esc = (value) => String(value ?? "").replace(/[&<>"']/g, (c) => ESCAPES[c]);

export function fmt(value, digits = 3) {
  if (value === null || value === undefined) return "";
  if (typeof value !== "number") return String(value);
  if (Math.abs(value) >= 1e6) return `${(value / 1e6).toFixed(2)}M`;
  if (Math.abs(value) >= 1e3) return value.toLocaleString("en", { maximumFractionDigits: 0 });
  return Number(value.toPrecision(digits)).toString();
}

export function ago(iso) {
  const seconds = Math.max(0, (Date.now() - Date.parse(iso)) / 1000);
  if (seconds < 90) return `${Math.round(seconds)} s ago`;
  if (seconds < 5400) return `${Math.round(seconds / 60)} min ago`;
  if (seconds < 129600) return `${Math.round(seconds / 3600)} h ago`;
  return `${Math.round(seconds / 86400)} d ago`;
}

export function progressBar(done, total) {
  const share = total ? Math.min(1, done / total) : 0;
  return `<span class="bar"><span style="width:${(100 * share).toFixed(1)}%"></span></span>${done}/${total}`;
}
