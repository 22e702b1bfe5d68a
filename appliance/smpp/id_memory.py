"""What ``receipt_id_format = "auto"`` has learnt of a provider's ids, kept across starts.

:class:`~appliance.smpp.ids.IdEvidence` is two booleans: whether the SMSC's
``submit_sm_resp`` ids, and its receipt texts' ids, have shown themselves hexadecimal.
Until they have, an all-digit id is read as decimal; so the evidence is kept in
``appliance_state`` (key ``smpp.<provider>.id_evidence``, JSON) and loaded before the
session reads its first id, and ``auto`` starts warm after a restart. How the SMSC
writes its ids (:class:`~appliance.smpp.ids.IdShape`: capitals, a fixed width) is kept
beside it (key ``smpp.<provider>.id_shape``), so a ``query_sm`` after a restart names an
id of an earlier run as the SMSC wrote it.

On a provider's first session, the ids ``auto`` read as decimal before the SMSC showed
a letter were read wrongly; :func:`rekey` re-files what was stored under those keys
(the id -> part mapping, the part's id, receipts waiting in the inbox) under the right
ones and applies what then matches. A receipt filed under the old key whose twin (the
same status and date, a duplicate read after the switch) is filed under the new one
already is the same fact: the two rows become one, and the repeat is counted on it
(:func:`refile_reports`). It is a no-op for keys already changed, so the
session's loop runs it again for a while, for outcomes and receipts still on their way
to the database when the evidence changed.
"""

from __future__ import annotations

import json
from typing import Any

from appliance.reports.apply import apply_waiting_for_refs
from appliance.smpp.ids import IdEvidence, IdShape
from appliance.store.connection import Connection


def state_key(provider: str) -> str:
    return f"smpp.{provider}.id_evidence"


def load_evidence(conn: Connection, provider: str) -> IdEvidence:
    """The evidence kept for ``provider`` (a read unit); none kept: nothing learnt."""
    row: Any = conn.execute("SELECT value FROM appliance_state WHERE key = ?",
                            (state_key(provider),)).fetchone()
    if row is None:
        return IdEvidence()
    try:
        data = json.loads(str(row[0]))
    except ValueError:
        return IdEvidence()
    if not isinstance(data, dict):
        return IdEvidence()
    return IdEvidence(submit_hex=data.get("submit_hex") is True,
                      text_hex=data.get("text_hex") is True)


def save_evidence(conn: Connection, provider: str, evidence: IdEvidence,
                  now_ms: int) -> None:
    """Keep ``evidence`` for ``provider`` (a write unit)."""
    value = json.dumps({"submit_hex": evidence.submit_hex, "text_hex": evidence.text_hex})
    conn.execute(
        "INSERT INTO appliance_state (key, value, updated_at) VALUES (?, ?, ?)"
        " ON CONFLICT (key) DO UPDATE SET value = excluded.value,"
        " updated_at = excluded.updated_at", (state_key(provider), value, now_ms))


def shape_key(provider: str) -> str:
    return f"smpp.{provider}.id_shape"


def load_shape(conn: Connection, provider: str) -> IdShape:
    """How the provider's SMSC wrote its latest ids, as kept (a read unit)."""
    row: Any = conn.execute("SELECT value FROM appliance_state WHERE key = ?",
                            (shape_key(provider),)).fetchone()
    try:
        data = json.loads(str(row[0])) if row is not None else {}
    except ValueError:
        data = {}
    if not isinstance(data, dict):
        return IdShape()
    width = data.get("width")
    return IdShape(upper=data.get("upper") is True,
                   width=width if isinstance(width, int) and -1 <= width <= 65 else 0)


def save_shape(conn: Connection, provider: str, shape: IdShape, now_ms: int) -> None:
    """Keep ``shape`` for ``provider`` (a write unit)."""
    value = json.dumps({"upper": shape.upper, "width": shape.width})
    conn.execute(
        "INSERT INTO appliance_state (key, value, updated_at) VALUES (?, ?, ?)"
        " ON CONFLICT (key) DO UPDATE SET value = excluded.value,"
        " updated_at = excluded.updated_at", (shape_key(provider), value, now_ms))


