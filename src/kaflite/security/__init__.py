"""Security without I/O: SASL mechanisms, SCRAM credentials, TLS contexts, test certificates.

* ``errors``: the three errors of a SASL exchange;
* ``sasl``: the client and server interfaces and their factories;
* ``plain``, ``scram``, ``oauthbearer`` (with ``jwt``): the mechanisms;
* ``tls``: ``ssl.SSLContext`` for brokers and clients, the mTLS principal;
* ``certs``: a test CA with broker and client certificates (``kaflite certs``).

Nothing here opens a socket or runs an event loop (OAUTHBEARER's OIDC client fetches its
token with urllib when asked, and a JWKS URL is read the same way).
"""
