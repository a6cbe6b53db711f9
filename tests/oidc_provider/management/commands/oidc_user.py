"""Create a person at this provider, or change their password and groups."""
from django.contrib.auth.models import Group, User
from django.core.management.base import BaseCommand


class Command(BaseCommand):
    help = "Create or update a user; --groups sets exactly these groups."

    def add_arguments(self, parser):
        parser.add_argument("username")
        parser.add_argument("--password")
        parser.add_argument("--email", default="")
        parser.add_argument("--groups", default="", help="comma-separated group names")

    def handle(self, *args, username, password, email, groups, **opts):
        user, _ = User.objects.get_or_create(username=username)
        if password:
            user.set_password(password)
        user.email = email or user.email
        user.save()
        names = [g for g in groups.split(",") if g]
        user.groups.set([Group.objects.get_or_create(name=n)[0] for n in names])
        self.stdout.write(f"{username}: {', '.join(names) or 'no groups'}")
