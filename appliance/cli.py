"""The ``appliance`` command line: one click group over one app object."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any, ClassVar

import click

from appliance import __version__
from appliance.config import ConfigError, Settings
from appliance.offline import OfflineAppliance
from appliance.store.lock import DataDirLocked
from appliance.store.schema import SchemaTooNew

CONTEXT = {"help_option_names": ["-h", "--help"], "max_content_width": 100}


def data_dir_option(fn: Any) -> Any:
    fn = click.option("--config", "config_file", type=click.Path(dir_okay=False),
                      help="TOML config file (env APPLIANCE_CONFIG).")(fn)
    return click.option("--data-dir", type=click.Path(), default=None,
                        help="Data directory (default ./data, env APPLIANCE_DATA_DIR).")(fn)


class ConfigProblem(click.ClickException):
    """A configuration error: one line on stderr, exit status 2."""

    exit_code = 2


def settings_from(data_dir: str | None, config_file: str | None, **flags: Any) -> Settings:
    # The provider kinds are imported with the settings, not for ``--help``.
    from appliance.provider_kinds import load_settings

    try:
        return load_settings(config_file, overrides={"data_dir": data_dir, **flags})
    except ConfigError as exc:
        raise ConfigProblem(f"config: {exc}") from None


def providers_checked(settings: Settings) -> Settings:
    """``settings``, once every provider's adapter builds and no provider limit is
    exceeded (the callback URL's length, ...); exit 2 with one line otherwise."""
    from appliance.provider_kinds import check_providers

    try:
        check_providers(settings)
    except ConfigError as exc:
        raise ConfigProblem(f"config: {exc}") from None
    return settings


def fail(message: str) -> None:
    raise click.ClickException(message)


class Commands(click.Group):
    """The commands, with the two that bring a provider simulator (``demo`` and
    ``simulator``) imported only when one of them runs or ``--help`` lists them: every
    other command starts without loading the simulators. ``proxy-config`` is loaded the
    same way, being needed once per installation."""

    LAZY: ClassVar[dict[str, tuple[str, str]]] = {
        "demo": ("appliance.demo", "demo_command"),
        "proxy-config": ("appliance.proxy.command", "proxy_config_command"),
        "simulator": ("appliance.simulator.command", "simulator_command"),
    }

    def list_commands(self, ctx: click.Context) -> list[str]:
        return sorted([*super().list_commands(ctx), *self.LAZY])

    def get_command(self, ctx: click.Context, cmd_name: str) -> click.Command | None:
        if cmd_name in self.LAZY:
            import importlib

            module, name = self.LAZY[cmd_name]
            command: click.Command = getattr(importlib.import_module(module), name)
            return command
        return super().get_command(ctx, cmd_name)


@click.group(cls=Commands, context_settings=CONTEXT)
@click.version_option(__version__, "--version", prog_name="appliance")
def main() -> None:
    """A bulk-messaging appliance: one executable over one SQLite file (or, with
    database_url, a PostgreSQL database that several serve processes share)."""


@main.command()
@data_dir_option
@click.option("--host", default=None, help="Address to listen on (default 127.0.0.1).")
@click.option("--port", type=int, default=None, help="Port to listen on (default 8080).")
def serve(data_dir: str | None, config_file: str | None, host: str | None,
          port: int | None) -> None:
    """Run everything: HTTP endpoints and the scheduler. Once it listens, logs a warning
    when no provider is configured (every send would be refused 422 no_provider)."""
    from appliance.failed_start import nothing_left_on_failure
    from appliance.server import run_server

    settings = providers_checked(settings_from(data_dir, config_file, host=host, port=port))
    with nothing_left_on_failure(settings.data_dir):
        run_guarded(lambda: run_server(settings))
    exit_now(0)


def exit_now(code: int) -> None:
    """End the process without the interpreter's teardown. Only after a clean stop:
    everything is on disk and closed by then, and tearing down every module and object
    of a long-running server takes a fifth of a second for nothing."""
    import logging
    import os

    logging.shutdown()
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(code)


def run_guarded(fn: Any) -> None:
    from appliance.store.errors import STORE_ERRORS, NotAnApplianceDatabase
    from appliance.web.listener import PortInUse

    try:
        fn()
    except ConfigError as exc:
        raise ConfigProblem(f"config: {exc}") from None
    except (DataDirLocked, SchemaTooNew, PortInUse, NotAnApplianceDatabase) as exc:
        fail(str(exc))
    except STORE_ERRORS as exc:  # the database cannot be reached or opened at start
        fail(f"the database: {exc}")


@main.command()
@data_dir_option
@click.argument("dest", type=click.Path(dir_okay=False))
@click.option("--force", is_flag=True,
              help="Replace DEST even when it is not one of our backups (one of ours, with"
              " its manifest beside it, is replaced without it).")
def backup(data_dir: str | None, config_file: str | None, dest: str, force: bool) -> None:
    """Write a verified copy of the database to DEST; works while serve runs.

    An existing DEST is replaced when it is one of our backups (DEST.manifest.json beside
    it), else refused without --force. SQLite only: with database_url set, backups are
    PostgreSQL's own (pg_dump, base backups with WAL archiving; see docs/operations.md)."""
    from appliance.ops.commands.backup import run_backup

    run_backup(settings_from(data_dir, config_file), Path(dest), force)


@main.command()
@data_dir_option
@click.argument("src", type=click.Path(dir_okay=False))
def restore(data_dir: str | None, config_file: str | None, src: str) -> None:
    """Restore the backup SRC into the data dir (the server must be stopped).

    SQLite only: refused with database_url set (pg_restore restores PostgreSQL)."""
    from appliance.ops.commands.backup import run_restore

    run_restore(settings_from(data_dir, config_file), Path(src))


@main.command()
@data_dir_option
@click.option("--to", "to_url", required=True, metavar="URL",
              help="An empty PostgreSQL database: postgresql://user:password@host:5432/db.")
def migrate(data_dir: str | None, config_file: str | None, to_url: str) -> None:
    """Copy the data dir's SQLite database into an empty PostgreSQL database, verified by
    row counts (the server must be stopped)."""
    from appliance.ops.commands.migrate import run_migrate

    run_migrate(settings_from(data_dir, config_file), to_url)


@main.group("config")
def config_group() -> None:
    """The configuration (file, environment, flags)."""


@config_group.command("check")
@data_dir_option
def config_check(data_dir: str | None, config_file: str | None) -> None:
    """Validate the config and the providers' limits (a [[routes]] provider that is not
    configured is refused); print the effective settings, [[routes]] as "routes", with
    secrets masked. Warns on stderr when no provider is configured (nothing could be
    sent) or one that signs nothing has no callback_token; prints on stderr the URL to
    enter in such a provider's panel."""
    from appliance.ops.commands.config import print_config
    from appliance.provider_kinds import KINDS
    from appliance.providers.callback_token import panel_urls, token_warnings
    from appliance.start_warnings import start_warnings

    settings = providers_checked(settings_from(data_dir, config_file))
    print_config(settings)
    for warning in [*start_warnings(settings), *token_warnings(settings, KINDS)]:
        click.echo(f"warning: {warning}", err=True)
    for line in panel_urls(settings, KINDS):
        click.echo(line, err=True)


@main.group()
def account() -> None:
    """Accounts (each made with its first API key; more with 'appliance key')."""


@account.command("create")
@data_dir_option
@click.argument("name")
def account_create(data_dir: str | None, config_file: str | None, name: str) -> None:
    """Create an account; prints its API key as the last line."""
    from appliance.accounts import AccountExists, create_account

    settings = settings_from(data_dir, config_file)
    with OfflineAppliance(settings) as appliance:
        try:
            acct, key = appliance.store.writer.call(
                lambda c: create_account(c, name, appliance.now_ms()))
        except (AccountExists, ValueError) as exc:
            fail(str(exc))
            return
    click.echo(f"account {acct.name} created (id {acct.id}); its API key, shown only once:",
               err=True)
    click.echo(key)


@account.command("webhook")
@data_dir_option
@click.argument("name")
@click.option("--url", default=None, help="Where the account's events are POSTed (http/https).")
@click.option("--secret", default=None, help="Signs them (asked for, hidden, when not given).")
@click.option("--clear", is_flag=True, help="Remove it: events go to [webhooks] again.")
def account_webhook(data_dir: str | None, config_file: str | None, name: str,
                    url: str | None, secret: str | None, clear: bool) -> None:
    """Give account NAME its own status webhook receiver: its events (message.status,
    inbound.received) go only there, signed with its secret; without one, [webhooks]."""
    from appliance.webhooks.command import ReceiverRefused, check_arguments, run_account_webhook

    def ask() -> str:
        return str(click.prompt("Secret", hide_input=True, confirmation_prompt=True))

    try:
        check_arguments(url, secret, clear)
        with OfflineAppliance(settings_from(data_dir, config_file)) as appliance:
            click.echo(run_account_webhook(appliance, name, url, secret, clear, ask))
    except ReceiverRefused as exc:
        fail(str(exc))


@main.group()
def user() -> None:
    """Console users (sign-ins for the web console)."""


@user.command("create")
@data_dir_option
@click.argument("name")
@click.option("--password", default=None, help="The password (asked for when not given).")
@click.option("--account", "account_name", default=None,
              help="The account the user works in, created if missing (default: the only"
              " account there is; 'default', created, when there is none; with several,"
              " name one).")
def user_create(data_dir: str | None, config_file: str | None, name: str,
                password: str | None, account_name: str | None) -> None:
    """Create a console user, who signs in to the web console."""
    from appliance.accounts import AccountChoice, account_for_user
    from appliance.users import (
        UserExists,
        check_name,
        check_password,
        create_user,
        hash_password,
    )

    settings = settings_from(data_dir, config_file)
    if account_name is not None:
        account_name = account_name.strip()
        if not account_name or len(account_name) > 100:
            fail("account names are 1 to 100 characters")
    try:
        check_name(name)
        if password is None:
            password = click.prompt("Password", hide_input=True, confirmation_prompt=True)
        check_password(password)
    except ValueError as exc:
        fail(str(exc))
        return
    hashed = hash_password(password)
    with OfflineAppliance(settings) as appliance:
        now = appliance.now_ms()

        def unit(conn: Any) -> Any:
            acct = account_for_user(conn, account_name, now)
            return create_user(conn, name, hashed, acct.id, now)

        try:
            made = appliance.store.writer.call(unit)
        except (AccountChoice, UserExists, ValueError) as exc:
            fail(str(exc))
            return
    click.echo(f"user {made.name} created in account {made.account_name}")


@main.command("import")
@data_dir_option
@click.argument("file", required=False,
                type=click.Path(exists=True, dir_okay=False, allow_dash=True))
@click.option("--list", "list_name", default=None,
              help="The list to import into (with --rerun: default the job's own list).")
@click.option("--region", default=None, help="Default country for numbers without one (e.g. TR).")
@click.option("--account", "account_name", default=None,
              help="The account that owns the list (default: the only account there is).")
@click.option("--key", "api_key", default=None,
              help="Act for the account of this API key instead of naming it.")
@click.option("--rerun", "rerun_of", type=click.IntRange(1), default=None, metavar="JOB",
              help="Parse job JOB's stored payload again as a new job (no FILE).")
@click.option("--rejects", "rejects_of", type=click.IntRange(1), default=None, metavar="JOB",
              help="Print job JOB's rejected lines as CSV on stdout (line_number, line,"
              " reason), and nothing else.")
def import_command(data_dir: str | None, config_file: str | None, file: str | None,
                   list_name: str | None, region: str | None, account_name: str | None,
                   api_key: str | None, rerun_of: int | None, rejects_of: int | None) -> None:
    """Queue an import of FILE (or re-run job JOB) and show its progress until it is done;
    or print a job's rejected lines (--rejects JOB).

    With one account it is used; with several, choose with --account or --key.
    """
    from appliance.imports.cli_import import run_import, run_rejects, run_rerun

    settings = settings_from(data_dir, config_file)
    if rejects_of is not None:
        if file is not None or rerun_of is not None or list_name is not None \
                or region is not None:
            fail("--rejects JOB takes no FILE, --rerun, --list or --region")
        sys.exit(run_rejects(settings, rejects_of, account_name, api_key))
    if rerun_of is not None:
        if file is not None or region is not None:
            fail("--rerun takes no FILE and no --region: it reads the job's stored payload"
                 " with the job's region")
        sys.exit(run_rerun(settings, rerun_of, list_name, account_name, api_key))
    if file is None or list_name is None:
        fail("give the FILE to import and --list NAME (or --rerun JOB)")
        return
    data = sys.stdin.buffer.read() if file == "-" else Path(file).read_bytes()
    source = "stdin" if file == "-" else f"the file {file}"
    sys.exit(run_import(settings, data, list_name, region, account_name, api_key, source))


@main.group("key")
def key_group() -> None:
    """API keys: create (shown once), list, revoke (refused from the next request on)."""


def _account_for(appliance: Any, account_name: str | None) -> Any:
    from appliance.accounts import AccountChoice, choose_account

    try:
        return appliance.store.readers.call(lambda c: choose_account(c, account_name))
    except AccountChoice as exc:
        fail(str(exc))


@key_group.command("create")
@data_dir_option
@click.option("--account", "account_name", default=None,
              help="The account (default: the only account there is).")
@click.option("--rate-per-s", type=click.FloatRange(min=0, min_open=True), default=None,
              help="Requests a second that create messages or campaigns (per process).")
@click.option("--daily-limit", type=click.IntRange(min=1), default=None,
              help="Messages a UTC day, a campaign's included.")
def key_create(data_dir: str | None, config_file: str | None, account_name: str | None,
               rate_per_s: float | None, daily_limit: int | None) -> None:
    """Make a new API key; prints it as the last line (it is shown only this once).

    Past --rate-per-s or --daily-limit its requests are refused 429 with Retry-After;
    without them the key is unlimited."""
    from appliance.accounts import SHOWN_PREFIX, add_key

    with OfflineAppliance(settings_from(data_dir, config_file)) as appliance:
        account = _account_for(appliance, account_name)
        key = appliance.store.writer.call(lambda c: add_key(
            c, account.id, appliance.now_ms(), rate_per_s=rate_per_s, daily_limit=daily_limit))
    click.echo(f"new API key {key[:SHOWN_PREFIX]}… for account {account.name}; shown only once:",
               err=True)
    click.echo(key)


@key_group.command("list")
@data_dir_option
@click.option("--account", "account_name", default=None,
              help="The account (default: the only account there is).")
def key_list(data_dir: str | None, config_file: str | None, account_name: str | None) -> None:
    """List the account's keys: prefix, created, active or revoked, limits."""
    from appliance.accounts import list_keys
    from appliance.clock import iso

    with OfflineAppliance(settings_from(data_dir, config_file)) as appliance:
        account = _account_for(appliance, account_name)
        keys = appliance.store.readers.call(lambda c: list_keys(c, account.id))
    click.echo(f"{'prefix':<12} {'created (UTC)':<20} state", err=True)
    for k in keys:
        state = "active" if k.active else f"revoked {iso(k.revoked_at)}"
        limits = "".join([f", {k.rate_per_s:g} a second" if k.rate_per_s else "",
                          f", {k.daily_limit} a day" if k.daily_limit else ""])
        click.echo(f"{k.prefix + '…':<12} {str(iso(k.created_at))[:19]:<20} {state}{limits}")
    if not keys:
        click.echo(f"account {account.name} has no keys", err=True)


@key_group.command("revoke")
@data_dir_option
@click.argument("prefix")
@click.option("--account", "account_name", default=None,
              help="Only look at this account's keys.")
def key_revoke(data_dir: str | None, config_file: str | None, prefix: str,
               account_name: str | None) -> None:
    """Revoke the key starting with PREFIX (or the whole key); refused from the next request.

    PREFIX as 'appliance key list' shows it (its ellipsis may stay), or longer: the 8
    characters kept in clear are compared."""
    from appliance.accounts import KeyChoice, find_key, revoke_key

    with OfflineAppliance(settings_from(data_dir, config_file)) as appliance:
        account_id = None if account_name is None else _account_for(appliance, account_name).id
        try:
            found = appliance.store.readers.call(lambda c: find_key(c, prefix, account_id))
        except KeyChoice as exc:
            fail(str(exc))
            return
        done = appliance.store.writer.call(lambda c: revoke_key(c, found.id, appliance.now_ms()))
    if not done:
        fail(f"key {found.prefix}… of account {found.account_name} was already revoked")
    click.echo(f"revoked key {found.prefix}… of account {found.account_name}")


@main.command()
@data_dir_option
@click.option("--json", "as_json", is_flag=True, help="Print the figures as JSON.")
def doctor(data_dir: str | None, config_file: str | None, as_json: bool) -> None:
    """Report diagnostics: coverage, inbox health, overdue, open-by-hour.

    Exits 1 when an alert holds, 2 when there is no database.
    """
    from appliance.ops.commands.doctor import run_doctor

    code, text = run_doctor(settings_from(data_dir, config_file), as_json)
    click.echo(text, err=code == 2)
    sys.exit(code)


