"""The CLI's client for the cluster's HTTP API (``kaflite up --http-port``)."""

from __future__ import annotations

import json
import urllib.error
import urllib.request
from typing import Any

import typer

__all__ = ["request"]


def request(base: str, method: str, path: str, body: dict[str, Any] | None = None) -> Any:
    """Call the API; print its error and exit 1 on failure."""
    data = None
    if body is not None:
        data = json.dumps({k: v for k, v in body.items() if v is not None}).encode()
    headers = {"Content-Type": "application/json"}
    if method != "GET":
        from kaflite.cli._state import find_token

        token = find_token(base)
        if token is not None:
            headers["X-Kaflite-Token"] = token
    req = urllib.request.Request(base.rstrip("/") + path, data=data, method=method,
                                 headers=headers)
    try:
        with urllib.request.urlopen(req, timeout=60) as resp:
            return json.loads(resp.read() or b"null")
    except urllib.error.HTTPError as exc:
        try:
            message = json.loads(exc.read()).get("error", exc.reason)
        except ValueError:
            message = exc.reason
        typer.echo(f"error ({exc.code}): {message}", err=True)
        if exc.code == 401:
            typer.echo("(the console token: kaflite up prints it and writes it to its state "
                       "file; KAFLITE_TOKEN gives it)", err=True)
        raise typer.Exit(1) from None
    except (urllib.error.URLError, OSError) as exc:
        typer.echo(f"cannot reach the kaflite HTTP API at {base}: {exc}\n"
                   "(is a cluster running? `kaflite up` starts one; --http URL or KAFLITE_HTTP "
                   "says where its API is)", err=True)
        raise typer.Exit(1) from None
