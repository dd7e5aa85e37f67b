"""Record batch codec benchmark: kaflite beside aiokafka and kafka-python, in one run.

Workload: one v2 batch of 10,000 records with 100-byte values, null keys, no
headers (the common producer shape), uncompressed and with one codec (lz4).
A second, "varied" workload gives every value a different length (50-150
bytes) and a key, so that kaflite's same-shape fast path cannot apply.

* encode: build the batch from Python objects (values list -> bytes);
* decode: bytes -> offset, timestamp, key, value and headers of every record.
  kaflite's columns hold views of the batch (``columns()``) or, as the peers
  give and kaflite's consumer asks, ``bytes`` (``columns(copy=True)``).

Peers: aiokafka with its Cython extensions, aiokafka's pure-Python fallback
(run in a subprocess with AIOKAFKA_NO_EXTENSIONS=1, since the choice is made at
import), and kafka-python's ``kafka.record``. Each number is the best of
several repeats, in records per second; the ratio column is kaflite's speed
divided by the peer's.

kaflite is measured twice: with numba's compiled loops for varied records
(``kaflite[jit]``, waited for before timing) and without them ("no numba": the
pure-Python paths).

Usage: python benchmarks/codec.py [--repeat N]
"""

from __future__ import annotations

import argparse
import json
import os
import random
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "src"))

N = 10_000
TIMESTAMP = 1_700_000_000_000
CODECS = {"none": 0, "lz4": 3}


def workload(kind: str) -> tuple[list[bytes | None], list[bytes]]:
    rnd = random.Random(42)
    if kind == "uniform":
        return [None] * N, [rnd.randbytes(100) for _ in range(N)]
    keys: list[bytes | None] = [b"key-%d" % i for i in range(N)]
    return keys, [rnd.randbytes(rnd.randint(50, 150)) for _ in range(N)]


def best(fn: Callable[[], object], repeat: int) -> float:
    fn()  # warm up (tables, caches)
    times = []
    for _ in range(repeat):
        t = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t)
    return N / min(times)


# -- implementations -------------------------------------------------------------------


def kaflite_cases(kind: str, codec: int, repeat: int) -> dict[str, float]:
    from kaflite.protocol.records import RecordBatch, RecordBatchBuilder, encode_batch

    keys, values = workload(kind)
    key_arg = None if kind == "uniform" else keys

    def encode() -> bytes:
        return encode_batch(values, keys=key_arg, compression=codec, base_timestamp=TIMESTAMP)

    def build() -> bytes:
        b = RecordBatchBuilder(compression=codec, base_timestamp=TIMESTAMP)
        for k, v in zip(keys, values, strict=True):
            b.append(v, key=k, timestamp=TIMESTAMP)
        return b.build()

    data = encode()

    def decode() -> object:
        c = RecordBatch.from_buffer(data).columns()
        return c.offsets, c.timestamps, c.keys, c.values, c.headers

    def decode_bytes() -> object:
        c = RecordBatch.from_buffer(data).columns(copy=True)
        return c.offsets, c.timestamps, c.keys, c.values, c.headers

    def iterate() -> object:
        return [
            (r.offset, r.timestamp, r.key, r.value, r.headers)
            for r in RecordBatch.from_buffer(data)
        ]

    return {
        "encode (encode_batch)": best(encode, repeat),
        "encode (builder.append)": best(build, repeat),
        "decode (columns)": best(decode, repeat),
        "decode (columns, bytes)": best(decode_bytes, repeat),
        "decode (iterate Records)": best(iterate, repeat),
    }


def peer_cases(module: Any, kind: str, codec: int, repeat: int) -> dict[str, float]:
    keys, values = workload(kind)

    def encode() -> bytes:
        b = module.DefaultRecordBatchBuilder(2, codec, 0, -1, -1, -1, 2**30)
        for i, (k, v) in enumerate(zip(keys, values, strict=True)):
            b.append(i, timestamp=TIMESTAMP, key=k, value=v, headers=[])
        return bytes(b.build())

    data = encode()

    def decode() -> object:
        return [
            (r.offset, r.timestamp, r.key, r.value, r.headers)
            for r in module.DefaultRecordBatch(data)
        ]

    return {"encode": best(encode, repeat), "decode": best(decode, repeat)}


def run_one(impl: str, repeat: int) -> dict[str, float]:
    results: dict[str, float] = {}
    if impl.startswith("kaflite"):
        from kaflite.protocol.records import _jit

        if impl == "kaflite-py":
            _jit.set_enabled(False)
        elif _jit.wait_ready(120) is None:
            raise RuntimeError("numba's loops did not load: pip install kaflite[jit]")
    for kind in ("uniform", "varied"):
        for cname, codec in CODECS.items():
            if impl.startswith("kaflite"):
                cases = kaflite_cases(kind, codec, repeat)
            elif impl.startswith("aiokafka"):
                import aiokafka.record.default_records as mod

                want_c = impl == "aiokafka-c"
                if ("_crecords" in mod.DefaultRecordBatchBuilder.__module__) != want_c:
                    raise RuntimeError(f"{impl}: wrong aiokafka implementation loaded")
                cases = peer_cases(mod, kind, codec, repeat)
            else:
                import kafka.record.default_records as kmod

                cases = peer_cases(kmod, kind, codec, repeat)
            for op, rate in cases.items():
                results[f"{kind}|{cname}|{op}"] = rate
    return results


def in_subprocess(impl: str, repeat: int, env: dict[str, str]) -> dict[str, float]:
    out = subprocess.run(
        [sys.executable, __file__, "--only", impl, "--repeat", str(repeat)],
        env={**os.environ, **env},
        capture_output=True,
        text=True,
        check=True,
        timeout=900,
    )
    result: dict[str, float] = json.loads(out.stdout)
    return result


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--repeat", type=int, default=7)
    parser.add_argument("--only", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.only:
        print(json.dumps(run_one(args.only, args.repeat)))
        return
    impls = {
        "kaflite": run_one("kaflite", args.repeat),
        "kaflite-py": run_one("kaflite-py", args.repeat),
        "aiokafka-c": run_one("aiokafka-c", args.repeat),
        "aiokafka-py": in_subprocess(
            "aiokafka-py", max(2, args.repeat // 3), {"AIOKAFKA_NO_EXTENSIONS": "1"}
        ),
        "kafka-python": run_one("kafka-python", max(2, args.repeat // 3)),
    }
    print(
        f"Python {sys.version.split()[0]}, {os.cpu_count()} CPUs, {N} records per batch; records/s (best of runs)\n"
    )
    header = f"{'workload':<16}{'operation':<26}{'kaflite':>12}{'aiokafka C':>12}{'aiokafka py':>12}{'kafka-py':>12}{'vs C':>8}{'vs py':>8}{'vs kp':>8}"
    print(header)
    print("-" * len(header))
    for key in impls["kaflite"]:
        kind, cname, op = key.split("|")
        peer_op = "encode" if op.startswith("encode") else "decode"
        peer_key = f"{kind}|{cname}|{peer_op}"
        c, py, kp = (impls[i][peer_key] for i in ("aiokafka-c", "aiokafka-py", "kafka-python"))
        for label, rate in ((op, impls["kaflite"][key]), ("  (no numba)", impls["kaflite-py"][key])):
            print(
                f"{kind + '/' + cname:<16}{label:<26}{rate:>12,.0f}{c:>12,.0f}{py:>12,.0f}"
                f"{kp:>12,.0f}{rate / c:>7.2f}x{rate / py:>7.1f}x{rate / kp:>7.1f}x"
            )


if __name__ == "__main__":
    main()
