"""``appliance demo``: the whole appliance against the built-in provider simulator (APP-4).

One command, no account anywhere: a fresh data directory (unless ``--data-dir``), the
simulator on a free local port (in a thread of this process) configured to misbehave
the way real providers do (receipts before the submit answer, duplicates, receipts
out of order, a few throttled submissions, a few silent messages and receipts for
refs nobody sent), a provider ``sim`` pointed at it, and beside it the SMSC simulator
(SMPP 3.4, on the same thread's loop, misbehaving alike: receipts before the
``submit_sm_resp``, duplicates, late ENROUTE receipts, throttling, a failed segment now
and then) with a provider ``smsc`` of ``kind = "smpp"`` bound to it; an account
``demo`` with its key printed, a console user when the console exists, a 2,000-line
sample list with a few duplicates and bad lines queued for import, and, once the
import is done, two campaigns to that list: one through ``sim``, one through ``smsc``
(a long Turkish text: UCS-2, concatenated). Then it serves until Ctrl-C.

A third provider, ``quiet``, is a second simulator that never pushes a report (its
``--no-push``): it answers only ``GET /sms/status``. As soon as the server is up,
:data:`QUIET_MESSAGES` single messages (numbers of their own, not in the sample list)
go through it, and with ``pull = true`` and ``pull_after_s`` of
:data:`QUIET_PULL_AFTER_S` the puller asks about them: within the demo's first minute
every one of them is final, by pulls alone (the status line says how many).

The port and the data dir are checked before anything is printed (a second demo on
a busy port fails at once, without a banner). Logs go to ``appliance.log`` in the
data dir; the terminal keeps the banner and one status line
(:mod:`appliance.demo_terminal`).
"""

from __future__ import annotations

import importlib
import logging
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
from appliance.config import ConfigError, ProviderSettings, Settings, ensure_data_dir
from appliance.provider_kinds import load_settings
from appliance.simulator.behaviour import Behaviour
from appliance.simulator.smsc_behaviour import SmscBehaviour

log = logging.getLogger("appliance.demo")
DEMO_ACCOUNT = "demo"
DEMO_LIST = "demo-list"
DEMO_BATCH = 40
DEMO_BEHAVIOUR = Behaviour(
    delivered_rate=0.82, delay_min_ms=200, delay_max_ms=4000, early_reports=0.3,
    duplicate_rate=0.1, reorder_rate=0.1, intermediate_rate=0.3, silent_rate=0.01,
    throttle_rate=0.03, unknown_ref_rate=0.002,
)
DEMO_SMSC = SmscBehaviour(
    delivered_rate=0.82, delay_min_ms=200, delay_max_ms=4000, early_receipts=0.3,
    duplicate_rate=0.1, reorder_rate=0.1, intermediate_rate=0.3, throttle_rate=0.02,
    fail_segment_rate=0.05,
)
SMPP_PROVIDER = "smsc"
QUIET_PROVIDER = "quiet"  # never pushes: its reports come by pulls only
QUIET_MESSAGES = 100
QUIET_BODY = "Hello from the appliance demo: this provider reports only when asked"
QUIET_PULL_AFTER_S = 10.0
DEMO_QUIET = replace(DEMO_BEHAVIOUR, push_rate=0.0, silent_rate=0.0, throttle_rate=0.0,
                     unknown_ref_rate=0.0, early_reports=0.0, duplicate_rate=0.0,
                     reorder_rate=0.0)
SMPP_BODY = ("Değerli müşterimiz, bu mesaj SMPP üzerinden geldi: Türkçe karakterler"
             " (ç ğ ı ş İ) UCS-2 ile ve birden çok parça halinde gönderilir.")


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


def quiet_numbers(count: int = QUIET_MESSAGES) -> list[str]:
    """The numbers of the messages through ``quiet`` (E.164): none of them is in
    :func:`sample_list` (its seven last digits there stay below 9,000,000)."""
    return [f"+905{3 + i % 3}{i % 10}9{i:06d}" for i in range(count)]


