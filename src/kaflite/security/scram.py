"""SCRAM-SHA-256 and SCRAM-SHA-512 (RFC 5802, RFC 7677) as Kafka speaks them, sans I/O.

Credentials: ``scram_credential`` salts a password (PBKDF2, at least 4096 iterations as
Kafka requires) into a ``ScramCredential``, the (salt, iterations, StoredKey, ServerKey)
that the broker keeps; the password itself is never stored. ``salted_credential`` builds
one from an already salted password (what AlterUserScramCredentials carries), and
``ScramCredential.to_kafka``/``from_kafka`` read and write Kafka's textual form
(``salt=...,stored_key=...,server_key=...,iterations=...``).

The exchange, three messages each way::

    client-first   n,,n=<user>,r=<client nonce>[,<extensions>]
    server-first   r=<client nonce><server nonce>,s=<salt>,i=<iterations>
    client-final   c=biws,r=<nonce>,p=<proof>
    server-final   v=<server signature>

``ScramClient`` and ``ScramServer`` are the two state machines. Channel binding is not
supported (gs2 flag ``n``, or ``y`` from a client that could bind). Of Kafka's extensions
the server knows ``tokenauth=true`` (KIP-48): the user name is then a delegation token's
id, checked against the credential the store derives from the token
(``CredentialStore.token``), and the session's principal is the token's owner; other
extensions are ignored. Proofs and signatures are compared in
constant time. An unknown user still gets a server-first, with a salt derived from a
per-process secret, and then fails exactly as a wrong password does, so users cannot be
enumerated. Bad input raises only the errors of ``kaflite.security.errors``.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import hmac
import secrets
from dataclasses import dataclass, field
from typing import Protocol

from kaflite.security.errors import IllegalSaslState, SaslAuthenticationFailed

__all__ = ["HASHES", "MAX_ITERATIONS", "MECHANISM_TYPES", "MIN_ITERATIONS",
           "CredentialStore", "PasswordServer", "ScramClient", "ScramCredential", "ScramServer",
           "StaticCredentialStore", "TokenCredential", "salted_credential", "salted_password",
           "scram_credential"]

HASHES = {"SCRAM-SHA-256": "sha256", "SCRAM-SHA-512": "sha512"}
MECHANISM_TYPES = {"SCRAM-SHA-256": 1, "SCRAM-SHA-512": 2}   # ScramMechanism in Kafka's RPCs
MIN_ITERATIONS = 4096          # Kafka refuses fewer (ScramMechanism.minIterations)
MAX_ITERATIONS = 16384         # AlterUserScramCredentials refuses more
CLIENT_MAX_ITERATIONS = 1_000_000   # what a client accepts from a server (as kafka-python)
SALT_BYTES = 32
_FAKE_SALT_KEY = secrets.token_bytes(32)   # salts for unknown users: stable per process


def _hash_name(mechanism: str) -> str:
    try:
        return HASHES[mechanism]
    except KeyError:
        raise ValueError(f"not a SCRAM mechanism: {mechanism!r} "
                         f"(expected one of {', '.join(HASHES)})") from None


def _hmac(hash_name: str, key: bytes, msg: bytes) -> bytes:
    return hmac.new(key, msg, hash_name).digest()


def _xor(a: bytes, b: bytes) -> bytes:
    return bytes(x ^ y for x, y in zip(a, b, strict=True))


def salted_password(mechanism: str, password: str, salt: bytes, iterations: int) -> bytes:
    """RFC 5802's SaltedPassword: Hi(password, salt, i), that is PBKDF2-HMAC."""
    return hashlib.pbkdf2_hmac(_hash_name(mechanism), password.encode(), salt, iterations)


