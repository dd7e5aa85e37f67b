"""The fault-injection and observation routes (``kaflite chaos``, ``kaflite connections``,
Prometheus), as ``cluster/http.py`` served them: same paths, bodies and answers.

Faults (POST, JSON body; every rule comes back with its ``id``):

==================================  ================================================
/faults/error                       {api, error, count=1, topic, partition, group,
                                    client_id, broker, level}
/faults/delay                       {api, ms, count=null, topic, group, client_id, broker}
/faults/throttle                    {ms, api, count=null, client_id, broker}
/faults/drop                        {api, count=1, ...}: drop the next requests (api "*":
                                    of every API); without ``api``: close matching
                                    connections now
/faults/deny-topic                  {topic, client_id}
/faults/clear                       {id}: remove one rule; without: remove all
/brokers/<id>/stop|kill|restart
/brokers/<id>/isolate               {isolated=true}
/leaders/move                       {topic, partition, to}
/coordinators/move                  {key, to, type="group"|"transaction"}
/groups/<group>/forget              {member_id}
/groups/<group>/bump-epoch          a consumer group's epoch (STALE_MEMBER_EPOCH)
/groups/<group>/fence-member        {member_id}: its epoch ahead (FENCED_MEMBER_EPOCH)
/records/delete                     {topic, partition, offset=-1}
/cluster/replace                    {retire="stop"|"hang"}: a new cluster behind the
                                    bootstrap address (``kaflite up --front-port``);
                                    the console restarts on the new one, same port
==================================  ================================================

``DELETE /faults`` and ``DELETE /faults/<id>`` remove rules too.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import TypeAlias

from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from kaflite.cluster.cluster import Cluster
from kaflite.cluster.rules import rule_from_body
from kaflite.console.backend import NotAvailable
from kaflite.console.embedded import EmbeddedBackend, cluster_view
from kaflite.console.web import ApiError, JsonBody, answer, backend_of, body_of

__all__ = ["chaos_routes"]

Handler: TypeAlias = Callable[[Cluster, Request, JsonBody], Awaitable[object]]


def _cluster(request: Request) -> Cluster:
    cluster = backend_of(request).cluster_object
    if cluster is None:
        raise NotAvailable("chaos (fault injection)")
    return cluster


def _oint(body: JsonBody, name: str) -> int | None:
    value = body.get(name)
    return None if value is None else int(str(value))


def _str(body: JsonBody, name: str) -> str:
    if body.get(name) is None:
        raise ApiError(400, f"{name} is required")
    return str(body[name])


def _opt(body: JsonBody, name: str) -> str | None:
    value = body.get(name)
    return None if value is None else str(value)


def _int(value: object) -> int:
    return int(str(value))


def _rule(kind: str) -> Handler:
    async def add(c: Cluster, r: Request, body: JsonBody) -> object:
        try:
            rule = rule_from_body(kind, body)
        except ValueError as exc:
            raise ApiError(400, str(exc)) from None
        return c.faults.add(rule).to_dict()
    return add


async def _drop(c: Cluster, r: Request, body: JsonBody) -> object:
    if body.get("api") is None:
        return {"dropped": await c.faults.drop_connections_async(
            broker=_oint(body, "broker"), client_id=_opt(body, "client_id"))}
    return await _rule("drop")(c, r, body)


async def _deny(c: Cluster, r: Request, body: JsonBody) -> object:
    return c.faults.deny_topic(_str(body, "topic"), _opt(body, "client_id")).to_dict()


def _clear(c: Cluster, rule_id: str | None) -> object:
    if rule_id is None:
        return {"removed": c.faults.clear()}
    if not c.faults.remove(_int(rule_id)):
        raise ApiError(404, f"no rule {rule_id}")
    return {"removed": 1}


async def _clear_post(c: Cluster, r: Request, body: JsonBody) -> object:
    return _clear(c, _opt(body, "id"))


async def _broker(c: Cluster, r: Request, body: JsonBody) -> object:
    node_id, action = _int(r.path_params["broker"]), r.path_params["action"]
    if action == "stop":
        await c.faults.stop_broker_async(node_id)
    elif action == "kill":
        await c.faults.kill_broker_async(node_id)
    elif action == "restart":
        await c.faults.restart_broker_async(node_id)
    else:
        raise ApiError(404, f"no route POST /brokers/{node_id}/{action}")
    return {"broker": node_id, "action": action, "running": c.broker_running(node_id)}


async def _isolate(c: Cluster, r: Request, body: JsonBody) -> object:
    node_id = _int(r.path_params["broker"])
    isolated = bool(body.get("isolated", True))
    await c.faults.isolate_replication_async(node_id, isolated)
    return {"broker": node_id, "isolated": isolated}


async def _move_leader(c: Cluster, r: Request, body: JsonBody) -> object:
    to = body.get("to")
    topic, partition = _str(body, "topic"), _int(_str(body, "partition"))
    leader = c.faults.move_leader(topic, partition, None if to is None else _int(to))
    return {"topic": topic, "partition": partition, "leader": leader}


async def _move_coordinator(c: Cluster, r: Request, body: JsonBody) -> object:
    to = body.get("to")
    key = str(body.get("key") or _str(body, "group"))
    key_type = str(body.get("type", "group"))
    leader = c.faults.move_coordinator(key, None if to is None else _int(to), key_type)
    topic, index, _ = c.faults.coordinator_of(key, key_type)
    return {"key": key, "topic": topic, "partition": index, "coordinator": leader}


async def _forget(c: Cluster, r: Request, body: JsonBody) -> object:
    group, member = r.path_params["group"], _str(body, "member_id")
    if not await c.faults.forget_member_async(group, member):
        raise ApiError(409, f"the coordinator of {group!r} did not forget {member!r} "
                            "(no group service or no such member)")
    return {"group": group, "member_id": member, "forgotten": True}


async def _bump_epoch(c: Cluster, r: Request, body: JsonBody) -> object:
    group = r.path_params["group"]
    return {"group": group, "members_moved": c.faults.bump_group_epoch(group)}


async def _fence_member(c: Cluster, r: Request, body: JsonBody) -> object:
    group, member = r.path_params["group"], _str(body, "member_id")
    if not c.faults.fence_member_epoch(group, member):
        raise ApiError(409, f"consumer group {group!r} has no member {member!r}")
    return {"group": group, "member_id": member, "fenced": True}


async def _delete_records(c: Cluster, r: Request, body: JsonBody) -> object:
    topic, partition = _str(body, "topic"), _int(_str(body, "partition"))
    start = await c.faults.delete_records_async(topic, partition,
                                                _int(body.get("offset", -1)))
    return {"topic": topic, "partition": partition, "log_start_offset": start}


def _post(handler: Handler) -> Callable[[Request], Awaitable[Response]]:
    async def endpoint(request: Request) -> Response:
        cluster = _cluster(request)
        return answer(await handler(cluster, request, await body_of(request)))
    endpoint.__doc__ = handler.__doc__
    return endpoint


async def get_connections(request: Request) -> Response:
    q = request.query_params
    broker = q.get("broker")
    return answer(await backend_of(request).connections(
        include_replicas=q.get("replicas", "") in ("1", "true"),
        client_id=q.get("client_id"), broker=int(broker) if broker else None,
        include_closed=q.get("closed", "") in ("1", "true")))


async def get_clients(request: Request) -> Response:
    return answer(await backend_of(request).clients())


async def get_cluster(request: Request) -> Response:
    return answer(cluster_view(_cluster(request)))


async def get_faults(request: Request) -> Response:
    return answer([r.to_dict() for r in _cluster(request).faults.rules()])


async def get_metrics(request: Request) -> Response:
    from kaflite.cluster.metrics import CONTENT_TYPE, render

    _cluster(request)
    console = request.app.state.console
    await console.collector.refresh()
    return Response(render(console.metrics_registry), media_type=CONTENT_TYPE)


async def post_replace(request: Request) -> Response:
    backend = backend_of(request)
    hook = backend.replace_cluster if isinstance(backend, EmbeddedBackend) else None
    if hook is None:
        raise ApiError(501, "cluster replacement needs a bootstrap address in front of the "
                            "cluster: kaflite up --front-port PORT")
    body = await body_of(request)
    return answer(await hook(str(body.get("retire") or "stop")))


async def delete_faults(request: Request) -> Response:
    rule_id = request.path_params.get("rule")
    return answer(_clear(_cluster(request), None if rule_id is None else str(rule_id)))


def chaos_routes() -> list[Route]:
    posts: list[tuple[str, Handler]] = [
        ("/faults/error", _rule("error")), ("/faults/delay", _rule("delay")),
        ("/faults/throttle", _rule("throttle")),
        ("/faults/drop", _drop), ("/faults/deny-topic", _deny), ("/faults/clear", _clear_post),
        ("/brokers/{broker:int}/isolate", _isolate),
        ("/brokers/{broker:int}/{action}", _broker),
        ("/leaders/move", _move_leader), ("/coordinators/move", _move_coordinator),
        ("/groups/{group}/forget", _forget), ("/groups/{group}/bump-epoch", _bump_epoch),
        ("/groups/{group}/fence-member", _fence_member),
        ("/records/delete", _delete_records)]
    return [
        Route("/connections", get_connections), Route("/clients", get_clients),
        Route("/cluster", get_cluster), Route("/faults", get_faults),
        Route("/metrics", get_metrics),
        Route("/faults", delete_faults, methods=["DELETE"]),
        Route("/faults/{rule}", delete_faults, methods=["DELETE"]),
        Route("/cluster/replace", post_replace, methods=["POST"]),
        *(Route(path, _post(handler), methods=["POST"]) for path, handler in posts),
    ]
