"""The web dashboard: static pages that read the REST API, served by the server itself.

No build step and no CDN (machines may be offline): the page is plain HTML and ES modules
in server/dashboard/, and plotly.js is the copy inside the `plotly` Python package.
"""

from __future__ import annotations

import importlib.util
from functools import cache
from pathlib import Path

from fastapi import APIRouter
from fastapi.responses import FileResponse, RedirectResponse

from server.errors import NotFound

HERE = Path(__file__).resolve().parents[1] / "dashboard"
# The files the page may load, by name; nothing else under the folder is served.
ASSETS = {p.name: p for p in HERE.iterdir() if p.suffix in (".js", ".css")}
MEDIA = {".js": "text/javascript", ".css": "text/css"}

router = APIRouter(include_in_schema=False)


@cache
def plotly_js() -> Path:
    """plotly.min.js from the installed `plotly` package, found without importing it."""
    spec = importlib.util.find_spec("plotly")
    if spec is None or not spec.submodule_search_locations:
        raise NotFound("asset", "plotly.min.js: pip install 'hwnas[server]'")
    for folder in spec.submodule_search_locations:
        path = Path(folder) / "package_data" / "plotly.min.js"
        if path.is_file():
            return path
    raise NotFound("asset", "plotly.min.js (the installed plotly package lacks it)")


@router.get("/")
def root() -> RedirectResponse:
    return RedirectResponse("/dashboard/")


@router.get("/dashboard/")
def page() -> FileResponse:
    return FileResponse(HERE / "index.html", media_type="text/html")


@router.get("/dashboard/assets/{name}")
def asset(name: str) -> FileResponse:
    if name == "plotly.min.js":
        # Versioned by the installed package; a day's caching spares reloading 4.8 MB.
        return FileResponse(
            plotly_js(), media_type=MEDIA[".js"], headers={"Cache-Control": "max-age=86400"}
        )
    path = ASSETS.get(name)
    if path is None:
        raise NotFound("asset", name)
    return FileResponse(path, media_type=MEDIA[path.suffix], headers={"Cache-Control": "no-cache"})
