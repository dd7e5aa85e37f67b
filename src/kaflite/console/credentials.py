"""The cluster's credentials, for the console of a kaflite cluster with SASL.

Two uses:

* ``ClusterCredentials`` checks a user and password (HTTP Basic on a state-changing
  request) against the cluster's own credential store, the one its SASL listeners use
  (``BrokerCredentials``: SCRAM credentials from the controller, PLAIN users from the
  listener's JAAS config, ``sasl.users``). A PLAIN password is compared in constant time;
  a SCRAM one is salted with the stored salt and iterations and its StoredKey compared,
  as the SCRAM exchange itself proves it. With an authorizer on
  (``authorizer.class.name``) only ``super.users`` are accepted: the console acts with
  its own clients, so it cannot apply a lesser user's ACLs.
* ``client_security`` gives the console's own clients what they need to connect when
  the cluster's first listener (its bootstrap) needs SASL: that listener's enabled
  mechanism (PLAIN first) and the user the cluster's configuration names for it (its
  JAAS ``username``/``password``, else the first of ``sasl.users``), as the brokers
  connect to each other.
"""

from __future__ import annotations

import asyncio
import base64
import binascii
import hmac
from typing import TYPE_CHECKING

from kaflite.cluster.auth import (
    BrokerCredentials,
    config_users,
    enabled_mechanisms,
    jaas_config,
)
from kaflite.security.scram import ScramCredential, salted_credential, salted_password

if TYPE_CHECKING:
    from kaflite.cluster.cluster import Cluster
    from kaflite.cluster.listeners import ListenerSpec

__all__ = ["ClusterCredentials", "basic_credentials", "client_security"]

SCRAMS = ("SCRAM-SHA-512", "SCRAM-SHA-256")


def basic_credentials(header: str) -> tuple[str, str] | None:
    """(user, password) of an ``Authorization: Basic ...`` header, None for another."""
    scheme, _, value = header.partition(" ")
    if scheme.lower() != "basic" or not value.strip():
        return None
    try:
        text = base64.b64decode(value.strip(), validate=True).decode("utf-8")
    except (binascii.Error, UnicodeDecodeError):
        return None
    user, sep, password = text.partition(":")
    return (user, password) if sep and user else None


def _sasl_listener(cluster: Cluster) -> ListenerSpec | None:
    return next((s for s in cluster.listeners if s.sasl), None)


def _scram_matches(credential: ScramCredential, password: str) -> bool:
    salted = salted_password(credential.mechanism, password, credential.salt,
                             credential.iterations)
    derived = salted_credential(credential.mechanism, credential.salt, salted,
                                credential.iterations)
    return hmac.compare_digest(derived.stored_key, credential.stored_key)


class ClusterCredentials:
    """``await check(user, password)``: whether the cluster would let that user in (and,
    with an authorizer, whether it is a super user)."""

    def __init__(self, cluster: Cluster, listener: ListenerSpec) -> None:
        props = cluster.config.props
        self.store = BrokerCredentials(cluster.controller, props, listener.name)
        self.mechanisms = enabled_mechanisms(props, listener.name)
        self.super_users: frozenset[str] | None = None
        if props.get("authorizer.class.name"):
            self.super_users = frozenset(p.strip() for p in
                                         props.get("super.users", "").split(";") if p.strip())

    @classmethod
    def of(cls, cluster: Cluster) -> ClusterCredentials | None:
        """The checker for ``cluster``'s first SASL listener; None without one."""
        listener = _sasl_listener(cluster)
        return cls(cluster, listener) if listener is not None else None

    async def __call__(self, user: str, password: str) -> bool:
        if self.super_users is not None and f"User:{user}" not in self.super_users:
            return False
        if "PLAIN" in self.mechanisms:
            stored = self.store.plain(user)
            if stored is not None:
                return hmac.compare_digest(stored.encode(), password.encode())
        for mechanism in SCRAMS:
            if mechanism in self.mechanisms:
                credential = self.store.scram(user, mechanism)
                if credential is not None:       # PBKDF2: off the event loop
                    return await asyncio.to_thread(_scram_matches, credential, password)
        return False


def client_security(cluster: Cluster) -> dict[str, object]:
    """Client properties for the cluster's first listener: none for PLAINTEXT; for SASL
    the mechanism and the user the configuration names (``{}`` when it names none)."""
    first = cluster.listeners[0] if cluster.listeners else None
    if first is None or not first.sasl:
        return {}
    props = cluster.config.props
    enabled = enabled_mechanisms(props, first.name)
    mechanism = next((m for m in ("PLAIN", *SCRAMS) if m in enabled), None)
    if mechanism is None:
        return {"security.protocol": first.security_protocol}
    options = jaas_config(props, first.name, mechanism)
    user, password = options.get("username"), options.get("password")
    if user is None or password is None:
        user, password = next(iter(config_users(props).items()), (None, None))
    out: dict[str, object] = {"security.protocol": first.security_protocol,
                              "sasl.mechanism": mechanism}
    if user is not None and password is not None:
        out |= {"sasl.username": user, "sasl.password": password}
    return out
