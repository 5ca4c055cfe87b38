"""The on-disk plan cache: backend choices of the auto planner, kept across processes.

``IOGNN_PLAN_CACHE=<dir>`` turns it on (unset or empty: off). The choices live in one JSON file,
``<dir>/propagate_plans.json``::

    {"version": 1,
     "entries": {"<key>": {"backend": "own" | "cusparse", "why": "timed: own 0.12 ms, ..."}}}

Keys (:func:`plan_key`) name everything a timing depends on: the op and gather direction, the
feature width and dtype, the index dtype, the device name and CUDA version, and the graph's
signature - its sizes and a hash of its degree statistics (``Graph.stats``). Editing an entry's
backend overrides the choice for every graph with that signature. The file holds at most
``MAX_ENTRIES`` entries (the oldest written go first). Writes replace the file atomically after
merging it with what other processes wrote since it was read; a malformed file is a ValueError
naming it.
"""
from __future__ import annotations

import hashlib
import json
import os
import tempfile
import threading
import weakref
from pathlib import Path
from typing import Dict, Optional

import torch

ENV = "IOGNN_PLAN_CACHE"
FILE_NAME = "propagate_plans.json"
VERSION = 1
MAX_ENTRIES = 1000
BACKENDS = ("own", "cusparse")


def cache_dir() -> Optional[Path]:
    """The directory IOGNN_PLAN_CACHE names, or None when it is unset or empty."""
    value = os.environ.get(ENV, "")
    if not value:
        return None
    path = Path(value).expanduser()
    if path.exists() and not path.is_dir():
        raise ValueError(f"{ENV} must name a directory, got {value!r}, which is not one")
    return path


# Degree-statistics hashes by Graph object (computing Graph.stats copies its offsets to the host
# once; the hash is then reused for every key of that graph).
_digests: "weakref.WeakKeyDictionary" = weakref.WeakKeyDictionary()


def graph_digest(graph) -> str:
    """16 hex digits hashing ``graph.stats`` (degree statistics): equal for equal topologies."""
    digest = _digests.get(graph)
    if digest is None:
        text = json.dumps(graph.stats, sort_keys=True)
        digest = hashlib.sha256(text.encode()).hexdigest()[:16]
        _digests[graph] = digest
    return digest


def plan_key(graph, F: int, dtype: torch.dtype, direction: str, device_name: str) -> str:
    """The cache key of one gather: ``propagate|<direction>|F=..|<dtype>|<index dtype>|<device>|
    cuda=..|src=..|dst=..|nnz=..|deg=<graph_digest>``."""
    parts = ["propagate", direction, f"F={F}", str(dtype).replace("torch.", ""),
             str(graph.index_dtype).replace("torch.", ""), device_name,
             f"cuda={torch.version.cuda}", f"src={graph.num_src_nodes}",
             f"dst={graph.num_dst_nodes}", f"nnz={graph.num_edges}", f"deg={graph_digest(graph)}"]
    return "|".join(parts)


class PlanStore:
    """The JSON file of one cache directory (thread-safe; entries loaded once, then kept)."""

    def __init__(self, directory: Path):
        self.path = Path(directory) / FILE_NAME
        self._lock = threading.Lock()
        self._entries: Optional[Dict[str, dict]] = None

    def get(self, key: str) -> Optional[str]:
        """The backend stored for `key`, or None."""
        with self._lock:
            if self._entries is None:
                self._entries = self._read()
            entry = self._entries.get(key)
        return None if entry is None else entry["backend"]

    def put(self, key: str, backend: str, why: str) -> None:
        """Stores `backend` for `key` (as the newest entry) and writes the file."""
        if backend not in BACKENDS:
            raise ValueError(f"backend must be one of {BACKENDS}, got {backend!r}")
        with self._lock:
            entries = self._read()  # what other processes wrote meanwhile, merged
            entries.pop(key, None)
            entries[key] = {"backend": backend, "why": why}
            while len(entries) > MAX_ENTRIES:
                del entries[next(iter(entries))]
            self._write(entries)
            self._entries = entries

    def _read(self) -> Dict[str, dict]:
        try:
            text = self.path.read_text()
        except FileNotFoundError:
            return {}
        try:
            data = json.loads(text)
        except json.JSONDecodeError as e:
            raise ValueError(f"{ENV}: {self.path} is not valid JSON ({e})") from None
        if not isinstance(data, dict) or data.get("version") != VERSION or \
                not isinstance(data.get("entries"), dict):
            raise ValueError(f"{ENV}: {self.path} is not a version-{VERSION} plan cache "
                             "(expected {\"version\": 1, \"entries\": {...}})")
        entries = data["entries"]
        for key, entry in entries.items():
            if not isinstance(entry, dict) or entry.get("backend") not in BACKENDS:
                raise ValueError(f"{ENV}: {self.path}: entry {key!r} must have a backend "
                                 f"in {BACKENDS}, got {entry!r}")
        return entries

    def _write(self, entries: Dict[str, dict]) -> None:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(dir=self.path.parent, prefix=".propagate_plans.", suffix=".tmp")
        try:
            with os.fdopen(fd, "w") as f:
                json.dump({"version": VERSION, "entries": entries}, f, indent=1)
            os.replace(tmp, self.path)
        except BaseException:
            os.unlink(tmp)
            raise


_stores: Dict[Path, PlanStore] = {}
_stores_lock = threading.Lock()


def store_for(directory: Path) -> PlanStore:
    """The process-wide PlanStore of `directory`."""
    directory = Path(directory).resolve()
    with _stores_lock:
        store = _stores.get(directory)
        if store is None:
            store = _stores[directory] = PlanStore(directory)
        return store
