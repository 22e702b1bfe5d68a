"""How the suppression list and inbound messages are shown as JSON: the API's answers,
and the console's pages, which show the same fields (``docs/api.md``)."""

from __future__ import annotations

from typing import Any

from appliance.clock import iso
from appliance.inbound.store import Inbound
from appliance.optout import suppressions as sup
from appliance.optout.suppression_import import MAX_REJECTS_SHOWN
from appliance.optout.suppression_requests import ImportSummary


def suppression_json(entry: sup.Suppression) -> dict[str, Any]:
    return {
        "msisdn": entry.msisdn,
        "reason": entry.reason,
        "source": entry.source,
        "inbound_id": entry.inbound_id,
        "created_at": iso(entry.created_at),
    }


def inbound_json(m: Inbound) -> dict[str, Any]:
    return {
        "id": m.id,
        "provider": m.provider,
        "provider_msg_id": m.provider_msg_id,
        "from": m.msisdn,
        "to": m.to,
        "text": m.text,
        "parts": m.parts,
        "parts_received": m.parts_received,
        "stop": m.keyword is not None,
        "keyword": m.keyword,
        "sent_at": iso(m.sent_at) if m.sent_at else None,
        "received_at": iso(m.received_at),
        "repeats": m.repeats,
    }


def import_summary_json(summary: ImportSummary) -> dict[str, Any]:
    """An upload's outcome: counts, and the first rejected lines with their reasons."""
    rejects = summary.read.rejects
    return {
        "lines": summary.lines,
        "added": summary.added,
        "already": summary.already,
        "rejected": len(rejects),
        "blank": summary.read.blank,
        "header_skipped": summary.read.header_skipped,
        "rejects": [{"line_number": r.line_number, "line": r.line, "reason": r.reason}
                    for r in rejects[:MAX_REJECTS_SHOWN]],
        "rejects_truncated": len(rejects) > MAX_REJECTS_SHOWN,
    }
