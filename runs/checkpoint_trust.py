"""What makes a checkpoint directory trustworthy: a signature, bounded sizes, no symlinks.

meta.json carries ``signature = "hmac-sha256:<key id>:<hex>"``, an HMAC-SHA256 over the
canonical JSON of meta.json without the signature; meta.json holds the sha256 of every other
file, so the signature covers them all. The first of ``AGENTOPS_CHECKPOINT_KEYS`` signs and
every one verifies (rotation); without configured keys a key derived from SECRET_KEY (and
SECRET_KEY_FALLBACKS) is used, which only lets an installation re-import its own exports.

Files are opened without following symbolic links, must be regular files, and are refused
from their size (``AGENTOPS_CHECKPOINT_MAX_BYTES``) before a byte is read.
"""
from __future__ import annotations

import errno
import hashlib
import hmac
import json
import os
import stat
from pathlib import Path
from typing import Any

from django.conf import settings

from agentops.errors import InvalidInput
from agentops.jsonstate import canonical_json
from runs.errors import RunError

_SCHEME = "hmac-sha256"


class CheckpointRejected(InvalidInput, RunError):
    """A checkpoint directory cannot be written or read; the message says why."""

    code = "checkpoint_rejected"


def _keys() -> list[bytes]:
    configured = [k.encode() for k in getattr(settings, "AGENTOPS_CHECKPOINT_KEYS", ()) or () if k]
    if configured:
        return configured
    secrets = [settings.SECRET_KEY, *(getattr(settings, "SECRET_KEY_FALLBACKS", ()) or ())]
    return [hmac.new(s.encode(), b"agentops-checkpoint-signing", hashlib.sha256).digest()
            for s in secrets]


def _key_id(key: bytes) -> str:
    return hashlib.sha256(b"agentops-checkpoint-key-id:" + key).hexdigest()[:8]


def _mac(key: bytes, body: dict[str, Any]) -> str:
    return hmac.new(key, canonical_json(body).encode(), hashlib.sha256).hexdigest()


def meta_sign(meta: dict[str, Any]) -> dict[str, Any]:
    """Return ``meta`` with its signature made with the newest checkpoint key."""
    body = {k: v for k, v in meta.items() if k != "signature"}
    key = _keys()[0]
    return {**body, "signature": f"{_SCHEME}:{_key_id(key)}:{_mac(key, body)}"}


def meta_verify(meta: dict[str, Any]) -> None:
    """Raise CheckpointRejected unless a configured key made ``meta``'s signature."""
    signature = meta.get("signature")
    if not isinstance(signature, str) or signature.count(":") != 2:
        raise CheckpointRejected("meta.json is not signed: only checkpoints exported by an "
                                 "installation holding a checkpoint key can be imported")
    scheme, _, mac = signature.split(":")
    if scheme != _SCHEME:
        raise CheckpointRejected(f"meta.json is signed with {scheme[:40]!r}; only {_SCHEME} "
                                 "is accepted")
    body = {k: v for k, v in meta.items() if k != "signature"}
    if not any(hmac.compare_digest(_mac(key, body), mac) for key in _keys()):
        raise CheckpointRejected("meta.json's signature does not verify with any checkpoint "
                                 "key: it was changed, forged, or exported with another key")


def directory_check(directory: Path) -> None:
    """Raise CheckpointRejected unless ``directory`` is a real directory (not a symlink)."""
    try:
        st = os.lstat(directory)
    except FileNotFoundError:
        raise CheckpointRejected(f"{directory} does not exist") from None
    except OSError as exc:
        raise CheckpointRejected(f"{directory} cannot be read: {exc.strerror}") from None
    if stat.S_ISLNK(st.st_mode):
        raise CheckpointRejected(f"{directory} is a symbolic link; give the directory itself")
    if not stat.S_ISDIR(st.st_mode):
        raise CheckpointRejected(f"{directory} is not a directory")


def file_read(directory: Path, name: str) -> bytes:
    """Return the bytes of ``directory/name``: a regular file, not a link, under the size cap."""
    cap = int(getattr(settings, "AGENTOPS_CHECKPOINT_MAX_BYTES", 64 << 20))
    try:
        fd = os.open(directory / name, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK)
    except FileNotFoundError:
        raise CheckpointRejected(f"{name} is missing from {directory}") from None
    except OSError as exc:
        if exc.errno == errno.ELOOP:
            raise CheckpointRejected(f"{name} is a symbolic link; checkpoint files must be "
                                     "regular files") from None
        raise CheckpointRejected(f"{name} cannot be read: {exc.strerror}") from None
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            raise CheckpointRejected(f"{name} is not a regular file")
        if st.st_size > cap:
            raise CheckpointRejected(f"{name} is {st.st_size} bytes, over the limit of {cap} "
                                     "(AGENTOPS_CHECKPOINT_MAX_BYTES)")
        with os.fdopen(fd, "rb", closefd=False) as fh:
            data = fh.read(min(st.st_size, cap) + 1)  # read() allocates what it is asked for
    finally:
        os.close(fd)
    if len(data) > cap:
        raise CheckpointRejected(f"{name} is over the limit of {cap} bytes "
                                 "(AGENTOPS_CHECKPOINT_MAX_BYTES)")
    return data


def json_parse(name: str, data: bytes) -> Any:
    """Return the JSON in ``data``; raise CheckpointRejected naming ``name`` if it is not JSON."""
    try:
        return json.loads(data)
    except (json.JSONDecodeError, UnicodeDecodeError, RecursionError):
        raise CheckpointRejected(f"{name} is not valid JSON") from None


_META_TYPES = {"schema_version": int, "state_schema": int, "run_id": str, "agent": str,
               "agent_version": str, "goal": str, "seq": int, "files": dict, "budget": dict,
               "exported_at": str}


def meta_shape_check(meta: dict[str, Any]) -> None:
    """Raise CheckpointRejected naming the first field of meta.json that is missing or wrong."""
    for name, kind in _META_TYPES.items():
        value = meta.get(name)
        if not isinstance(value, kind) or isinstance(value, bool):
            raise CheckpointRejected(f"meta.json: {name} is missing or not a {kind.__name__}")
    if not all(isinstance(v, str) for v in meta["files"].values()):
        raise CheckpointRejected("meta.json: files must map file names to sha256 strings")
