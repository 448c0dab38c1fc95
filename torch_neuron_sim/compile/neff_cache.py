"""The persistent NEFF cache. The real backend writes each compiled graph's
NEFF under TORCH_NEURONX_NEFF_CACHE_DIR (default /tmp/neff_cache), keyed by
the graph and its input signature, so a second process compiling the same
graph loads it instead of running neuronx-cc again. Here the artifact is the
serialized graph (its FX code and input signature: the "NEFF"); a hit skips
the simulated compile latency (NEURON_SIM_COMPILE_MS), and Inductor's own
cache makes its code generation near-free for the same graph.

Entry format: a magic line, a JSON header (key, payload length, sha256),
then the payload. A truncated or corrupt entry is detected by the length and
the digest, reported (warning) and removed, and the graph is recompiled:
a damaged artifact is never loaded. Writes go to a temporary file renamed
into place, so a reader never sees a half-written entry.
TORCH_NEURONX_DISABLE_NEFF_CACHE / TORCH_NEURONX_NEFF_DISABLE_CACHE=1 turn
the persistent layer off (the in-memory layer stays, as in the real backend)."""
from __future__ import annotations

import hashlib
import json
import logging
import os
import tempfile
from pathlib import Path
from typing import Optional
from .. import environment

log = logging.getLogger("torch_neuron_sim")

MAGIC = b"TORCH_NEURON_SIM_NEFF 1\n"
DEFAULT_DIR = "/tmp/neff_cache"


def cache_dir() -> Path:
    return Path(environment.setting("TORCH_NEURONX_NEFF_CACHE_DIR") or DEFAULT_DIR)


def persistent_enabled() -> bool:
    return not any(environment.flag(v) for v in ("TORCH_NEURONX_DISABLE_NEFF_CACHE", "TORCH_NEURONX_NEFF_DISABLE_CACHE"))


def key_of(*parts: str) -> str:
    h = hashlib.sha256()
    for p in parts:
        h.update(p.encode())
        h.update(b"\0")
    return h.hexdigest()[:40]


def path_of(key: str) -> Path:
    return cache_dir() / key[:2] / f"{key}.neff"


def load(key: str) -> Optional[bytes]:
    """The payload stored under key, or None (absent or damaged: a damaged
    entry is reported and deleted)."""
    path = path_of(key)
    try:
        raw = path.read_bytes()
    except FileNotFoundError:
        return None
    except OSError as e:
        log.warning("NEFF cache: cannot read %s (%s); recompiling", path, e)
        return None
    problem = _verify(raw, key)
    if problem is None:
        nl = raw.index(b"\n", len(MAGIC))
        return raw[nl + 1:]
    log.warning("NEFF cache: corrupt entry %s (%s); it is discarded and the graph recompiled", path, problem)
    try:
        path.unlink()
    except OSError:
        pass
    return None


def _verify(raw: bytes, key: str) -> Optional[str]:
    if not raw.startswith(MAGIC):
        return "bad magic"
    try:
        nl = raw.index(b"\n", len(MAGIC))
        header = json.loads(raw[len(MAGIC):nl])
    except (ValueError, UnicodeDecodeError):
        return "unreadable header"
    payload = raw[nl + 1:]
    if header.get("key") != key:
        return "key mismatch"
    if header.get("size") != len(payload):
        return f"truncated: {len(payload)} of {header.get('size')} bytes"
    if header.get("sha256") != hashlib.sha256(payload).hexdigest():
        return "checksum mismatch"
    return None


def store(key: str, payload: bytes) -> Optional[Path]:
    path = path_of(key)
    header = json.dumps({"key": key, "size": len(payload), "sha256": hashlib.sha256(payload).hexdigest()})
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=".tmp-")
        with os.fdopen(fd, "wb") as f:
            f.write(MAGIC + header.encode() + b"\n" + payload)
        os.replace(tmp, path)
    except OSError as e:  # a read-only or full cache dir costs a recompile, never a failure
        log.warning("NEFF cache: cannot write %s (%s)", path, e)
        return None
    return path
