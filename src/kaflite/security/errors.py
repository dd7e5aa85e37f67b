"""The errors of a SASL exchange, as the broker maps them onto Kafka's error codes.

* ``SaslAuthenticationFailed``: wrong credentials, a bad token, a wrong nonce
  (SASL_AUTHENTICATION_FAILED). Its message is safe to send to the peer: it never holds a
  password, a token or a proof.
* ``UnsupportedSaslMechanism``: a mechanism that is unknown or not enabled
  (UNSUPPORTED_SASL_MECHANISM).
* ``IllegalSaslState``: a malformed message, or one that comes out of order (a second
  client-final, a message after completion). Kafka answers these with
  SASL_AUTHENTICATION_FAILED too, then closes the connection.

All three derive from ``SaslError``, so a caller can catch every failure of an exchange
with one clause; the mechanisms raise nothing else on bad input.
"""

from __future__ import annotations

__all__ = ["IllegalSaslState", "SaslAuthenticationFailed", "SaslError",
           "UnsupportedSaslMechanism"]


class SaslError(Exception):
    """Any failure of a SASL exchange (the base of the three below)."""


class SaslAuthenticationFailed(SaslError):
    """The peer's credentials were refused; the message is safe to send to the peer."""


class UnsupportedSaslMechanism(SaslError):
    """The mechanism is unknown, or not enabled here."""


class IllegalSaslState(SaslError):
    """A malformed SASL message, or one that came out of order."""
