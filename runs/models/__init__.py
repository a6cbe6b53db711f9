"""Models of the runs app."""
from runs.models.budget import BudgetPolicy, ModelPrice
from runs.models.event import Event
from runs.models.event_archive import EventArchive
from runs.models.run import Run, run_id_text
from runs.models.saved_view import SavedView
from runs.models.signal import Signal
from runs.models.snapshot import Snapshot
from runs.models.step import Step
from runs.models.team import Team
from runs.models.worker import WorkerHeartbeat

__all__ = ["BudgetPolicy", "ModelPrice", "Event", "EventArchive", "Run", "SavedView", "Signal", "Snapshot", "Step", "Team", "WorkerHeartbeat", "run_id_text"]