def rekey(conn: Connection, provider: str, pairs: list[tuple[str, str]],
          now_ms: int) -> int:
    """Re-file what is stored under each ``old`` key under ``new`` (a write unit);
    returns how many rows changed."""
    changed = 0
    refs: list[str] = []
    for old, new in pairs:
        mapped: Any = conn.execute(
            "SELECT ref, part FROM provider_ids WHERE provider = ? AND provider_msg_id = ?",
            (provider, old)).fetchone()
        clash = conn.execute("SELECT 1 FROM provider_ids WHERE provider = ?"
                             " AND provider_msg_id = ?", (provider, new)).fetchone()
        if mapped is not None and clash is None:
            ref, part = str(mapped[0]), int(mapped[1])
            conn.execute("UPDATE provider_ids SET provider_msg_id = ? WHERE provider = ?"
                         " AND provider_msg_id = ?", (new, provider, old))
            conn.execute(
                "UPDATE message_parts SET provider_msg_id = ?, updated_at = ?"
                " WHERE provider_msg_id = ? AND part = ? AND message_id ="
                " (SELECT id FROM messages WHERE ref = ? AND provider = ?)",
                (new, now_ms, old, part, ref, provider))
            conn.execute("UPDATE messages SET provider_msg_id = ? WHERE ref = ?"
                         " AND provider = ? AND provider_msg_id = ?", (new, ref, provider, old))
            refs.append(ref)
            changed += 1
        changed += refile_reports(conn, provider, old, new)
    if changed:
        apply_waiting_for_refs(conn, refs, now_ms, [(provider, new) for _, new in pairs],
                               provider=provider)
    return changed


# Which of two rows of the same fact is kept: the one applied, else the one kept as
# history, else either (the one already under the new key).
_RANK = {"APPLIED": 2, "STALE": 1}


def refile_reports(conn: Connection, provider: str, old: str, new: str) -> int:
    """File every receipt stored under ``old`` under ``new`` (part of a write unit);
    returns how many rows moved or merged.

    A row whose twin is under ``new`` already (a duplicate read after the switch) is not
    left behind, as it was when the inbox's unique key refused the move: the two are one
    fact, so one row is kept (:data:`_RANK`), the other deleted, and the kept row's
    ``repeats`` counts the other and its repeats. Nothing waits under a key no receipt
    will ever be looked up by.
    """
    moved = 0
    rows: list[Any] = conn.execute(
        "SELECT id, status, reported_at, repeats, outcome FROM report_inbox"
        " WHERE provider = ? AND ref = '' AND provider_msg_id = ?", (provider, old)).fetchall()
    for row_id, status, reported_at, repeats, outcome in rows:
        twin: Any = conn.execute(
            "SELECT id, repeats, outcome FROM report_inbox WHERE provider = ? AND ref = ''"
            " AND provider_msg_id = ? AND status = ? AND reported_at = ?",
            (provider, new, status, reported_at)).fetchone()
        moved += 1
        if twin is None:
            conn.execute("UPDATE report_inbox SET provider_msg_id = ? WHERE id = ?",
                         (new, row_id))
            continue
        total = int(repeats) + int(twin[1]) + 1
        if _RANK.get(str(outcome), 0) > _RANK.get(str(twin[2]), 0):
            conn.execute("DELETE FROM report_inbox WHERE id = ?", (int(twin[0]),))
            conn.execute("UPDATE report_inbox SET provider_msg_id = ?, repeats = ?"
                         " WHERE id = ?", (new, total, row_id))
        else:
            conn.execute("DELETE FROM report_inbox WHERE id = ?", (row_id,))
            conn.execute("UPDATE report_inbox SET repeats = ? WHERE id = ?",
                         (total, int(twin[0])))
    return moved