@dataclass(frozen=True)
class ScramCredential:
    """What the broker keeps for one user and mechanism (never the password)."""
    mechanism: str
    salt: bytes
    iterations: int
    stored_key: bytes
    server_key: bytes

    def to_kafka(self) -> str:
        """Kafka's textual form (ScramCredentialUtils.credentialToString)."""
        b64 = base64.b64encode
        return (f"salt={b64(self.salt).decode()},stored_key={b64(self.stored_key).decode()},"
                f"server_key={b64(self.server_key).decode()},iterations={self.iterations}")

    @classmethod
    def from_kafka(cls, mechanism: str, text: str) -> ScramCredential:
        """Parse ``to_kafka``'s form; ``ValueError`` when it is not one."""
        fields = dict(part.split("=", 1) for part in text.split(",") if "=" in part)
        try:
            return cls(mechanism, base64.b64decode(fields["salt"], validate=True),
                       int(fields["iterations"]),
                       base64.b64decode(fields["stored_key"], validate=True),
                       base64.b64decode(fields["server_key"], validate=True))
        except (KeyError, binascii.Error) as exc:
            raise ValueError(f"not a SCRAM credential: {exc}") from None


def salted_credential(mechanism: str, salt: bytes, salted: bytes,
                      iterations: int) -> ScramCredential:
    """The credential for an already salted password (AlterUserScramCredentials' upsertion)."""
    h = _hash_name(mechanism)
    if iterations < MIN_ITERATIONS:
        raise ValueError(f"Iterations {iterations} is less than the minimum "
                         f"{MIN_ITERATIONS} for {mechanism}")
    client_key = _hmac(h, salted, b"Client Key")
    return ScramCredential(mechanism, salt, iterations, hashlib.new(h, client_key).digest(),
                           _hmac(h, salted, b"Server Key"))


def scram_credential(mechanism: str, password: str, iterations: int = 4096,
                     salt: bytes | None = None) -> ScramCredential:
    """Salt ``password`` into a credential (a random 32-byte salt unless one is given)."""
    salt = secrets.token_bytes(SALT_BYTES) if salt is None else salt
    if iterations < MIN_ITERATIONS:     # before the (slow) PBKDF2
        raise ValueError(f"Iterations {iterations} is less than the minimum "
                         f"{MIN_ITERATIONS} for {mechanism}")
    return salted_credential(mechanism, salt,
                             salted_password(mechanism, password, salt, iterations), iterations)


@dataclass(frozen=True)
class TokenCredential:
    """What a delegation token login is checked against, and who it makes the client."""
    credential: ScramCredential
    owner: str              # the owner's name: the session is User:<owner>
    expires_at_ms: int      # the token's expiry timestamp: it caps the session


class CredentialStore(Protocol):
    """Where a server looks users up."""
    def scram(self, user: str, mechanism: str) -> ScramCredential | None: ...
    def plain(self, user: str) -> str | None: ...     # PLAIN passwords from config (JAAS-style)
    def token(self, token_id: str, mechanism: str) -> TokenCredential | None: ...


@dataclass
class StaticCredentialStore:
    """A ``CredentialStore`` held in dicts (config users, tests)."""
    plain_passwords: dict[str, str] = field(default_factory=dict)
    scram_credentials: dict[tuple[str, str], ScramCredential] = field(default_factory=dict)

    def add_user(self, user: str, password: str,
                 mechanisms: tuple[str, ...] = ("PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512"),
                 iterations: int = MIN_ITERATIONS) -> None:
        for mechanism in mechanisms:
            if mechanism == "PLAIN":
                self.plain_passwords[user] = password
            else:
                self.scram_credentials[(user, mechanism)] = scram_credential(
                    mechanism, password, iterations)

    def scram(self, user: str, mechanism: str) -> ScramCredential | None:
        return self.scram_credentials.get((user, mechanism))

    def plain(self, user: str) -> str | None:
        return self.plain_passwords.get(user)

    def token(self, token_id: str, mechanism: str) -> TokenCredential | None:
        return None     # no delegation tokens here


# -- message syntax -------------------------------------------------------------------------

def _decode(message: bytes) -> str:
    try:
        text = message.decode("utf-8")
    except UnicodeDecodeError:
        raise IllegalSaslState("SCRAM message is not valid UTF-8") from None
    if "\x00" in text:
        raise IllegalSaslState("SCRAM message holds a NUL character")
    return text


