"""manage.py agentops: worker, sweep, run, follow, doctor, demo, export, import, rotate-keys, createuser."""
from __future__ import annotations

import importlib
import json
from typing import Any

from django.core import checks
from django.core.management.base import BaseCommand, CommandError, CommandParser

from agentops.errors import AgentOpsError
from approvals.apikeys import apikey_create
from approvals.team_members import team_create, team_user_add
from approvals.users import user_create
from ledger.services.rotation import sealed_rotate
from runs.checkpoints import checkpoint_export, checkpoint_import
from runs.cli.exits import exit_code_for
from runs.cli.follow import exceptions_text, run_follow
from runs.cli.malloc_tunables import tcache_off_exec
from runs.cli.worker import AgentModulesBroken, worker_serve
from runs.models import Run, Team
from runs.models.team import DEFAULT_TEAM_SLUG
from runs.services import run_start
from runs.sweeper import sweep_once


def _console_only(module: str) -> Any:
    """Import ``module`` (the doctor's checks, the demo's launcher) when its subcommand runs:
    they bring Redis, the demo's seed and its tools, which a worker host's processes (this
    command's ``worker``) would otherwise all carry."""
    return importlib.import_module(module)


def worker_check_tags() -> list[str]:
    """Return the system check tags a worker host runs: all but those of the web pages.

    A worker host serves no page: the URL checks import every view, the API (ninja) and the
    health checks, and the admin, template and static checks build the template engine,
    which imports every template tag library (and what those import), into the process
    that every q2 process is forked from (docs/workers.md "Memory")."""
    web = {checks.Tags.urls, checks.Tags.templates, checks.Tags.admin, checks.Tags.staticfiles}
    return sorted(t for t in checks.registry.registry.tags_available() if t not in web)


def _people_parsers(sub: Any) -> None:
    """Add the subcommands that make people and teams: createuser, createteam."""
    u = sub.add_parser("createuser", help="create a user with roles (and an API key)")
    u.add_argument("username")
    u.add_argument("--role", action="append", required=True, dest="roles",
                   help="viewers | operators | support | admins (repeatable)")
    u.add_argument("--email", default="")
    u.add_argument("--api-key", action="store_true", help="create an API key; printed once")
    u.add_argument("--key-name", default="cli", help="a label for the key")
    u.add_argument("--existing", action="store_true",
                   help="add the roles (and key) to a user that already exists")
    u.add_argument("--team", default="", help="give the role in this team only (one "
                   "--role); without it the roles hold in every team")
    u.add_argument("--key-team", default="",
                   help="the team the key acts in (default: --team, else the default team; "
                        "its role: the user's highest there)")
    t = sub.add_parser("createteam", help="create a team (then add people with "
                                          "createuser --team)")
    t.add_argument("slug")
    t.add_argument("--name", default="")


