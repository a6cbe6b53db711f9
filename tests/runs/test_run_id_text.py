"""runs.models.run.run_id_text: a run's id as text, made once per instance."""
import uuid

import pytest

from runs.models import Run, run_id_text


@pytest.mark.django_db
def test_the_text_is_the_id_and_follows_a_changed_id():
    """What the engine writes into a unit is str(run.pk), even after the id is changed."""
    run = Run(id=uuid.uuid4())
    assert run_id_text(run) == str(run.pk)
    assert run_id_text(run) is run_id_text(run)  # made once
    run.pk = uuid.uuid4()
    assert run_id_text(run) == str(run.pk)
