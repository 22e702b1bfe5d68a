"""What ``appliance config check`` does."""

from __future__ import annotations

import json

import click

from appliance.config import Settings
from appliance.provider_kinds import masked


def print_config(settings: Settings) -> None:
    """The effective settings (defaults < file < environment < flags), secrets masked."""
    click.echo(json.dumps(masked(settings), indent=2, sort_keys=False))