def demo_settings(base: Settings, sim_port: int, smpp_port: int | None = None,
                  quiet_port: int | None = None) -> Settings:
    sim = ProviderSettings(name="sim", kind="simulator", base_url=f"http://127.0.0.1:{sim_port}",
                           rate_per_s=200.0, concurrency=8)
    providers = {**base.providers, "sim": sim}
    if quiet_port is not None:
        providers[QUIET_PROVIDER] = ProviderSettings(
            name=QUIET_PROVIDER, kind="simulator", base_url=f"http://127.0.0.1:{quiet_port}",
            rate_per_s=50.0, concurrency=2, pull=True, pull_after_s=QUIET_PULL_AFTER_S)
    if smpp_port is not None:
        providers[SMPP_PROVIDER] = ProviderSettings(
            name=SMPP_PROVIDER, kind="smpp", rate_per_s=100.0, options={
                "host": "127.0.0.1", "port": smpp_port, "system_id": DEMO_SMSC.system_id,
                "password": DEMO_SMSC.password, "source_addr": "ACME", "window": 10})
    # Small batches (a fifth of a second of the simulator's rate): stopping waits for
    # the batches in flight to be recorded, so Ctrl+C ends the demo at once.
    return replace(base, providers=providers,
                   sending=replace(base.sending, default_provider="sim",
                                   batch_size=min(base.sending.batch_size, DEMO_BATCH)))


def prepare(settings: Settings, contacts: int) -> tuple[str, int, str | None]:
    """Account, key, console user and the sample import; returns (key, job id, password)."""
    from appliance.accounts import add_key, ensure_account
    from appliance.imports.import_job import NewJob, create_job
    from appliance.runtime import Runtime

    appliance = Runtime(settings).open()
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


def _wait_for_job(client: httpx.Client, job_id: int, stop: threading.Event) -> bool:
    """Whether the import ``job_id`` ended (``False``: the demo is stopping)."""
    while not stop.wait(0.5):
        try:
            job = client.get(f"/api/jobs/{job_id}").json()
        except (httpx.HTTPError, ValueError):
            continue
        if job.get("state") in ("DONE", "FAILED", "CANCELLED"):
            return True
    return False


def send_quiet(client: httpx.Client, stop: threading.Event) -> int:
    """The single messages through ``quiet``, once the server takes them (each with its
    idempotency key: a reused data dir gets no second copy); how many were taken."""
    taken = 0
    for i, number in enumerate(quiet_numbers()):
        while not stop.is_set():
            try:
                answer = client.post(
                    "/api/messages", headers={"Idempotency-Key": f"demo-quiet-{i}"},
                    json={"to": number, "body": QUIET_BODY, "provider": QUIET_PROVIDER})
            except httpx.HTTPError:
                stop.wait(0.5)  # not up yet
                continue
            if answer.status_code >= 500:  # starting, or busy: again
                stop.wait(0.5)
                continue
            taken += answer.status_code == 202
            break
    log.info("demo messages through a provider that never pushes", extra={"taken": taken})
    return taken


def start_campaign(url: str, key: str, job_id: int, stop: threading.Event,
                   smpp: bool = False, quiet: bool = False) -> None:
    """Wait for the server and the import, then send a campaign to the list (and, with
    ``smpp``, a second one through the SMPP provider). With ``quiet``, first the single
    messages through the provider that never pushes, as soon as the server is up."""
    headers = {"Authorization": f"Bearer {key}"}
    with outgoing_http.client(base_url=url, headers=headers, timeout=10) as client:
        if quiet:
            send_quiet(client, stop)
        if not _wait_for_job(client, job_id, stop):
            return
        answer = client.post(
            "/api/campaigns", headers={"Idempotency-Key": f"demo-campaign-{job_id}"},
            json={"list": DEMO_LIST, "body": "Hello from the appliance demo"},
        )
        log.info("demo campaign queued", extra={"answer": answer.text})
        if smpp:
            answer = client.post(
                "/api/campaigns", headers={"Idempotency-Key": f"demo-smpp-campaign-{job_id}"},
                json={"list": DEMO_LIST, "body": SMPP_BODY, "provider": SMPP_PROVIDER})
            log.info("demo SMPP campaign queued", extra={"answer": answer.text})


@click.command("demo")
@click.option("--data-dir", type=click.Path(file_okay=False), default=None,
              help="Data directory (default: a fresh temporary directory).")
