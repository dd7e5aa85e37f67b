"""JSON Web Tokens as OAUTHBEARER needs them: parse, verify against a JWKS, check claims.

* ``decode(token)`` splits a compact JWS into header, claims, signing input and signature.
* ``unsecured_token`` builds Kafka's unsecured development token (``alg: none``, empty
  signature), as librdkafka's ``sasl.oauthbearer.config`` builder does.
* ``Jwks`` holds a JSON Web Key Set read from a ``file://``, ``http://`` or ``https://``
  URL, re-read after ``refresh_ms`` or when a token names an unknown ``kid``.
* ``verify_signature`` checks RS256/384/512, PS256/384/512 and ES256/384/512 with
  ``cryptography``; ``none`` and the HMAC algorithms are refused for signed tokens.
* ``check_times`` applies Kafka's exp/iat/nbf rules with a clock skew.
* ``sign_token`` and ``public_jwk`` make signed tokens and key sets for tests and demos.

Every failure is a ``TokenError`` whose message is safe to show (it never holds the token).
"""

from __future__ import annotations

import base64
import binascii
import json
import threading
import time
import urllib.parse
import urllib.request
from collections.abc import Mapping, Sequence
from typing import cast

from cryptography.exceptions import InvalidSignature
from cryptography.hazmat.primitives import hashes
from cryptography.hazmat.primitives.asymmetric import ec, padding, rsa
from cryptography.hazmat.primitives.asymmetric.utils import (
    decode_dss_signature,
    encode_dss_signature,
)

__all__ = ["Jwks", "PublicKey", "TokenError", "b64url", "check_times", "decode",
           "public_jwk", "sign_token", "unsecured_token", "verify_signature"]

PublicKey = rsa.RSAPublicKey | ec.EllipticCurvePublicKey
PrivateKey = rsa.RSAPrivateKey | ec.EllipticCurvePrivateKey
JsonObject = dict[str, object]

_HASHES: dict[str, type[hashes.HashAlgorithm]] = {
    "256": hashes.SHA256, "384": hashes.SHA384, "512": hashes.SHA512}
_CURVES: dict[str, type[ec.EllipticCurve]] = {
    "P-256": ec.SECP256R1, "P-384": ec.SECP384R1, "P-521": ec.SECP521R1}
ALGORITHMS = tuple(f"{family}{bits}" for family in ("RS", "PS", "ES") for bits in _HASHES)


class TokenError(ValueError):
    """A token or key set that cannot be used; the message is safe to show."""


def b64url(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode()


def _b64url_decode(text: str, what: str) -> bytes:
    try:
        return base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))
    except (binascii.Error, ValueError):
        raise TokenError(f"The {what} is not valid base64url") from None


def _json_object(data: bytes, what: str) -> JsonObject:
    try:
        value = json.loads(data)
    except (ValueError, RecursionError):
        raise TokenError(f"The {what} is not valid JSON") from None
    if not isinstance(value, dict):
        raise TokenError(f"The {what} is not a JSON object")
    return cast(JsonObject, value)


def decode(token: str) -> tuple[JsonObject, JsonObject, bytes, bytes]:
    """A compact JWS: (header, claims, signing input, signature)."""
    parts = token.split(".")
    if len(parts) != 3:
        raise TokenError(f"A JWS must have 3 dot-separated parts, found {len(parts)}")
    header = _json_object(_b64url_decode(parts[0], "JOSE header"), "JOSE header")
    claims = _json_object(_b64url_decode(parts[1], "JWT payload"), "JWT payload")
    return header, claims, f"{parts[0]}.{parts[1]}".encode(), \
        _b64url_decode(parts[2], "JWS signature")


def _encode(header: Mapping[str, object], claims: Mapping[str, object]) -> str:
    def part(obj: Mapping[str, object]) -> str:
        return b64url(json.dumps(obj, separators=(",", ":")).encode())
    return f"{part(header)}.{part(claims)}"


def unsecured_token(principal: str, *, lifetime_s: int = 3600, scope: Sequence[str] = (),
                    principal_claim: str = "sub", scope_claim: str = "scope",
                    now_s: float | None = None) -> str:
    """Kafka's unsecured JWS for development: ``alg: none``, an empty signature."""
    now = int(time.time() if now_s is None else now_s)
    claims: JsonObject = {principal_claim: principal, "iat": now, "exp": now + lifetime_s}
    if scope:
        claims[scope_claim] = list(scope)
    return _encode({"alg": "none"}, claims) + "."


