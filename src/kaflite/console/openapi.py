"""``/openapi.json`` (OpenAPI 3.1, from the routes themselves) and ``/docs``, a small
page that lists it without any network access beyond this server."""

from __future__ import annotations

import re

from starlette.requests import Request
from starlette.responses import HTMLResponse, Response
from starlette.routing import BaseRoute, Route

from kaflite.console.web import Json, answer

__all__ = ["openapi_routes", "schema"]

_PARAM = re.compile(r"{(\w+)(?::\w+)?}")


def schema(routes: list[BaseRoute], version: str) -> Json:
    paths: dict[str, dict[str, object]] = {}
    for route in routes:
        if not isinstance(route, Route) or not route.include_in_schema:
            continue
        path = _PARAM.sub(r"{\1}", route.path)
        doc = (route.endpoint.__doc__ or route.name or "").strip()
        summary = " ".join(doc.split()) if doc else route.name
        params = [{"name": n, "in": "path", "required": True,
                   "schema": {"type": "integer" if f"{{{n}:int}}" in route.path
                              else "string"}} for n in _PARAM.findall(route.path)]
        for method in sorted((route.methods or set()) - {"HEAD"}):
            op: dict[str, object] = {"summary": summary, "operationId": f"{method.lower()}_"
                                     f"{route.name}_{len(paths)}",
                                     "parameters": params,
                                     "responses": {"200": {"description": "JSON"}}}
            if method not in ("GET", "HEAD"):
                op["security"] = [{"token": []}, {"header": []}]
                op["responses"] = {"200": {"description": "JSON"},
                                   "400": {"description": "bad input; nothing changed"},
                                   "401": {"description": "no or wrong console token"}}
            paths.setdefault(path, {})[method.lower()] = op
    return {"openapi": "3.1.0",
            "info": {"title": "kaflite console API", "version": version,
                     "description": "The kaflite console's JSON API (docs/console.md)."},
            "components": {"securitySchemes": {
                "token": {"type": "http", "scheme": "bearer"},
                "header": {"type": "apiKey", "in": "header", "name": "X-Kaflite-Token"}}},
            "paths": paths}


DOCS_PAGE = """<!doctype html>
<html lang="en"><head><meta charset="utf-8"><title>kaflite console API</title>
<style>
:root{color-scheme:light dark}
body{font:14px/1.4 system-ui,sans-serif;margin:2em;max-width:70em}
table{border-collapse:collapse;width:100%}td,th{border-bottom:1px solid #8886;padding:4px 8px;
text-align:left;vertical-align:top}code{font:13px ui-monospace,monospace}
.m{font-weight:bold;text-transform:uppercase}.lock{color:#a60}
</style></head><body>
<h1>kaflite console API</h1>
<p>The schema: <a href="/openapi.json">/openapi.json</a>. Methods marked &#128274; change
state and need the console token (<code>Authorization: Bearer TOKEN</code> or
<code>X-Kaflite-Token</code>).</p>
<table id="routes"><thead><tr><th>method</th><th>path</th><th>what</th></tr></thead>
<tbody></tbody></table>
<script>
fetch('/openapi.json').then(r => r.json()).then(s => {
  const body = document.querySelector('#routes tbody');
  for (const [path, ops] of Object.entries(s.paths)) {
    for (const [method, op] of Object.entries(ops)) {
      const tr = document.createElement('tr');
      const cells = [method + (op.security ? ' \\u{1F512}' : ''), path, op.summary || ''];
      cells.forEach((text, i) => {
        const td = document.createElement('td');
        if (i === 0) td.className = 'm'; if (i === 1) td.innerHTML = '<code></code>';
        (i === 1 ? td.firstChild : td).textContent = text;
        tr.appendChild(td);
      });
      body.appendChild(tr);
    }
  }
});
</script></body></html>
"""


async def openapi_json(request: Request) -> Response:
    return answer(schema(request.app.routes, request.app.state.console.version))


async def docs(request: Request) -> Response:
    return HTMLResponse(DOCS_PAGE)


def openapi_routes() -> list[Route]:
    return [Route("/openapi.json", openapi_json, include_in_schema=False),
            Route("/docs", docs, include_in_schema=False)]
