"""Authorization: Kafka's StandardAuthorizer semantics on the embedded cluster.

* ``AclStore`` (``_store``): the bindings, kept in the controller's metadata;
* ``Authorizer`` (``_authorizer``): the decision rules, ``super.users`` and
  ``allow.everyone.if.no.acl.found``, with a cache per decision;
* ``_context``: the caller of a request (principal, host) and the check helpers;
* ``_gate``: what every API needs, checked around its handler (the table and the
  topic policies); its building blocks in ``_gate_base``, the group policies in
  ``_gate_groups``, the transaction/config/SCRAM ones in ``_gate_admin``.

The authorizer is on when the broker config ``authorizer.class.name`` is set
(any non-empty value turns on this built-in one, as Kafka would load the class it
names); unset, no check is made and nothing is paid.
"""

from kaflite.cluster.acl._authorizer import Authorizer, enabled
from kaflite.cluster.acl._context import (
    NOT_REQUESTED,
    SUPPORTED_OPERATIONS,
    allows,
    allows_any,
    allows_cluster,
    authorized_operations,
    inter_broker,
    is_inter_broker,
)
from kaflite.cluster.acl._gate import Gate, check, fetch_denied
from kaflite.cluster.acl._store import AclStore

__all__ = ["NOT_REQUESTED", "SUPPORTED_OPERATIONS", "AclStore", "Authorizer", "Gate", "allows",
           "allows_any", "allows_cluster", "authorized_operations", "check", "enabled",
           "fetch_denied", "inter_broker", "is_inter_broker"]
