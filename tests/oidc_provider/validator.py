"""The provider's claims: the user's names, email, and their Django groups as "groups"."""
from oauth2_provider.oauth2_validators import OAuth2Validator


class GroupsValidator(OAuth2Validator):
    """Add preferred_username, email and groups to the ID token and userinfo."""

    oidc_claim_scope = {**OAuth2Validator.oidc_claim_scope, "groups": "profile"}

    def get_additional_claims(self, request):
        """The claims AgentOps reads: who the person is and which groups they are in."""
        user = request.user
        return {"preferred_username": user.username, "email": user.email,
                "given_name": user.first_name, "family_name": user.last_name,
                "groups": sorted(user.groups.values_list("name", flat=True))}
