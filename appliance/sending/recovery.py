"""Crash recovery: messages a stopped process left reserved or ``SENDING`` (OPS-6).

Reserved messages were never sent: they are given back. A ``SENDING`` one was handed
to the transport: nobody can know whether the provider got it, so it becomes
``UNCERTAIN`` (never resent blindly) or, where the provider drops repeats of our ref,
``RETRY``. On PostgreSQL only dead processes' messages are settled
(:func:`appliance.store.owner.dead_owners`).
"""

from __future__ import annotations

from typing import Any

from appliance.reports.apply import apply_waiting_for_refs
from appliance.sending.claims import (
    PART_TO_SEND,
    RESERVATION_TTL_MS,
    in_chunks,
    known_parts,
    release_claimed,
    release_orphaned,
)
from appliance.sending.outcomes import RECORD_PART
from appliance.store import dialect
from appliance.store.connection import Connection
from appliance.store.owner import dead_owners

INTERRUPTED = "interrupted while sending: the provider may have it"


def recover_interrupted(conn: Connection, provider: str, now_ms: int,
                        dedupes_on_ref: bool, reports_per_part: bool = False) -> int:
    """Messages left ``SENDING`` by a crash (a write unit, run at start; on PostgreSQL
    also from time to time, for other processes' crashes).

    Messages that were only reserved were never sent: they are given back first and
    sent in their turn. A ``SENDING`` one was handed to the transport (at most the
    transport's concurrency were at any moment): nobody can know whether the provider
    got it, so it becomes ``UNCERTAIN`` (never resent) or, where the provider drops
    repeats of our ref, ``RETRY``. The parts it was sending become ``UNCERTAIN`` with it.
    Returns how many became ``UNCERTAIN`` (or ``RETRY``).

    On PostgreSQL other processes may be sending right now: only the messages whose
    ``lease_owner`` is gone (:func:`appliance.store.owner.dead_owners`) were interrupted.
    """
    release_claimed(conn, provider=provider)
    return _interrupted(conn, provider, now_ms, dedupes_on_ref, reports_per_part)


def recover_orphans(conn: Connection, provider: str, now_ms: int, dedupes_on_ref: bool,
                    reports_per_part: bool = False) -> tuple[int, int]:
    """Several processes on PostgreSQL (a write unit, run from time to time): give back
    the reservations of dead processes and any older than :data:`RESERVATION_TTL_MS`
    (taking one again is safe: :func:`mark_sending` takes a message once), and settle
    what dead processes were sending, as :func:`recover_interrupted` does.
    Returns (reservations given back, messages settled)."""
    released = release_orphaned(conn, provider, now_ms - RESERVATION_TTL_MS)
    return released, _interrupted(conn, provider, now_ms, dedupes_on_ref, reports_per_part)



def _interrupted(conn: Connection, provider: str, now_ms: int, dedupes_on_ref: bool,
                 reports_per_part: bool) -> int:
    state = "RETRY" if dedupes_on_ref else "UNCERTAIN"
    holders = ""
    held: tuple[str, ...] = ()
    if dialect.of(conn).is_postgresql:  # several processes: only the dead ones' sends
        held = tuple(sorted(dead_owners(conn, (str(r[0]) for r in conn.execute(
            "SELECT DISTINCT lease_owner FROM messages WHERE state = 'SENDING'"
            " AND provider = ? AND lease_owner IS NOT NULL", (provider,))))))
        holders = f" AND (lease_owner IS NULL OR lease_owner IN ({','.join('?' * len(held))}))" \
            if held else " AND lease_owner IS NULL"
    rows: list[Any] = conn.execute(
        "UPDATE messages SET state = ?, error = ?, updated_at = ?, next_attempt_at = ?"
        f" WHERE state = 'SENDING' AND provider = ?{holders} RETURNING id, ref, parts",
        (state, INTERRUPTED, now_ms, now_ms, provider, *held),
    ).fetchall()
    refs = [str(r[1]) for r in rows]
    if rows and not dedupes_on_ref:
        ids = [int(r[0]) for r in rows]
        have = known_parts(conn, ids)
        for chunk in in_chunks([i for i in ids if i in have]):
            marks = ",".join("?" * len(chunk))
            conn.execute(
                "UPDATE message_parts SET state = 'UNCERTAIN', error = ?, updated_at = ?"
                f" WHERE message_id IN ({marks}) AND state = '{PART_TO_SEND}'",
                (INTERRUPTED, now_ms, *chunk))
        conn.executemany(RECORD_PART, [
            (int(r[0]), part, None, "UNCERTAIN", INTERRUPTED, None, None, now_ms)
            for r in rows if int(r[0]) not in have
            for part in range(1, (int(r[2]) if reports_per_part else 1) + 1)])
    if refs:
        apply_waiting_for_refs(conn, refs, now_ms, [], provider=provider)
    return len(refs)
