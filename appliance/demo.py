"""``appliance demo``: the whole appliance against the built-in provider simulator (APP-4).

One command, no account anywhere: a fresh data directory (unless ``--data-dir``), the
simulator on a free local port (in a thread of this process) configured to misbehave
the way real providers do (receipts before the submit answer, duplicates, receipts
out of order, a few throttled submissions, a few silent messages and receipts for
refs nobody sent), a provider ``sim`` pointed at it, an account ``demo`` with its key
printed, a console user when the console exists, a 2,000-line sample list with a few
duplicates and bad lines queued for import, and, once the import is done, one
campaign to that list. Then it serves until Ctrl-C.
"""

from __future__ import annotations

import importlib
import json
import random
import secrets
import socket
import tempfile
import threading
from dataclasses import replace
from pathlib import Path
from typing import Any

import click
import httpx

from appliance import outgoing_http
from appliance.config import ConfigError, ProviderSettings, Settings, load_settings
from appliance.simulator.behaviour import Behaviour

DEMO_ACCOUNT = "demo"
DEMO_LIST = "demo-list"
DEMO_BEHAVIOUR = Behaviour(
    delivered_rate=0.82, delay_min_ms=200, delay_max_ms=4000, early_reports=0.3,
    duplicate_rate=0.1, reorder_rate=0.1, intermediate_rate=0.3, silent_rate=0.01,
    throttle_rate=0.03, unknown_ref_rate=0.002,
)


def free_port(host: str = "127.0.0.1") -> int:
    with socket.socket() as s:
        s.bind((host, 0))
        return int(s.getsockname()[1])


def sample_list(count: int, seed: int = 7) -> str:
    """``count`` lines: Turkish mobiles written several ways, some repeats, some junk."""
    rng = random.Random(seed)
    lines: list[str] = []
    for i in range(count):
        number = f"5{rng.choice('0345')}{rng.randrange(10)}{i:07d}"[:10]
        shape = i % 3
        if shape == 0:
            lines.append(f"0{number[:3]} {number[3:6]} {number[6:8]} {number[8:]}")
        elif shape == 1:
            lines.append(f"+90 {number[:3]} {number[3:]}")
        else:
            lines.append(f"0090{number}")
    for i in range(0, count, 97):  # a few repeats, written differently
        lines.append(f"+90{lines[i].replace(' ', '').removeprefix('+90').lstrip('0')}")
    lines += ["not a number", "0532 123 45 67 ext 12", "12", "+999 123"]
    return "\n".join(lines) + "\n"


def demo_settings(base: Settings, sim_port: int) -> Settings:
    sim = ProviderSettings(name="sim", kind="simulator", base_url=f"http://127.0.0.1:{sim_port}",
                           rate_per_s=200.0, concurrency=8)
    providers = {**base.providers, "sim": sim}
    return replace(base, providers=providers,
                   sending=replace(base.sending, default_provider="sim"))


def prepare(settings: Settings, contacts: int) -> tuple[str, int, str | None]:
    """Account, key, console user and the sample import; returns (key, job id, password)."""
    from appliance.accounts import add_key, ensure_account
    from appliance.imports.import_job import NewJob, create_job
    from appliance.service import Appliance

    appliance = Appliance(settings).open()
    try:
        now = appliance.now_ms()
        writer = appliance.store.writer
        account = writer.call(lambda c: ensure_account(c, DEMO_ACCOUNT, now))
        key = writer.call(lambda c: add_key(c, account.id, now))
        password = _console_user(appliance, account.id, now)
        payload = sample_list(contacts).encode()
        new = NewJob(account.id, DEMO_LIST, settings.imports.default_region,
                     f"demo-{secrets.token_hex(4)}", payload, "text/plain",
                     payload.count(b"\n"))
        job, _ = writer.call(lambda c: create_job(c, new, now))
        return key, job.id, password
    finally:
        appliance.close()


