"""Register AgentOps as a confidential client of this provider (code flow, RS256)."""
from django.core.management.base import BaseCommand
from oauth2_provider.models import Application


class Command(BaseCommand):
    help = "Create or update the OpenID client AgentOps signs in through."

    def add_arguments(self, parser):
        parser.add_argument("client_id")
        parser.add_argument("secret")
        parser.add_argument("--redirect-uri", required=True)
        parser.add_argument("--post-logout-uri", required=True)

    def handle(self, *args, client_id, secret, redirect_uri, post_logout_uri, **opts):
        Application.objects.update_or_create(client_id=client_id, defaults={
            "name": "AgentOps", "client_secret": secret,
            "client_type": Application.CLIENT_CONFIDENTIAL,
            "authorization_grant_type": Application.GRANT_AUTHORIZATION_CODE,
            "redirect_uris": redirect_uri, "post_logout_redirect_uris": post_logout_uri,
            "algorithm": Application.RS256_ALGORITHM, "skip_authorization": True})
        self.stdout.write(f"client {client_id} -> {redirect_uri}")
