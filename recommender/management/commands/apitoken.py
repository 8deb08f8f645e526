"""Create, list and revoke REST API tokens from the command line.

manage.py apitoken create --name ci --scope read [--user alice]
manage.py apitoken list [--all]
manage.py apitoken revoke --name ci        (or --id 7)
"""

from __future__ import annotations

from typing import Any

from django.contrib.auth import get_user_model
from django.core.management.base import BaseCommand, CommandError, CommandParser
from django.utils import timezone

from recommender.errors import VpawebError
from recommender.models import ApiToken
from recommender.services.access.tokens import create_token, revoke_token

ACTOR_LABEL = "manage.py apitoken"


class Command(BaseCommand):
    help = "Create, list and revoke REST API tokens (read or write scope)."

    def add_arguments(self, parser: CommandParser) -> None:
        sub = parser.add_subparsers(dest="action", required=True)
        create = sub.add_parser("create", help="create a token and print its key once")
        create.add_argument(
            "--name", required=True, help="what the token is for, e.g. ci"
        )
        create.add_argument(
            "--scope", choices=ApiToken.Scope.values, default=ApiToken.Scope.READ
        )
        create.add_argument(
            "--user", help="user the token acts for in the audit log (optional)"
        )
        listing = sub.add_parser("list", help="list active tokens (never their keys)")
        listing.add_argument(
            "--all", action="store_true", help="include revoked tokens"
        )
        revoke = sub.add_parser("revoke", help="revoke a token at once")
        which = revoke.add_mutually_exclusive_group(required=True)
        which.add_argument("--name", help="the active token with this name")
        which.add_argument("--id", type=int, help="the token with this id")

    def handle(self, *args: Any, **options: Any) -> None:
        try:
            getattr(self, f"_{options['action']}")(options)
        except VpawebError as exc:
            raise CommandError(exc.message) from None

    def _create(self, options: dict[str, Any]) -> None:
        user = None
        if options["user"]:
            user = get_user_model().objects.filter(username=options["user"]).first()
            if user is None:
                raise CommandError(f"no user named {options['user']!r}")
        token, key = create_token(
            name=options["name"],
            scope=options["scope"],
            created_by=user,
            actor_label=ACTOR_LABEL if user is None else None,
            now=timezone.now(),
        )
        self.stderr.write(
            f"Created {token.scope} token {token.name!r} (id {token.pk}). "
            "Store the key now: it is never shown again."
        )
        self.stdout.write(key)

    def _list(self, options: dict[str, Any]) -> None:
        tokens = ApiToken.objects.select_related("created_by").order_by(
            "name", "-created_at"
        )
        if not options["all"]:
            tokens = tokens.filter(revoked_at__isnull=True)
        self.stdout.write(
            f"{'id':>5}  {'name':<24} {'scope':<6} {'prefix':<13} "
            f"{'last used':<20} state"
        )
        for token in tokens:
            used = (
                f"{token.last_used_at:%Y-%m-%d %H:%M}"
                if token.last_used_at
                else "never"
            )
            state = (
                "active" if token.is_active else f"revoked {token.revoked_at:%Y-%m-%d}"
            )
            self.stdout.write(
                f"{token.pk:>5}  {token.name:<24} {token.scope:<6} "
                f"{token.key_prefix + '…':<13} "
                f"{used:<20} {state}"
            )

    def _revoke(self, options: dict[str, Any]) -> None:
        if options["id"] is not None:
            token_id = options["id"]
        else:
            token = ApiToken.objects.filter(
                name=options["name"], revoked_at__isnull=True
            ).first()
            if token is None:
                raise CommandError(f"no active token named {options['name']!r}")
            token_id = token.pk
        token = revoke_token(
            token_id=token_id,
            revoked_by=None,
            actor_label=ACTOR_LABEL,
            now=timezone.now(),
        )
        self.stdout.write(f"Revoked token {token.name!r} (id {token.pk}).")
