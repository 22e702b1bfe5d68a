"""How messages and campaigns are shown as JSON: the API's answers, and the console's
campaign pages, which show the same fields (``docs/api.md`` names each).

Each serialiser is one dict, field by field, so a new field is one line.
"""

from __future__ import annotations

from typing import Any

from appliance.clock import iso
from appliance.reports.states import FINAL_STATES
from appliance.sending import campaigns as camp
from appliance.sending import messages as msgs
from appliance.sending import resolution
from appliance.sending.accept import Accepted
from appliance.sending.attempt_log import attempts_by_provider
from appliance.sending.dry_run import DryRun


def accepted_json(accepted: Accepted, priority: int) -> dict[str, Any]:
    """The answer to a send: the message as it was queued (or as the key first made it)."""
    return {"ref": accepted.ref, "state": accepted.state,
            "priority": camp.PRIORITY_NAMES[priority],
            "encoding": accepted.encoding, "parts": accepted.parts,
            "ucs2_because": accepted.ucs2_because,
            "ucs2_parts": accepted.ucs2_parts,
            "poll": f"/api/messages/{accepted.ref}"}


def message_json(m: msgs.Message, history: list[msgs.HistoryEntry] | None = None,
                 parts: list[msgs.Part] | None = None,
                 actions: list[msgs.Action] | None = None) -> dict[str, Any]:
    out: dict[str, Any] = {
        "ref": m.ref,
        "state": m.state,
        "final": m.state in FINAL_STATES,
        "to": m.msisdn,
        "provider": m.provider,
        "provider_msg_id": m.provider_msg_id,
        "encoding": m.encoding,
        "parts": m.parts,
        "ucs2_because": m.ucs2_because,
        "ucs2_parts": m.ucs2_parts,
        "campaign_id": m.campaign_id,
        "priority": camp.PRIORITY_NAMES.get(m.priority, "normal"),
        "attempts": m.attempts,
        "error": m.error,
        "error_kind": m.error_kind,
        "created_at": iso(m.created_at),
        "submitted_at": iso(m.submitted_at),
        "finalised_at": iso(m.finalised_at),
        "updated_at": iso(m.updated_at),
        "state_reported_at": iso(m.state_at) if m.state_at else None,
        "next_attempt_at": iso(m.next_attempt_at) if m.state in ("QUEUED", "RETRY") else None,
        "expires_at": iso(m.expires_at),
        "route": m.route,
        "attempts_by_provider": [{**a, "at": iso(a["at"])}
                                 for a in attempts_by_provider(m.attempts_log, m.provider,
                                                               m.submitted_at)],
    }
    if history is not None:
        out["history"] = [
            {"status": h.status, "state": h.state,
             "reported_at": iso(h.reported_at) if h.reported_at else None,
             "received_at": iso(h.received_at), "repeats": h.repeats,
             "outcome": h.outcome or "WAITING", "error_code": h.error_code, "part": h.part,
             "source": h.source}
            for h in history
        ]
    if actions is not None:
        out["actions"] = [
            {"action": a.action, "from": a.from_state, "to": a.to_state, "by": a.actor,
             "at": iso(a.at)} for a in actions]
        if m.state == "UNCERTAIN":
            out["resolve"] = {"url": f"/api/messages/{m.ref}/resolve",
                              "actions": list(resolution.ACTIONS),
                              "warning": resolution.RESEND_WARNING}
    if parts is not None:
        out["part_reports"] = [
            {"part": p.part, "provider_msg_id": p.provider_msg_id, "state": p.state,
             "reported_at": iso(p.state_at) if p.state_at else None, "error": p.error}
            for p in parts
        ]
    return out


def _pct(part: int, whole: int) -> float:
    return round(100.0 * part / whole, 2) if whole else 0.0


def campaign_json(p: camp.Progress, per_s: float = 0.0) -> dict[str, Any]:
    """A campaign as the API shows it; ``per_s``: its messages sent per second lately."""
    c = p.campaign
    seg = c.segmentation
    state = p.state
    window = c.window
    now = p.now_ms
    window_open = window.is_open(now) if window is not None else True
    sending = state == camp.RUNNING and p.unsent > 0 and window_open
    eta_s = round(p.unsent / per_s, 1) if sending and per_s > 0 else None
    return {
        "id": c.id,
        "campaignId": c.id,
        "state": state,
        "list": c.list_name,
        "provider": c.provider,
        "body": c.body,
        "personalised": c.template.personalised,
        "total": c.total,
        "parts": p.parts,  # the SMS parts of its messages, cancelled ones left out
        "parts_per_message": p.max_parts or seg.count,
        "encoding": p.encoding,
        "ucs2_parts": p.ucs2_parts,
        "ucs2_because": seg.ucs2_because,
        "cancelled": p.cancelled,
        "uncertain": p.uncertain,
        "needs_decision": p.uncertain > 0,
        "created": p.created,
        "unsent": p.unsent,
        "counts": dict(sorted(p.counts.items())),
        "suppressed": p.suppressed,
        "no_consent": p.no_consent,
        "duplicate_today": p.duplicate_today,
        "iys_refused": p.iys_refused,
        "expired": p.expired,
        "validity_s": c.validity_s or 0,
        "type": c.message_type,
        "finalised": p.finalised,
        "coverage_pct": _pct(p.finalised, c.total),
        "delivered_pct": _pct(p.counts.get("DELIVERED", 0), c.total),
        "messages_per_s": round(per_s, 1) if sending else 0.0,
        "eta_s": eta_s,
        "eta_at": iso(now + int(eta_s * 1000)) if eta_s is not None else None,
        "send_at": iso(c.send_at),
        "window": window.as_json() if window is not None else None,
        "window_open": window_open,
        "window_opens_at": iso(window.next_open_ms(now))
        if window is not None and not window_open else None,
        "created_at": iso(c.created_at),
        "updated_at": iso(c.updated_at),
        "poll": f"/api/campaigns/{c.id}",
    }


def campaign_accepted_json(campaign: camp.Campaign, plan: DryRun,
                           now_ms: int) -> dict[str, Any]:
    """The answer to a new campaign: its size as the dry run counted it, and its schedule."""
    window = campaign.window
    return {"campaignId": campaign.id, "total": campaign.total,
            "parts": plan.parts, "encoding": plan.encoding, "no_consent": plan.no_consent,
            "duplicate_today": plan.duplicate_today,
            "type": campaign.message_type,
            "state": camp.SCHEDULED if campaign.send_at is not None
            and campaign.send_at > now_ms else camp.RUNNING,
            "send_at": iso(campaign.send_at),
            "window": window.as_json() if window is not None else None,
            "poll": f"/api/campaigns/{campaign.id}"}


def dry_run_json(d: DryRun) -> dict[str, Any]:
    longest = d.longest
    return {
        "dry_run": True,
        "list": d.list_name,
        "provider": d.provider,
        "messages": d.messages,
        "parts": d.parts,
        "parts_per_message": longest.count,
        "encoding": d.encoding,
        "ucs2_parts": d.ucs2_parts,
        "ucs2_because": d.ucs2_because,
        "ucs2_messages": d.ucs2_messages,
        "suppressed": d.suppressed,
        "no_consent": d.no_consent,
        "duplicate_today": d.duplicate_today,
        "personalised": d.personalised,
        "longest": {"parts": longest.count, "encoding": longest.encoding,
                    "ucs2_parts": longest.ucs2_parts,
                    "ucs2_because": longest.ucs2_because, "characters": len(d.longest_text),
                    "text": d.longest_text},
    }
