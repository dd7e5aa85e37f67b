"""kaflite.proxy: a protocol-aware Kafka proxy that knows which connection is which.

``Proxy`` (``server.py``) listens for clients and opens, for each client
connection, one upstream connection to the broker it stands for. Modules:

* ``session``: one client connection and its upstream connection (framing,
  in-order answers, back-pressure);
* ``mapping``: upstream brokers <-> local ports, and the rewriting of every
  address a response carries;
* ``sasl``: ending SASL at the proxy, and its own SASL login upstream;
* ``versions``: ApiVersions as the intersection of upstream and codec;
* ``registry``: which connection is which (roles, client, software, rates);
* ``filters``: the filter chain and the shipped filters (chaos, audit,
  topic-prefix);
* ``http`` and ``metrics``: the JSON API and ``/metrics``.

See docs/proxy.md.
"""

from kaflite.proxy.filters import load_filter
from kaflite.proxy.filters.base import Exchange, Filter, FilterChain
from kaflite.proxy.sasl import ProxySasl, UpstreamSasl
from kaflite.proxy.server import Proxy

__all__ = ["Exchange", "Filter", "FilterChain", "Proxy", "ProxySasl", "UpstreamSasl",
           "load_filter"]
