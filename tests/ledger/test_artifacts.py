"""The artifact store: content addressed, verified on read."""
import io

import pytest
from django.core.files.storage import storages

from ledger.artifacts import artifact_put, artifact_put_file, artifact_read, artifact_verify
from ledger.errors import ArtifactCorrupted, ArtifactMissing
from ledger.models import Artifact


def test_same_bytes_are_stored_once(db):
    a = artifact_put(b"hello")
    b = artifact_put(b"hello")
    assert a == b and Artifact.objects.count() == 1
    assert artifact_read(a) == b"hello"


def test_file_put_streams_and_matches_bytes_put(db):
    sha = artifact_put_file(io.BytesIO(b"x" * 3_000_000))
    assert sha == artifact_put(b"x" * 3_000_000)
    assert Artifact.objects.get(pk=sha).size == 3_000_000


def test_corrupted_artifact_is_an_error_never_returned(db):
    sha = artifact_put(b"the report")
    path = f"{sha[:2]}/{sha[2:4]}/{sha}"
    with open(storages["artifacts"].path(path), "wb") as fh:
        fh.write(b"tampered")
    with pytest.raises(ArtifactCorrupted):
        artifact_read(sha)
    with pytest.raises(ArtifactCorrupted):
        artifact_verify(sha)


def test_missing_artifact_is_named(db):
    with pytest.raises(ArtifactMissing):
        artifact_read("0" * 64)
