"""The artifact store: content-addressed bytes on Django's storage API, verified on read."""
from __future__ import annotations

import hashlib
import tempfile
from typing import IO

from django.core.files.base import ContentFile, File
from django.core.files.storage import storages
from django.db import IntegrityError, transaction

from agentops.redaction import EMPTY, Secrets, scrub_stream
from ledger.errors import ArtifactCorrupted, ArtifactMissing
from ledger.models import Artifact

_CHUNK = 1 << 20


def _storage():
    return storages["artifacts"]


def _path(sha256: str) -> str:
    return f"{sha256[:2]}/{sha256[2:4]}/{sha256}"


def artifact_put(data: bytes, *, content_type: str = "application/octet-stream",
                 secrets: Secrets = EMPTY) -> str:
    """Store ``data`` scrubbed of ``secrets`` (once per content) and return its sha256."""
    data = secrets.scrub_bytes(data) if secrets else data
    sha = hashlib.sha256(data).hexdigest()
    return _save(sha, ContentFile(data), len(data), content_type)


def artifact_put_file(fh: IO[bytes], *, content_type: str = "application/octet-stream",
                      secrets: Secrets = EMPTY) -> str:
    """Store a file's bytes scrubbed of ``secrets``, in chunks (never all in memory)."""
    if secrets:
        with tempfile.TemporaryFile() as clean:
            scrub_stream(fh, clean, secrets, chunk=_CHUNK)
            return artifact_put_file(clean, content_type=content_type)
    digest, size = hashlib.sha256(), 0
    fh.seek(0)
    for chunk in iter(lambda: fh.read(_CHUNK), b""):
        digest.update(chunk)
        size += len(chunk)
    fh.seek(0)
    return _save(digest.hexdigest(), File(fh), size, content_type)


def _save(sha: str, content: File, size: int, content_type: str) -> str:
    storage, path = _storage(), _path(sha)
    if not storage.exists(path):
        storage.save(path, content)
    try:
        with transaction.atomic():
            Artifact.objects.create(sha256=sha, size=size, content_type=content_type)
    except IntegrityError:
        pass  # the same content was stored before: content addressing makes this a no-op
    return sha



def artifact_read(sha256: str) -> bytes:
    """Return an artifact's bytes; raise ArtifactCorrupted when they do not match the hash."""
    try:
        with _storage().open(_path(sha256), "rb") as fh:
            data = fh.read()
    except FileNotFoundError as exc:
        raise ArtifactMissing(f"artifact {sha256} is not stored", sha256=sha256) from exc
    if hashlib.sha256(data).hexdigest() != sha256:
        raise ArtifactCorrupted(f"artifact {sha256} failed its checksum", sha256=sha256)
    return data


def artifact_verify(sha256: str) -> None:
    """Raise ArtifactMissing/ArtifactCorrupted unless the stored bytes hash to ``sha256``."""
    digest = hashlib.sha256()
    try:
        with _storage().open(_path(sha256), "rb") as fh:
            for chunk in iter(lambda: fh.read(_CHUNK), b""):
                digest.update(chunk)
    except FileNotFoundError as exc:
        raise ArtifactMissing(f"artifact {sha256} is not stored", sha256=sha256) from exc
    if digest.hexdigest() != sha256:
        raise ArtifactCorrupted(f"artifact {sha256} failed its checksum", sha256=sha256)


def artifact_page(sha256: str, start: int, length: int) -> tuple[bytes, int]:
    """Return (the bytes in [start, start + length), the artifact's size), verified first.

    The whole artifact is hashed in chunks (never held in memory) before any of it is read.
    """
    artifact_verify(sha256)
    with _storage().open(_path(sha256), "rb") as fh:
        size = fh.seek(0, 2)
        if start >= size:  # past the end (a model may ask for page 10**15): nothing, no seek
            return b"", size
        fh.seek(max(start, 0))
        return fh.read(max(length, 0)), size