def _int_param(jwk: Mapping[str, object], name: str) -> int:
    value = jwk.get(name)
    if not isinstance(value, str):
        raise TokenError(f"JWK parameter {name!r} is missing")
    return int.from_bytes(_b64url_decode(value, f"JWK parameter {name!r}"), "big")


def _public_key(jwk: Mapping[str, object]) -> PublicKey:
    kty = jwk.get("kty")
    try:
        if kty == "RSA":
            return rsa.RSAPublicNumbers(_int_param(jwk, "e"), _int_param(jwk, "n")).public_key()
        if kty == "EC":
            curve = _CURVES.get(str(jwk.get("crv")))
            if curve is None:
                raise TokenError(f"Unsupported JWK curve {jwk.get('crv')!r}")
            return ec.EllipticCurvePublicNumbers(
                _int_param(jwk, "x"), _int_param(jwk, "y"), curve()).public_key()
    except ValueError as exc:
        raise TokenError(f"Invalid JWK: {exc}") from None
    raise TokenError(f"Unsupported JWK key type {kty!r}")


def _read_url(url: str, timeout_s: float) -> bytes:
    scheme = urllib.parse.urlsplit(url).scheme
    if scheme not in ("file", "http", "https"):
        raise TokenError(f"Unsupported JWKS URL scheme {scheme!r} (file, http or https)")
    try:
        with urllib.request.urlopen(url, timeout=timeout_s) as response:
            return cast(bytes, response.read())
    except OSError as exc:
        raise TokenError(f"Could not read the JWKS at {url}: {exc}") from None


class Jwks:
    """A JSON Web Key Set from a URL (``file://``, ``http://``, ``https://``), cached."""

    def __init__(self, url: str, *, refresh_ms: int = 3_600_000, timeout_s: float = 10.0,
                 min_refetch_ms: int = 10_000) -> None:
        self.url = url
        self._refresh_ms, self._timeout_s, self._min_refetch_ms = \
            refresh_ms, timeout_s, min_refetch_ms
        self._keys: list[tuple[JsonObject, PublicKey]] = []
        self._loaded_ms = -1.0
        self._lock = threading.Lock()

    def _load(self) -> None:
        doc = _json_object(_read_url(self.url, self._timeout_s), "JWKS")
        entries = doc.get("keys")
        if not isinstance(entries, list):
            raise TokenError("The JWKS has no 'keys' array")
        keys = []
        for entry in entries:
            if isinstance(entry, dict) and entry.get("use", "sig") == "sig":
                try:
                    keys.append((cast(JsonObject, entry), _public_key(entry)))
                except TokenError:
                    continue        # a key type we cannot use: the others still can
        self._keys, self._loaded_ms = keys, time.monotonic() * 1000

    def _candidates(self, kid: str | None, alg: str) -> list[PublicKey]:
        kty = "EC" if alg.startswith("ES") else "RSA"
        return [key for jwk, key in self._keys
                if (kid is None or jwk.get("kid") == kid) and jwk.get("kty") == kty
                and jwk.get("alg", alg) == alg]

    def keys_for(self, kid: str | None, alg: str) -> list[PublicKey]:
        """The keys that may have signed a token with this ``kid`` and ``alg`` (re-reading
        the set when it is stale, or once per ``min_refetch_ms`` for an unknown kid)."""
        with self._lock:
            now = time.monotonic() * 1000
            if self._loaded_ms < 0 or now - self._loaded_ms > self._refresh_ms:
                self._load()
            found = self._candidates(kid, alg)
            if not found and now - self._loaded_ms > self._min_refetch_ms:
                self._load()
                found = self._candidates(kid, alg)
        if not found:
            raise TokenError(f"No key in the JWKS matches kid {kid!r} and alg {alg}")
        return found