@click.option("--config", "config_file", type=click.Path(dir_okay=False), default=None,
              help="TOML config file; the demo adds its providers 'sim', 'smsc' and 'quiet'.")
@click.option("--host", default="127.0.0.1", show_default=True)
@click.option("--port", type=int, default=8080, show_default=True)
@click.option("--sim-port", type=int, default=None, help="Simulator port (default: a free one).")
@click.option("--contacts", type=click.IntRange(1, 100_000), default=2000, show_default=True,
              help="Lines in the sample list.")
def demo_command(data_dir: str | None, config_file: str | None, host: str, port: int,
                 sim_port: int | None, contacts: int) -> None:
    """Serve with the built-in provider simulators (HTTP, HTTP without pushes, and SMPP),
    a demo account, a list, two campaigns and single messages through the provider that
    never pushes.

    Logs go to appliance.log in the data dir; the terminal shows the banner and one
    status line.
    """
    from appliance.failed_start import nothing_left_on_failure

    created = data_dir is None or not Path(data_dir).exists()
    directory = Path(data_dir) if data_dir else Path(tempfile.mkdtemp(prefix="appliance-demo-"))
    # A demo that cannot start (a busy port, a data dir in use) leaves no empty dir.
    with nothing_left_on_failure(directory, created=created):
        _run_demo(directory, config_file, host, port, sim_port, contacts)


def _run_demo(directory: Path, config_file: str | None, host: str, port: int,
              sim_port: int | None, contacts: int) -> None:
    from appliance.demo_terminal import BannerFacts, StatusWriter, banner, command_name
    from appliance.logs import setup_logging
    from appliance.server import run_server
    from appliance.simulator.run import SimulatorThread
    from appliance.store.lock import DataDirLock, DataDirLocked
    from appliance.web.listener import PortInUse, bind_socket

    try:
        base = load_settings(config_file, overrides={"data_dir": str(directory), "host": host,
                                                     "port": port})
        ensure_data_dir(base)
    except ConfigError as exc:
        raise click.ClickException(f"config: {exc}") from None
    if DataDirLock(directory).held_by_other():
        raise click.ClickException(f"data dir {directory} is in use by a running appliance;"
                                   " give the demo another --data-dir")
    try:
        sock = bind_socket(base)
    except PortInUse as exc:
        raise click.ClickException(str(exc)) from None
    log_file = directory / "appliance.log"
    setup_logging(base.log_format, base.log_level, base.log_full_numbers, path=log_file)
    sim_port = sim_port or free_port()
    smpp_port = free_port()
    quiet_port = free_port()
    settings = demo_settings(base, sim_port, smpp_port, quiet_port)
    behaviour = replace(DEMO_BEHAVIOUR, inbound_url=f"http://{host}:{port}/inbound/sim")
    sim = SimulatorThread(behaviour, "127.0.0.1", sim_port, smsc=DEMO_SMSC,
                          smpp_port=smpp_port).start()
    quiet = SimulatorThread(DEMO_QUIET, "127.0.0.1", quiet_port).start()
    key, job_id, password = prepare(settings, contacts)
    url = f"http://{host}:{port}"
    click.echo(banner(BannerFacts(directory, log_file, f"http://127.0.0.1:{sim_port}", url, key,
                                  job_id, password, command_name(),
                                  f"127.0.0.1:{smpp_port}", f"http://127.0.0.1:{quiet_port}",
                                  QUIET_PULL_AFTER_S)), err=True)
    click.echo(key)
    stop = threading.Event()
    threading.Thread(target=start_campaign, args=(url, key, job_id, stop, True, True),
                     daemon=True, name="demo-campaign").start()
    status = StatusWriter(url, key, pulled=(QUIET_PROVIDER, QUIET_MESSAGES)).start()
    try:
        run_server(settings, sock=sock, log_file=log_file)
    except DataDirLocked as exc:
        raise click.ClickException(str(exc)) from None
    finally:
        stop.set()
        status.stop()
        quiet.stop()
        sim.stop()
    click.echo(f"stopped; the data is in {directory} (logs: {log_file})", err=True)