class Command(BaseCommand):
    """Start a worker host, sweep once, start and follow a run, or check the configuration."""

    help = ("agentops worker | sweep | run AGENT --goal ... [--input JSON] [--follow] | "
            "follow RUN [--inline] | doctor"
            " | demo [--port N] | export RUN [--seq N] DIR | import DIR | rotate-keys"
            " | createuser NAME --role ROLE [--team SLUG] [--api-key] | createteam SLUG")

    def add_arguments(self, parser: CommandParser) -> None:
        sub = parser.add_subparsers(dest="sub", required=True)
        w = sub.add_parser("worker", help="q2 cluster + sweeper in one process")
        w.add_argument("--workers", type=int, default=None, help="q2 worker processes")
        w.add_argument("--no-sweeper", action="store_true", help="run the q2 cluster only")
        sub.add_parser("sweep", help="one sweep (for cron)")
        r = sub.add_parser("run", help="start a run (and follow it)")
        r.add_argument("agent")
        r.add_argument("--goal", required=True)
        r.add_argument("--input", default="{}", help="JSON object")
        r.add_argument("--follow", action="store_true", help="show progress until it stops")
        r.add_argument("--inline", action="store_true",
                       help="tick the run in this process (no worker needed); implies --follow")
        r.add_argument("--timeout", type=float, default=600.0, help="seconds to follow")
        f = sub.add_parser("follow", help="follow an existing run until it ends or stops")
        f.add_argument("run")
        f.add_argument("--inline", action="store_true", help="tick the run in this process")
        f.add_argument("--timeout", type=float, default=600.0, help="seconds to follow")
        sub.add_parser("doctor", help="check the configuration")
        d = sub.add_parser("demo", help="seed the demo, serve it with a worker; Ctrl-C stops")
        d.add_argument("--port", type=int, default=8000)
        e = sub.add_parser("export", help="write a run's checkpoint files")
        e.add_argument("run")
        e.add_argument("--seq", type=int, default=None)
        e.add_argument("directory")
        i = sub.add_parser("import", help="start a new run from checkpoint files")
        i.add_argument("directory")
        sub.add_parser("rotate-keys", help="re-seal sensitive tool arguments with the newest "
                                           "AGENTOPS_SEAL_KEYS key")
        _people_parsers(sub)

    _check_tags: list[str] | None = None  # None: every system check

    def run_from_argv(self, argv: list[str]) -> None:
        self._called_from_command_line = True
        # A worker host started from the command line (not call_command): glibc's
        # per-thread caches off, before anything else starts (docs/workers.md "Memory").
        if self.create_parser(argv[0], argv[1]).parse_args(argv[2:]).sub == "worker":
            tcache_off_exec()
        super().run_from_argv(argv)

    def execute(self, *args: Any, **options: Any) -> Any:
        if options.get("sub") == "worker":
            self._check_tags = worker_check_tags()
        return super().execute(*args, **options)

    def check(self, *args: Any, tags: list[str] | None = None, **kwargs: Any) -> None:
        super().check(*args, tags=tags or self._check_tags, **kwargs)

    def handle(self, *args, sub: str, **opts) -> None:
        commands = {"worker": self._worker, "sweep": self._sweep, "run": self._run,
                    "follow": self._follow, "doctor": self._doctor, "demo": self._demo,
                    "export": self._export, "import": self._import,
                    "rotate-keys": self._rotate_keys, "createuser": self._createuser,
                    "createteam": self._createteam}
        commands[sub](**opts)

    def _worker(self, *, workers: int | None, no_sweeper: bool, **_) -> None:
        try:
            code = worker_serve(workers=workers, sweeper=not no_sweeper, out=self.stdout)
        except AgentModulesBroken as exc:
            raise CommandError(f"the worker did not start: {exc}") from None
        if code:
            raise CommandError("the worker stopped because q2's sentinel ended while nobody "
                               "stopped it (killed on its own?)", returncode=code)

    def _sweep(self, **_) -> None:
        self.stdout.write(f"swept: {sweep_once().line()}")

    def _run(self, *, agent: str, goal: str, input: str, follow: bool, inline: bool,
             timeout: float, **_) -> None:
        try:
            data = json.loads(input)
        except json.JSONDecodeError as exc:
            raise CommandError(f"--input is not JSON: {exc}") from None
        if not isinstance(data, dict):
            raise CommandError("--input must be a JSON object")
        try:
            run = run_start(agent=agent, goal=goal, input=data, actor="cli", enqueue=not inline)
        except AgentOpsError as exc:
            raise CommandError(exc.message) from None
        where = "running in this process" if inline else "queued"
        self.stdout.write(f"run {run.pk} {where} ({run.agent_name}@{run.agent_version})")
        if follow or inline:
            self._follow_to_end(run_follow(run, out=self.stdout, inline=inline,
                                           timeout_s=timeout))

    def _follow(self, *, run: str, inline: bool, timeout: float, **_) -> None:
        try:
            found = Run.objects.get(pk=run)
        except (Run.DoesNotExist, ValueError):
            raise CommandError(f"no run {run}") from None
        self._follow_to_end(run_follow(found, out=self.stdout, inline=inline,
                                       timeout_s=timeout))

    def _follow_to_end(self, run) -> None:
        """Exit 0 only when the run succeeded cleanly; each other outcome has its own code."""
        code = exit_code_for(run)
        if code == 0:
            return
        if run.status == "completed_with_exceptions":
            self.stdout.write(exceptions_text(run))
            raise CommandError(f"run {run.pk} completed with {len(run.exceptions)} "
                               "exception(s); it is not a clean success", returncode=code)
        why = f": {run.attention_reason}" if run.attention_reason else ""
        detail = f" — {run.attention_detail}" if run.attention_detail else ""
        raise CommandError(f"run {run.pk} is {run.status}{why}{detail}", returncode=code)

    def _doctor(self, **_) -> None:
        checks = _console_only("agentops.doctor").doctor_checks()
        for c in checks:
            self.stdout.write(f"{'ok  ' if c.ok else 'FAIL'} {c.name}: {c.message}")
        failed = [c for c in checks if not c.ok]
        if failed:
            raise CommandError(f"{len(failed)} of {len(checks)} checks failed")

    def _demo(self, *, port: int, **_) -> None:
        if _console_only("agentops.demo.launch").demo_main(port, out=self.stdout) != 0:
            raise CommandError("the demo stopped with an error")

    def _export(self, *, run: str, seq: int | None, directory: str, **_) -> None:
        try:
            path = checkpoint_export(run=Run.objects.get(pk=run), seq=seq, directory=directory)
        except (Run.DoesNotExist, ValueError):
            raise CommandError(f"no run {run}") from None
        except AgentOpsError as exc:
            raise CommandError(exc.message) from None
        self.stdout.write(f"exported {run} to {path}")

    def _createuser(self, *, username: str, roles: list[str], email: str, api_key: bool,
                    key_name: str, existing: bool, team: str,
                    key_team: str, **_) -> None:
        if team and len(set(roles)) != 1:
            raise CommandError("with --team give exactly one --role: a person holds one "
                               "role in a team")
        try:
            user, created = team_user_add(
                username=username, team_slug=team, role=roles[0], email=email,
                existing=existing) if team else user_create(
                username=username, roles=roles, email=email, existing=existing)
        except AgentOpsError as exc:
            raise CommandError(exc.message) from None
        verb = "created" if created else "updated"
        where = f" in team {team} only" if team else " in every team"
        self.stdout.write(f"user {username} {verb} with roles: "
                          f"{', '.join(sorted(set(roles)))}{where}")
        if created:
            self.stdout.write(f"  console password: `manage.py changepassword {username}`")
        if api_key:
            key_team = key_team or team or DEFAULT_TEAM_SLUG
            team = Team.objects.filter(slug=key_team).first()
            if team is None:
                raise CommandError(f"no team {key_team!r}")
            try:
                key, raw = apikey_create(user=user, name=key_name, team=team)
            except AgentOpsError as exc:
                raise CommandError(exc.message) from None
            self.stdout.write(f"API key {key.prefix}… for team {team.slug} as {key.role} "
                              "(shown only this once; store it now):")
            self.stdout.write(raw)
            self.stdout.write("  use it as: Authorization: Bearer <key>")

    def _createteam(self, *, slug: str, name: str, **_) -> None:
        try:
            team = team_create(actor="cli", slug=slug, name=name, from_shell=True)
        except AgentOpsError as exc:
            raise CommandError(exc.message) from None
        self.stdout.write(f"team {team.slug} ({team.name}) created; add people with "
                          f"`manage.py agentops createuser NAME --role operators --team "
                          f"{team.slug}`")

    def _import(self, *, directory: str, **_) -> None:
        try:
            new = checkpoint_import(directory=directory, actor="cli")
        except AgentOpsError as exc:
            # One line, whatever the input was: the message may quote file content.
            raise CommandError(" ".join(exc.message.split())) from None
        self.stdout.write(f"imported as run {new.pk} (queued)")

    def _rotate_keys(self, **_) -> None:
        report = sealed_rotate()
        self.stdout.write(report.line())
        if report.unreadable:
            raise CommandError(f"{len(report.unreadable)} sealed value(s) could not be opened; "
                               "put the key that sealed them back in AGENTOPS_SEAL_KEYS")