def verify_signature(alg: str, key: PublicKey, signing_input: bytes, signature: bytes) -> bool:
    """Whether ``signature`` is ``key``'s signature of ``signing_input`` under ``alg``."""
    if alg not in ALGORITHMS:
        raise TokenError(f"Unsupported JWS algorithm {alg!r}")
    digest = _HASHES[alg[2:]]()
    try:
        if alg.startswith("ES") and isinstance(key, ec.EllipticCurvePublicKey):
            size = (key.curve.key_size + 7) // 8
            if len(signature) != 2 * size:
                return False
            der = encode_dss_signature(int.from_bytes(signature[:size], "big"),
                                       int.from_bytes(signature[size:], "big"))
            key.verify(der, signing_input, ec.ECDSA(digest))
            return True
        if isinstance(key, rsa.RSAPublicKey) and not alg.startswith("ES"):
            pad: padding.AsymmetricPadding = padding.PKCS1v15() if alg.startswith("RS") else \
                padding.PSS(mgf=padding.MGF1(digest), salt_length=digest.digest_size)
            key.verify(signature, signing_input, pad, digest)
            return True
    except InvalidSignature:
        return False
    return False


def _numeric(claims: Mapping[str, object], name: str, required: bool) -> float | None:
    value = claims.get(name)
    if value is None:
        if required:
            raise TokenError(f"The token has no {name!r} claim")
        return None
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise TokenError(f"The token's {name!r} claim is not a number")
    return float(value)


def check_times(claims: Mapping[str, object], *, now_s: float, skew_s: float = 0.0,
                require_iat: bool = False) -> float:
    """Kafka's time checks (exp required and not past, iat and nbf not in the future,
    exp after iat); returns exp in seconds."""
    exp = _numeric(claims, "exp", True)
    assert exp is not None
    iat = _numeric(claims, "iat", require_iat)
    nbf = _numeric(claims, "nbf", False)
    if exp <= now_s - skew_s:
        raise TokenError(f"The token expired at {exp:.0f} (now {now_s:.0f}, "
                         f"clock skew {skew_s:.0f}s)")
    if iat is not None and iat > now_s + skew_s:
        raise TokenError(f"The token's issue time {iat:.0f} is in the future")
    if nbf is not None and nbf > now_s + skew_s:
        raise TokenError(f"The token is not valid before {nbf:.0f}")
    if iat is not None and exp <= iat:
        raise TokenError("The token's expiration time is not after its issue time")
    return exp


def sign_token(claims: Mapping[str, object], key: PrivateKey, *, alg: str | None = None,
               kid: str | None = None) -> str:
    """A signed compact JWS (RS256 for an RSA key, ES256/384/512 for an EC key by default)."""
    if alg is None:
        alg = "RS256" if isinstance(key, rsa.RSAPrivateKey) else \
            {256: "ES256", 384: "ES384", 521: "ES512"}[key.curve.key_size]
    header: JsonObject = {"alg": alg, "typ": "JWT"}
    if kid is not None:
        header["kid"] = kid
    signing_input = _encode(header, claims)
    digest = _HASHES[alg[2:]]()
    if isinstance(key, ec.EllipticCurvePrivateKey):
        r, s = decode_dss_signature(key.sign(signing_input.encode(), ec.ECDSA(digest)))
        size = (key.curve.key_size + 7) // 8
        signature = r.to_bytes(size, "big") + s.to_bytes(size, "big")
    else:
        pad: padding.AsymmetricPadding = padding.PKCS1v15() if alg.startswith("RS") else \
            padding.PSS(mgf=padding.MGF1(digest), salt_length=digest.digest_size)
        signature = key.sign(signing_input.encode(), pad, digest)
    return f"{signing_input}.{b64url(signature)}"


def public_jwk(key: PublicKey, kid: str, alg: str | None = None) -> JsonObject:
    """``key`` as a JWK (the entry of a JWKS's ``keys`` array)."""
    def enc(n: int, size: int | None = None) -> str:
        return b64url(n.to_bytes(size or (n.bit_length() + 7) // 8, "big"))
    jwk: JsonObject
    if isinstance(key, rsa.RSAPublicKey):
        numbers = key.public_numbers()
        jwk = {"kty": "RSA", "n": enc(numbers.n), "e": enc(numbers.e)}
    else:
        ec_numbers = key.public_numbers()
        size = (key.curve.key_size + 7) // 8
        crv = {256: "P-256", 384: "P-384", 521: "P-521"}[key.curve.key_size]
        jwk = {"kty": "EC", "crv": crv, "x": enc(ec_numbers.x, size),
               "y": enc(ec_numbers.y, size)}
    jwk.update({"kid": kid, "use": "sig"})
    if alg:
        jwk["alg"] = alg
    return jwk
