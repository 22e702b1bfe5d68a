"""``appliance simulator``: the provider simulator alone, with every knob as a flag."""

from __future__ import annotations

from typing import Any

import click

from appliance.simulator.behaviour import REPORT_FORMATS, Behaviour

_RATE = click.FloatRange(0.0, 1.0)


@click.command("simulator")
@click.option("--host", default="127.0.0.1", show_default=True, help="Address to listen on.")
@click.option("--port", type=int, default=9090, show_default=True, help="Port to listen on.")
@click.option("--api-key", default=Behaviour.api_key, show_default=True,
              help="The api_key submissions must carry.")
@click.option("--api-secret", default=Behaviour.api_secret, help="The api_secret they must carry.")
@click.option("--callback-secret", "signature_secret", default=Behaviour.signature_secret,
              help="Secret that signs delivery receipts (Vonage signed webhooks).")
@click.option("--signature-method", default="sha256", show_default=True,
              type=click.Choice(["md5hash", "md5", "sha1", "sha256", "sha512"]))
@click.option("--delivered-rate", type=_RATE, default=0.82, show_default=True,
              help="Share of messages DELIVERED; the rest FAILED or EXPIRED.")
@click.option("--delay-min-ms", type=click.IntRange(0), default=50, show_default=True)
@click.option("--delay-max-ms", type=click.IntRange(0), default=1500, show_default=True)
@click.option("--early-reports", type=_RATE, default=0.0, is_flag=False, flag_value=1.0,
              help="Share of receipts pushed before the submission is answered (the race);"
              " alone: all of them.")
@click.option("--duplicate-rate", type=_RATE, default=0.0, help="Push the final receipt twice.")
@click.option("--reorder-rate", type=_RATE, default=0.0,
              help="Final receipt first, an older intermediate one later.")
@click.option("--intermediate-rate", type=_RATE, default=0.0,
              help="An 'accepted' receipt before the final one.")
@click.option("--silent-rate", type=_RATE, default=0.0, help="Never report.")
@click.option("--throttle-rate", type=_RATE, default=0.0,
              help="Refuse with 429 + Retry-After or status 1 (Throttled).")
@click.option("--unknown-ref-rate", type=_RATE, default=0.0,
              help="Also report refs nobody submitted.")
@click.option("--report-format", type=click.Choice(REPORT_FORMATS), default="form",
              show_default=True, help="Receipts as form POST, JSON POST or GET.")
@click.option("--callback-url", default="", help="Where receipts go when a submission names none.")
@click.option("--inbound-url", default="",
              help="Where inbound messages go (POST /_sim/inbound makes one), e.g."
              " http://127.0.0.1:8080/inbound/sim.")
@click.option("--seed", type=int, default=None, help="Random seed, for repeatable runs.")
def simulator_command(host: str, port: int, **knobs: Any) -> None:
    """The provider simulator alone: speaks the Vonage SMS API on HOST:PORT."""
    from appliance.simulator.run import serve

    try:
        behaviour = Behaviour(**knobs).check()
    except ValueError as exc:
        raise click.BadParameter(str(exc)) from None
    click.echo(f"provider simulator (Vonage SMS API format) on http://{host}:{port}/sms/json",
               err=True)
    serve(behaviour, host, port)