def _console_user(appliance: Any, account_id: int, now: int) -> str | None:
    """A console sign-in ``demo`` when the console's user store exists."""
    try:
        users: Any = importlib.import_module("appliance.users")
    except ImportError:
        return None
    password = secrets.token_urlsafe(9)
    try:
        hashed = users.hash_password(password)
        appliance.store.writer.call(
            lambda c: users.create_user(c, DEMO_ACCOUNT, hashed, account_id, now))
    except Exception:  # already there (a reused data dir) or no console yet
        return None
    return password


def start_campaign(url: str, key: str, job_id: int, stop: threading.Event) -> None:
    """Wait for the server and the import, then send one campaign to the list."""
    headers = {"Authorization": f"Bearer {key}"}
    with outgoing_http.client(base_url=url, headers=headers, timeout=10) as client:
        while not stop.wait(0.5):
            try:
                job = client.get(f"/api/jobs/{job_id}").json()
            except (httpx.HTTPError, ValueError):
                continue
            if job.get("state") in ("DONE", "FAILED", "CANCELLED"):
                break
        else:
            return
        answer = client.post(
            "/api/campaigns", headers={"Idempotency-Key": f"demo-campaign-{job_id}"},
            json={"list": DEMO_LIST, "body": "Hello from the appliance demo"},
        )
        click.echo(f"\ncampaign queued: {answer.text}\n  watch it: curl -s -H "
                   f"'Authorization: Bearer {key}' {url}/api/campaigns/"
                   f"{answer.json().get('campaignId', '')}\n", err=True)


@click.command("demo")
@click.option("--data-dir", type=click.Path(file_okay=False), default=None,
              help="Data directory (default: a fresh temporary directory).")
@click.option("--config", "config_file", type=click.Path(dir_okay=False), default=None,
              help="TOML config file; the demo adds its provider 'sim'.")
@click.option("--host", default="127.0.0.1", show_default=True)
@click.option("--port", type=int, default=8080, show_default=True)
@click.option("--sim-port", type=int, default=None, help="Simulator port (default: a free one).")
@click.option("--contacts", type=click.IntRange(1, 100_000), default=2000, show_default=True,
              help="Lines in the sample list.")
def demo_command(data_dir: str | None, config_file: str | None, host: str, port: int,
                 sim_port: int | None, contacts: int) -> None:
    """Serve with the built-in provider simulator, a demo account, a list and a campaign."""
    from appliance.server import run_server
    from appliance.simulator.run import SimulatorThread
    from appliance.store.lock import DataDirLocked

    directory = Path(data_dir) if data_dir else Path(tempfile.mkdtemp(prefix="appliance-demo-"))
    try:
        base = load_settings(config_file, overrides={"data_dir": str(directory), "host": host,
                                                     "port": port})
    except ConfigError as exc:
        raise click.ClickException(f"config: {exc}") from None
    sim_port = sim_port or free_port()
    settings = demo_settings(base, sim_port)
    behaviour = replace(DEMO_BEHAVIOUR, inbound_url=f"http://{host}:{port}/inbound/sim")
    sim = SimulatorThread(behaviour, "127.0.0.1", sim_port).start()
    key, job_id, password = prepare(settings, contacts)
    url = f"http://{host}:{port}"
    auth = f"-H 'Authorization: Bearer {key}'"
    message = json.dumps({"to": "+905321234567", "body": "hello"})
    click.echo(f"""
appliance demo
  data dir   {directory}
  simulator  http://127.0.0.1:{sim_port}  (Vonage format; early, duplicate, reordered receipts)
  console    {url}/{f"   user demo, password {password}" if password else ""}
  API key    {key}

try:
  curl -s {auth} {url}/api/jobs/{job_id}
  curl -s {auth} -H 'Content-Type: application/json' -d '{message}' {url}/api/messages
  curl -s {auth} {url}/api/stats
""", err=True)
    click.echo(key)
    stop = threading.Event()
    threading.Thread(target=start_campaign, args=(url, key, job_id, stop), daemon=True,
                     name="demo-campaign").start()
    try:
        run_server(settings)
    except DataDirLocked as exc:
        raise click.ClickException(str(exc)) from None
    finally:
        stop.set()
        sim.stop()
