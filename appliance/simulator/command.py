"""``appliance simulator``: the provider simulator alone, with every knob as a flag."""

from __future__ import annotations

from typing import Any

import click

from appliance.simulator.behaviour import REPORT_FORMATS, Behaviour
from appliance.simulator.smsc_behaviour import ID_STYLES, SEPTET_LAYOUTS, SmscBehaviour

_RATE = click.FloatRange(0.0, 1.0)


@click.command("simulator")
@click.option("--host", default="127.0.0.1", show_default=True, help="Address to listen on.")
@click.option("--port", type=click.IntRange(0, 65535), default=9090, show_default=True,
              help="Port of the HTTP (Vonage) simulator; 0: none.")
@click.option("--smpp-port", type=click.IntRange(1, 65535), default=None,
              help="Also run the SMSC simulator (SMPP 3.4) on this port.")
@click.option("--smpp-system-id", default=SmscBehaviour.system_id, show_default=True,
              help="The system_id an ESME must bind with.")
@click.option("--smpp-password", default=SmscBehaviour.password, show_default=True,
              help="Its password (anything else: ESME_RINVPASWD).")
@click.option("--smpp-ids", type=click.Choice(ID_STYLES), default=SmscBehaviour.ids,
              show_default=True,
              help="Message ids: hex, decimal, hex answered and decimal in receipt texts, or"
              " hex counted up from 10000000 (the first ten show no letter).")
@click.option("--smpp-no-tlvs", is_flag=True,
              help="Receipts carry only the text (no receipted_message_id/message_state).")
@click.option("--smpp-fail-segment-rate", type=_RATE, default=0.0,
              help="Share of concatenated messages whose last segment is UNDELIV.")
@click.option("--smpp-reject-rate", type=_RATE, default=0.0,
              help="Share of submit_sm answered ESME_RINVDSTADR.")
@click.option("--smpp-unanswered-rate", type=_RATE, default=0.0,
              help="Share of submit_sm taken and never answered.")
@click.option("--smpp-drop-every", type=click.IntRange(0), default=0,
              help="Drop the session after every Nth submit_sm, taking (unanswered) what"
              " was on its way (0: never).")
@click.option("--smpp-resp-delay-ms", type=click.IntRange(0), default=0,
              help="Answer every submit_sm this late (fills the ESME's window).")
@click.option("--smpp-repeat-delay-ms", type=click.IntRange(0), default=0,
              help="A duplicated receipt comes this much after the first one.")
@click.option("--smpp-redeliver-ms", type=click.IntRange(1), default=SmscBehaviour.redeliver_ms,
              show_default=True,
              help="A receipt not answered ESME_ROK is delivered again this much later.")
@click.option("--smpp-seconds-in-dates", is_flag=True,
              help="Receipt dates with seconds (12 digits; else 10, minute resolution).")
@click.option("--smpp-septets", type=click.Choice(SEPTET_LAYOUTS), default="unpacked",
              show_default=True,
              help="How data_coding 0 text is read: one septet an octet, or packed (as the"
              " provider's septets option).")
@click.option("--api-key", default=Behaviour.api_key, show_default=True,
              help="The api_key submissions must carry.")
@click.option("--api-secret", default=Behaviour.api_secret, show_default=True,
              help="The api_secret they must carry (a provider's api_secret must match).")
@click.option("--callback-secret", "signature_secret", default=Behaviour.signature_secret,
              show_default=True,
              help="Secret that signs delivery receipts (Vonage signed webhooks; a"
              " provider's signature_secret must match).")
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
@click.option("--push-rate", type=_RATE, default=1.0, show_default=True,
              help="Share of messages whose receipts are pushed; the others are known only"
              " to a status request (GET /sms/status).")
@click.option("--no-push", "push_rate", flag_value=0.0, type=_RATE,
              help="Push no receipt at all: same as --push-rate 0.")
@click.option("--throttle-rate", type=_RATE, default=0.0,
              help="Refuse with 429 + Retry-After or status 1 (Throttled).")
@click.option("--unknown-ref-rate", type=_RATE, default=0.0,
              help="Also report refs nobody submitted.")
@click.option("--part-fail-rate", type=_RATE, default=0.0,
              help="Share of multi-part messages of which one part fails on its own.")
@click.option("--report-format", type=click.Choice(REPORT_FORMATS), default="form",
              show_default=True, help="Receipts as form POST, JSON POST or GET.")
@click.option("--callback-url", default="", help="Where receipts go when a submission names none.")
@click.option("--inbound-url", default="",
              help="Where inbound messages go (POST /_sim/inbound makes one), e.g."
              " http://127.0.0.1:8080/inbound/sim.")
@click.option("--seed", type=int, default=None, help="Random seed, for repeatable runs.")
def simulator_command(host: str, port: int, smpp_port: int | None, **knobs: Any) -> None:
    """The provider simulator alone: speaks the Vonage SMS API on HOST:PORT and, with
    --smpp-port, SMPP 3.4 as an SMSC. Rates and delays apply to both."""
    from appliance.simulator.run import serve, serve_with_smsc

    smpp = {key: knobs.pop(key) for key in list(knobs) if key.startswith("smpp_")}
    try:
        behaviour = Behaviour(**knobs).check()
        smsc = SmscBehaviour(
            system_id=smpp["smpp_system_id"], password=smpp["smpp_password"],
            ids=smpp["smpp_ids"], receipt_tlvs=not smpp["smpp_no_tlvs"],
            fail_segment_rate=smpp["smpp_fail_segment_rate"],
            reject_rate=smpp["smpp_reject_rate"],
            unanswered_rate=smpp["smpp_unanswered_rate"],
            drop_every=smpp["smpp_drop_every"], resp_delay_ms=smpp["smpp_resp_delay_ms"],
            redeliver_ms=smpp["smpp_redeliver_ms"],
            repeat_delay_ms=smpp["smpp_repeat_delay_ms"],
            seconds_in_dates=smpp["smpp_seconds_in_dates"],
            septets=smpp["smpp_septets"],
            delivered_rate=behaviour.delivered_rate,
            expired_share=behaviour.expired_share, delay_min_ms=behaviour.delay_min_ms,
            delay_max_ms=behaviour.delay_max_ms, silent_rate=behaviour.silent_rate,
            early_receipts=behaviour.early_reports, duplicate_rate=behaviour.duplicate_rate,
            intermediate_rate=behaviour.intermediate_rate,
            reorder_rate=behaviour.reorder_rate, throttle_rate=behaviour.throttle_rate,
            seed=behaviour.seed).check()
    except ValueError as exc:
        raise click.BadParameter(str(exc)) from None
    if port:
        click.echo(f"provider simulator (Vonage SMS API format) on"
                   f" http://{host}:{port}/sms/json", err=True)
    if smpp_port is None:
        if not port:
            raise click.BadParameter("nothing to serve: --port 0 and no --smpp-port")
        serve(behaviour, host, port)
        return
    click.echo(f"SMSC simulator (SMPP 3.4) on {host}:{smpp_port}, system_id"
               f" {smsc.system_id!r}", err=True)
    serve_with_smsc(behaviour if port else None, smsc, host, port, smpp_port)