def _attributes(text: str, what: str) -> list[tuple[str, str]]:
    """``a=1,b=2`` as pairs, in order; every part must be ``<letter>=<value>``."""
    pairs = []
    for part in text.split(","):
        if len(part) < 2 or part[1] != "=" or not part[0].isascii() or not part[0].isalpha():
            raise IllegalSaslState(f"Invalid SCRAM {what}: {part[:1]!r}... is not an attribute")
        pairs.append((part[0], part[2:]))
    return pairs


def _valid_nonce(nonce: str) -> bool:
    return bool(nonce) and all(0x21 <= ord(c) <= 0x7E and c != "," for c in nonce)


def _encode_name(name: str) -> str:
    return name.replace("=", "=3D").replace(",", "=2C")


def _decode_name(name: str) -> str:
    out, i = [], 0
    while i < len(name):
        if name[i] == "=":
            code = name[i:i + 3]
            if code not in ("=2C", "=3D"):
                raise IllegalSaslState("Invalid SCRAM username encoding")
            out.append("," if code == "=2C" else "=")
            i += 3
        else:
            out.append(name[i])
            i += 1
    return "".join(out)


def _b64decode(value: str, what: str) -> bytes:
    try:
        return base64.b64decode(value.encode("ascii"), validate=True)
    except (binascii.Error, UnicodeEncodeError):
        raise IllegalSaslState(f"Invalid SCRAM {what}: not base64") from None


def _new_nonce() -> str:
    return secrets.token_urlsafe(24)


# -- client ---------------------------------------------------------------------------------

class ScramClient:
    """The client's side: ``start()``, then ``respond(server_first)``, then
    ``respond(server_final)`` (which verifies the server's signature and returns None)."""

    def __init__(self, mechanism: str, username: str, password: str, *,
                 nonce: str | None = None, extensions: dict[str, str] | None = None) -> None:
        self.mechanism = mechanism
        self._hash = _hash_name(mechanism)
        self._username = username
        self._password = password
        self._nonce = nonce or _new_nonce()
        self._extensions = extensions or {}
        self._state = "init"
        self._server_signature = b""
        self._client_first_bare = ""

    @property
    def complete(self) -> bool:
        return self._state == "complete"

    def start(self) -> bytes:
        if self._state != "init":
            raise IllegalSaslState("SCRAM client already started")
        ext = "".join(f",{k}={v}" for k, v in self._extensions.items())
        self._client_first_bare = f"n={_encode_name(self._username)},r={self._nonce}{ext}"
        self._state = "first_sent"
        return ("n,," + self._client_first_bare).encode()

    def respond(self, challenge: bytes) -> bytes | None:
        if self._state == "first_sent":
            return self._client_final(challenge)
        if self._state == "final_sent":
            self._verify_server_final(challenge)
            return None
        raise IllegalSaslState(f"SCRAM client got a message in state {self._state}")

    def _client_final(self, challenge: bytes) -> bytes:
        self._state = "failed"
        server_first = _decode(challenge)
        attrs = _attributes(server_first, "server-first message")
        if len(attrs) < 3 or [k for k, _ in attrs[:3]] != ["r", "s", "i"]:
            raise IllegalSaslState("Invalid SCRAM server-first message")
        nonce, salt_b64, iterations_text = (v for _, v in attrs[:3])
        if not nonce.startswith(self._nonce) or len(nonce) == len(self._nonce) \
                or not _valid_nonce(nonce):
            raise SaslAuthenticationFailed("Invalid server nonce: does not start with client nonce")
        if not iterations_text.isdigit() or len(iterations_text) > 9:
            raise IllegalSaslState("Invalid SCRAM server-first message: bad iteration count")
        iterations = int(iterations_text)
        if iterations < MIN_ITERATIONS:
            raise SaslAuthenticationFailed(
                f"Requested iterations {iterations} is less than the minimum "
                f"{MIN_ITERATIONS} for {self.mechanism}")
        if iterations > CLIENT_MAX_ITERATIONS:     # a server must not make us spin for minutes
            raise SaslAuthenticationFailed(
                f"Requested iterations {iterations} is more than {CLIENT_MAX_ITERATIONS}")
        salt = _b64decode(salt_b64, "salt")
        salted = salted_password(self.mechanism, self._password, salt, iterations)
        client_key = _hmac(self._hash, salted, b"Client Key")
        stored_key = hashlib.new(self._hash, client_key).digest()
        without_proof = f"c=biws,r={nonce}"
        auth_message = f"{self._client_first_bare},{server_first},{without_proof}".encode()
        proof = _xor(client_key, _hmac(self._hash, stored_key, auth_message))
        server_key = _hmac(self._hash, salted, b"Server Key")
        self._server_signature = _hmac(self._hash, server_key, auth_message)
        self._state = "final_sent"
        return f"{without_proof},p={base64.b64encode(proof).decode()}".encode()

    def _verify_server_final(self, challenge: bytes) -> None:
        self._state = "failed"
        text = _decode(challenge)
        attrs = _attributes(text, "server-final message")
        key, value = attrs[0]
        if key == "e":
            raise SaslAuthenticationFailed(f"SCRAM authentication failed: {value}")
        if key != "v":
            raise IllegalSaslState("Invalid SCRAM server-final message")
        if not hmac.compare_digest(_b64decode(value, "server signature"), self._server_signature):
            raise SaslAuthenticationFailed("Invalid server signature in server final message")
        self._state = "complete"


