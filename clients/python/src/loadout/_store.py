"""The last-known-good copies on disk: one JSON file per cache key, written atomically (a
temporary file in the same directory, fsynced, then renamed over the old one) on every fresh
answer, read when loadout cannot be reached. A file holds the key (with the API key's
identity hash, never the key), the ETag and the body as loadout sent it."""

from __future__ import annotations

import hashlib
import json
import os
import tempfile
import time
from typing import Any

FORMAT = 1


class DiskStore:
    def __init__(self, directory: str | os.PathLike[str]) -> None:
        self.directory = os.fspath(directory)
        # The copies hold users' instructions: readable by this user only.
        os.makedirs(self.directory, mode=0o700, exist_ok=True)

    def _path(self, key: tuple[Any, ...]) -> str:
        digest = hashlib.sha256(json.dumps(list(key)).encode()).hexdigest()
        return os.path.join(self.directory, f"{digest[:40]}.json")

    def write(self, key: tuple[Any, ...], etag: str | None, body: bytes) -> None:
        record = {"format": FORMAT, "key": list(key), "etag": etag, "saved_at": time.time(),
                  "body": body.decode("utf-8")}
        fd, tmp = tempfile.mkstemp(dir=self.directory, prefix=".tmp-", suffix=".json")
        try:
            with os.fdopen(fd, "w", encoding="utf-8") as f:
                json.dump(record, f)
                f.flush()
                os.fsync(f.fileno())
            os.replace(tmp, self._path(key))
        except BaseException:
            try:
                os.unlink(tmp)
            except OSError:
                pass
            raise

    def read(self, key: tuple[Any, ...]) -> tuple[str | None, bytes] | None:
        try:
            with open(self._path(key), encoding="utf-8") as f:
                record = json.load(f)
        except (OSError, ValueError):
            return None
        if not isinstance(record, dict) or record.get("format") != FORMAT or record.get("key") != list(key):
            return None
        return record.get("etag"), record["body"].encode("utf-8")

    def delete(self, key: tuple[Any, ...]) -> None:
        try:
            os.unlink(self._path(key))
        except FileNotFoundError:
            pass
