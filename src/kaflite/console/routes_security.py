"""Console routes for users (SCRAM credentials), ACLs and client quotas."""

from __future__ import annotations

from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from kaflite.console import security
from kaflite.console.web import answer, backend_of, body_of

__all__ = ["security_routes"]


async def users(request: Request) -> Response:
    """The cluster's SCRAM users, each with its mechanisms and iterations."""
    return answer(await security.list_users(backend_of(request)))


async def upsert_user(request: Request) -> Response:
    """Add a SCRAM user or set its password: {user, password, mechanism, iterations}."""
    return answer(await security.upsert_user(backend_of(request), await body_of(request)),
                  201)


async def delete_user(request: Request) -> Response:
    """Delete a user's SCRAM credentials (?mechanism=: only that one)."""
    return answer(await security.delete_user(backend_of(request), request.path_params["user"],
                                             request.query_params.get("mechanism") or None))


async def acls(request: Request) -> Response:
    """Every ACL binding, or enabled: false when the cluster has no authorizer."""
    return answer(await security.list_acls(backend_of(request)))


async def create_acl(request: Request) -> Response:
    """Create one ACL binding: {resource_type, name, pattern_type, principal, host,
    operation, permission_type}."""
    return answer(await security.create_acl(backend_of(request), await body_of(request)), 201)


async def delete_acl(request: Request) -> Response:
    """Delete one ACL binding, given as create takes it."""
    return answer(await security.delete_acl(backend_of(request), await body_of(request)))


async def quotas(request: Request) -> Response:
    """Every client quota entity (user, client-id, ip; null: the default) and its values."""
    return answer(await security.list_quotas(backend_of(request)))


async def alter_quota(request: Request) -> Response:
    """Set and remove quota keys of one entity: {entity, set: {key: number}, delete: [key]}."""
    return answer(await security.alter_quota(backend_of(request), await body_of(request)))


def security_routes() -> list[Route]:
    return [Route("/api/users", users), Route("/api/users", upsert_user, methods=["POST"]),
            Route("/api/users/{user}", delete_user, methods=["DELETE"]),
            Route("/api/acls", acls), Route("/api/acls", create_acl, methods=["POST"]),
            Route("/api/acls/delete", delete_acl, methods=["POST"]),
            Route("/api/quotas", quotas), Route("/api/quotas", alter_quota, methods=["POST"])]
