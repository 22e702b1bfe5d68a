"""The ``appliance`` command line: one click group over one app object."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import click

from appliance import __version__
from appliance.config import ConfigError, Settings, ensure_data_dir, load_settings
from appliance.store.lock import DataDirLock, DataDirLocked
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
    try:
        return load_settings(config_file, overrides={"data_dir": data_dir, **flags})
    except ConfigError as exc:
        raise ConfigProblem(f"config: {exc}") from None


def fail(message: str) -> None:
    raise click.ClickException(message)


@click.group(context_settings=CONTEXT)
@click.version_option(__version__, "--version", prog_name="appliance")
def main() -> None:
    """A bulk-messaging appliance: one executable over one SQLite file."""


@main.command()
@data_dir_option
@click.option("--host", default=None, help="Address to listen on (default 127.0.0.1).")
@click.option("--port", type=int, default=None, help="Port to listen on (default 8080).")
def serve(data_dir: str | None, config_file: str | None, host: str | None,
          port: int | None) -> None:
    """Run everything: HTTP endpoints and the scheduler."""
    from appliance.server import run_server

    settings = settings_from(data_dir, config_file, host=host, port=port)
    run_guarded(lambda: run_server(settings))


def run_guarded(fn: Any) -> None:
    from appliance.server import PortInUse

    try:
        fn()
    except ConfigError as exc:
        raise ConfigProblem(f"config: {exc}") from None
    except (DataDirLocked, SchemaTooNew, PortInUse) as exc:
        fail(str(exc))


@main.command()
@data_dir_option
@click.argument("dest", type=click.Path(dir_okay=False))
def backup(data_dir: str | None, config_file: str | None, dest: str) -> None:
    """Write a verified copy of the database to DEST; works while serve runs."""
    from appliance.ops.cli_ops import run_backup

    run_backup(settings_from(data_dir, config_file), Path(dest))


@main.command()
@data_dir_option
@click.argument("src", type=click.Path(dir_okay=False))
def restore(data_dir: str | None, config_file: str | None, src: str) -> None:
    """Restore the backup SRC into the data dir (the server must be stopped)."""
    from appliance.ops.cli_ops import run_restore

    run_restore(settings_from(data_dir, config_file), Path(src))


@main.group("config")
def config_group() -> None:
    """The configuration (file, environment, flags)."""


@config_group.command("check")
@data_dir_option
def config_check(data_dir: str | None, config_file: str | None) -> None:
    """Validate the config; print the effective settings with secrets masked."""
    from appliance.ops.cli_ops import print_config

    print_config(settings_from(data_dir, config_file))


@main.group()
def account() -> None:
    """Accounts and API keys."""


@account.command("create")
@data_dir_option
@click.argument("name")
def account_create(data_dir: str | None, config_file: str | None, name: str) -> None:
    """Create an account; prints its API key as the last line."""
    from appliance.accounts import AccountExists, create_account

    settings = settings_from(data_dir, config_file)
    with offline_appliance(settings) as appliance:
        try:
            acct, key = appliance.store.writer.call(
                lambda c: create_account(c, name, appliance.now_ms()))
        except (AccountExists, ValueError) as exc:
            fail(str(exc))
            return
    click.echo(f"account {acct.name} created (id {acct.id}); its API key, shown only once:",
               err=True)
    click.echo(key)


@main.group()
def user() -> None:
    """Console users (sign-ins for the web console)."""


@user.command("create")
@data_dir_option
@click.argument("name")
@click.option("--password", default=None, help="The password (asked for when not given).")
@click.option("--account", "account_name", default="default", show_default=True,
              help="The account the user works in (created if missing).")
def user_create(data_dir: str | None, config_file: str | None, name: str,
                password: str | None, account_name: str) -> None:
    """Create a console user, who signs in to the web console."""
    from appliance.accounts import ensure_account
    from appliance.users import (
        UserExists,
        check_name,
        check_password,
        create_user,
        hash_password,
    )

    settings = settings_from(data_dir, config_file)
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
    with offline_appliance(settings) as appliance:
        now = appliance.now_ms()

        def unit(conn: Any) -> Any:
            acct = ensure_account(conn, account_name, now)
            return create_user(conn, name, hashed, acct.id, now)

        try:
            made = appliance.store.writer.call(unit)
        except (UserExists, ValueError) as exc:
            fail(str(exc))
            return
    click.echo(f"user {made.name} created in account {made.account_name}")


@main.command("import")
@data_dir_option
@click.argument("file", type=click.Path(exists=True, dir_okay=False, allow_dash=True))
@click.option("--list", "list_name", required=True, help="The list to import into.")
@click.option("--region", default=None, help="Default country for numbers without one (e.g. TR).")
@click.option("--account", "account_name", default="default", show_default=True,
              help="The account that owns the list.")
def import_command(data_dir: str | None, config_file: str | None, file: str, list_name: str,
                   region: str | None, account_name: str) -> None:
    """Queue an import of FILE and show its progress until it is done."""
    from appliance.imports.cli_import import run_import

    settings = settings_from(data_dir, config_file)
    data = sys.stdin.buffer.read() if file == "-" else Path(file).read_bytes()
    code = run_import(settings, data, list_name, region, account_name)
    sys.exit(code)


@main.command()
@data_dir_option
@click.option("--json", "as_json", is_flag=True, help="Print the figures as JSON.")
def doctor(data_dir: str | None, config_file: str | None, as_json: bool) -> None:
    """Report diagnostics: coverage, inbox health, overdue, open-by-hour.

    Exits 1 when an alert holds, 2 when there is no database.
    """
    from appliance.reports.doctor import run_doctor

    code, text = run_doctor(settings_from(data_dir, config_file), as_json)
    click.echo(text, err=code == 2)
    sys.exit(code)


def _add_sending_commands() -> None:
    from appliance.demo import demo_command
    from appliance.simulator.command import simulator_command

    main.add_command(demo_command)
    main.add_command(simulator_command)


_add_sending_commands()


class offline_appliance:
    """An opened appliance for a CLI command; works beside a running server.

    When no server holds the data dir, this process takes the lock for the
    duration, so a server cannot start halfway through.
    """

    def __init__(self, settings: Settings) -> None:
        from appliance.service import Appliance

        try:
            ensure_data_dir(settings)
        except ConfigError as exc:
            fail(str(exc))
        self.lock = DataDirLock(settings.data_dir)
        self.server_running = self.lock.held_by_other()
        if not self.server_running:
            try:
                self.lock.acquire()
            except DataDirLocked:
                self.server_running = True
        try:
            self.appliance = Appliance(settings).open()
        except SchemaTooNew as exc:
            self.lock.release()
            fail(str(exc))

    def __enter__(self) -> Any:
        return self.appliance

    def __exit__(self, *exc: object) -> None:
        self.appliance.close()
        self.lock.release()