# -- server ---------------------------------------------------------------------------------

class PasswordServer:
    """What PLAIN's and SCRAM's servers share: a state, and the user it ends as."""

    _state: str
    _user: str | None

    @property
    def complete(self) -> bool:
        return self._state == "complete"

    @property
    def principal(self) -> str | None:
        return f"User:{self._user}" if self.complete else None

    @property
    def expires_at_ms(self) -> int | None:
        return None   # a password login does not expire; the listener's lifetime applies

    @property
    def token_authenticated(self) -> bool:
        return False  # a delegation token login (SCRAM's tokenauth) says otherwise


class ScramServer(PasswordServer):
    """The server's side: ``respond(client_first)`` returns the server-first,
    ``respond(client_final)`` verifies the proof and returns the server-final."""

    def __init__(self, mechanism: str, store: CredentialStore, *,
                 nonce: str | None = None) -> None:
        self.mechanism = mechanism
        self._hash = _hash_name(mechanism)
        self._store = store
        self._server_nonce = nonce or _new_nonce()
        self._state = "init"
        self._user: str | None = None
        self._credential: ScramCredential | None = None
        self._gs2_header = ""
        self._nonce = ""
        self._client_first_bare = ""
        self._server_first = ""
        self._token: TokenCredential | None = None

    @property
    def username(self) -> str | None:
        """The user the client claims (known after the client-first, before the proof)."""
        return self._user

    @property
    def principal(self) -> str | None:
        if not self.complete:
            return None
        return f"User:{self._token.owner if self._token is not None else self._user}"

    @property
    def expires_at_ms(self) -> int | None:
        return self._token.expires_at_ms if self._token is not None else None

    @property
    def token_authenticated(self) -> bool:
        return self._token is not None

    def _failure(self) -> SaslAuthenticationFailed:
        return SaslAuthenticationFailed(
            "Authentication failed during authentication due to invalid credentials with "
            f"SASL mechanism {self.mechanism}")

    def respond(self, message: bytes) -> bytes:
        if self._state == "init":
            self._state = "failed"
            reply = self._server_first_message(message)
            self._state = "first_sent"
            return reply
        if self._state == "first_sent":
            self._state = "failed"
            reply = self._server_final_message(message)
            self._state = "complete"
            return reply
        raise IllegalSaslState(f"Unexpected SCRAM message in state {self._state}")

    def _server_first_message(self, message: bytes) -> bytes:
        text = _decode(message)
        parts = text.split(",", 2)
        if len(parts) != 3:
            raise IllegalSaslState("Invalid SCRAM client-first message")
        flag, authzid, bare = parts
        if flag not in ("n", "y"):
            raise IllegalSaslState("SCRAM channel binding is not supported")
        head = bare.split(",", 2)
        attrs = _attributes(",".join(head[:2]), "client-first message")
        if len(attrs) < 2 or attrs[0][0] != "n" or attrs[1][0] != "r":
            raise IllegalSaslState("Invalid SCRAM client-first message")
        extensions: dict[str, str] = {}
        for extension in head[2].split(",") if len(head) > 2 else ():
            key, sep, value = extension.partition("=")   # Kafka's: tokenauth=true...
            if not sep or not key.isascii() or not key.isalnum() or key == "m":
                raise IllegalSaslState("Invalid SCRAM client-first message: bad extension")
            extensions[key] = value
        user = _decode_name(attrs[0][1])
        if not user:
            raise IllegalSaslState("Invalid SCRAM client-first message: empty username")
        if authzid and (not authzid.startswith("a=") or _decode_name(authzid[2:]) != user):
            raise SaslAuthenticationFailed(
                "Authentication failed: Client requested an authorization id that is "
                "different from username")
        if not _valid_nonce(attrs[1][1]):
            raise IllegalSaslState("Invalid SCRAM client-first message: bad nonce")
        self._user, self._gs2_header = user, f"{flag},{authzid},"
        self._nonce = attrs[1][1] + self._server_nonce
        self._client_first_bare = bare
        if extensions.get("tokenauth", "").lower() == "true":   # Boolean.parseBoolean
            self._token = self._store.token(user, self.mechanism)
            self._credential = self._token.credential if self._token is not None else None
        else:
            self._credential = self._store.scram(user, self.mechanism)
        if self._credential is not None and self._credential.mechanism != self.mechanism:
            self._credential = None
        if self._credential is None:    # answer as for a real user, fail at the proof
            salt = _hmac("sha256", _FAKE_SALT_KEY, f"{self.mechanism}\0{user}".encode())
            salt_b64, iterations = base64.b64encode(salt).decode(), MIN_ITERATIONS
        else:
            salt_b64 = base64.b64encode(self._credential.salt).decode()
            iterations = self._credential.iterations
        self._server_first = f"r={self._nonce},s={salt_b64},i={iterations}"
        return self._server_first.encode()

    def _server_final_message(self, message: bytes) -> bytes:
        text = _decode(message)
        head, sep, proof_b64 = text.rpartition(",p=")
        if not sep:
            raise IllegalSaslState("Invalid SCRAM client-final message: no proof")
        attrs = _attributes(head, "client-final message")
        if len(attrs) < 2 or attrs[0][0] != "c" or attrs[1][0] != "r":
            raise IllegalSaslState("Invalid SCRAM client-final message")
        expected_binding = base64.b64encode(self._gs2_header.encode()).decode()
        if not hmac.compare_digest(attrs[0][1].encode(), expected_binding.encode()):
            raise SaslAuthenticationFailed("Invalid channel binding in SCRAM client-final message")
        if not attrs[1][1].endswith(self._nonce):   # Kafka's check (librdkafka 2.0 repeats the client nonce)
            raise SaslAuthenticationFailed("Invalid client nonce in the final client message.")
        proof = _b64decode(proof_b64, "client proof")
        auth_message = f"{self._client_first_bare},{self._server_first},{head}".encode()
        credential = self._credential
        if credential is None or len(proof) != hashlib.new(self._hash).digest_size:
            raise self._failure()
        client_signature = _hmac(self._hash, credential.stored_key, auth_message)
        client_key = _xor(proof, client_signature)
        if not hmac.compare_digest(hashlib.new(self._hash, client_key).digest(),
                                   credential.stored_key):
            raise self._failure()
        signature = _hmac(self._hash, credential.server_key, auth_message)
        return f"v={base64.b64encode(signature).decode()}".encode()
