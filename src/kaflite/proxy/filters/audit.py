"""The audit filter: one JSON line for each control-plane request.

Who joined or left which group, who committed which offsets, who created,
deleted or reconfigured which topics, who started or ended which transaction,
who changed ACLs. A line is written when the answer comes back, with its error
(``null`` when it succeeded)::

    {"ts": 1764050000.1, "api": "JoinGroup", "client_id": "app-1",
     "peer": "127.0.0.1:51234", "group": "billing", "topics": [],
     "transactional_id": null, "error": null}

Options: ``path`` (append to this file; default: the ``kaflite.proxy.audit``
logger at INFO).
"""

from __future__ import annotations

import json
import logging
import time
from typing import IO

from kaflite.cluster._msgscope import walk
from kaflite.cluster.observe import api_name, error_name, request_group
from kaflite.proxy.filters.base import Exchange, Filter

__all__ = ["AUDITED_APIS", "AuditFilter"]

log = logging.getLogger("kaflite.proxy.audit")

# OffsetCommit, JoinGroup, LeaveGroup, SyncGroup, CreateTopics, DeleteTopics,
# DeleteRecords, InitProducerId, AddPartitionsToTxn, AddOffsetsToTxn, EndTxn,
# TxnOffsetCommit, CreateAcls, DeleteAcls, AlterConfigs, CreatePartitions,
# DeleteGroups, IncrementalAlterConfigs, OffsetDelete, ConsumerGroupHeartbeat
AUDITED_APIS = frozenset({8, 11, 13, 14, 19, 20, 21, 22, 24, 25, 26, 28, 30, 31, 33, 37, 42,
                          44, 47, 68})
CONSUMER_GROUP_HEARTBEAT = 68


class AuditFilter(Filter):
    name = "audit"

    def __init__(self, path: str | None = None) -> None:
        self.path = path
        self._file: IO[str] | None = open(path, "a", encoding="utf-8") if path else None  # noqa: SIM115

    @classmethod
    def from_options(cls, options: dict[str, str]) -> AuditFilter:
        return cls(options.get("path"))

    def wants(self, api_key: int, version: int) -> bool:
        return api_key in AUDITED_APIS

    def on_response(self, exchange: Exchange) -> None:
        ex = exchange
        if ex.api_key not in AUDITED_APIS or ex.request is None:
            return
        # A KIP-848 heartbeat is audited when it joins (epoch 0) or leaves (epoch < 0).
        if ex.api_key == CONSUMER_GROUP_HEARTBEAT and \
                getattr(ex.request, "member_epoch", 0) > 0:
            return
        topics = sorted({s.topic for s in walk(ex.request, ex.version, ex.resolve)
                         if s.topic is not None and s.level in ("topic", "partition")})
        code = int(getattr(ex.response, "error_code", 0) or 0) if ex.response is not None else 0
        if ex.response is not None and not code:
            for slot in walk(ex.response, ex.version, ex.resolve):
                value = getattr(slot.obj, "error_code", 0)
                if isinstance(value, int) and value:
                    code = value
                    break
        txn = getattr(ex.request, "transactional_id", None)
        line = json.dumps({
            "ts": round(time.time(), 3), "api": api_name(ex.api_key), "client_id": ex.client_id,
            "peer": ex.peer, "group": request_group(ex.request), "topics": topics,
            "transactional_id": txn if isinstance(txn, str) else None,
            "error": error_name(code) if code else None,
        })
        if self._file is not None:
            self._file.write(line + "\n")
            self._file.flush()
        else:
            log.info("%s", line)

    def close(self) -> None:
        if self._file is not None:
            self._file.close()
            self._file = None
