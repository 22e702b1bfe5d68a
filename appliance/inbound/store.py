"""Inbound (MO) messages in the store: kept raw first, then filed, STOPs honoured (OPS-4).

The path of an inbound request mirrors the report callbacks' (DLR-2): the request is
written to ``raw_inbound`` exactly as it came, then, under a savepoint of its own, each
message it carries is filed in ``inbound_messages``. Reading or filing that fails leaves
the raw request stored (``parsed = 0`` with the reason) and the provider still gets its
``2xx``.

Filing one message, all in the caller's write unit:

1. the sender is normalised to E.164 (providers write international numbers without the
   ``+``; anything that is no number, such as an alphanumeric sender, is kept as given);
2. a provider's retry of a message it sent before (the same provider id) only bumps
   ``repeats``: one message is stored once. A message sent in parts (Vonage
   ``concat-ref``) is one row from its first part on; each part is kept in
   ``inbound_parts`` and the text is rebuilt as parts arrive (a missing part shows as
   ``[…]``);
3. the accounts it is for are recorded (``inbound_accounts``): every account that has a
   message to that number, through any provider (failover changes the provider); when
   none has, no account (a reply nobody can place is shown to nobody: another account's
   customer's text is not the caller's to read);
4. once whole, it is forwarded (TEAM-3): an ``inbound.received`` event in the outbox for
   the receiver of each of those accounts (:func:`appliance.webhooks.outbox.forward_inbound`),
   in the same transaction; a message no account lists goes to no receiver;
5. when the (whole) text is a STOP keyword (:mod:`appliance.optout.keywords`), the sender
   is added to each of those accounts' suppression lists, source ``inbound``, with the
   inbound message as the reason, in the same transaction as the message itself; a STOP
   nobody can place binds every account (over-suppressing is the safe side of the law).

:func:`receive_inbound` is the entry point for a transport that receives messages over
its own session (SMPP ``deliver_sm`` that is not a receipt); :func:`receive_request` is
the HTTP route's.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, Final

from appliance.config import Settings
from appliance.optout import suppressions
from appliance.optout.keywords import Keywords
from appliance.providers.base import InboundMessage
from appliance.reports.inbox import RawCallback
from appliance.store import dialect
from appliance.store.connection import Connection
from appliance.store.errors import STORAGE_ERRORS
from appliance.store.rows import as_int
from appliance.webhooks.outbox import forward_inbound

MISSING_PART: Final = "[…]"
SMPP_CONTENT_TYPE: Final = "application/vnd.smpp.deliver-sm"


@dataclass(frozen=True)
class InboundRules:
    """What filing needs from the settings: the STOP keywords and the default region."""

    keywords: Keywords
    region: str

    @classmethod
    def from_settings(cls, settings: Settings) -> InboundRules:
        return cls(Keywords(settings.optout.keywords), settings.imports.default_region)


@dataclass(frozen=True)
class InboundResult:
    """What one inbound message (or one part of it) came to."""

    raw_id: int
    inbound_id: int
    duplicate: bool  # a repeat of a message (or part) already stored: nothing changed
    keyword: str | None  # the STOP keyword it was, if it was one
    suppressed_for: tuple[int, ...] = ()  # accounts whose list it newly added the sender to


@dataclass
class InboundReceipt:
    """What one inbound request came to."""

    raw_id: int
    results: list[InboundResult] = field(default_factory=list)
    error: str | None = None  # why it was kept raw, not read


def sender_number(msisdn: str, region: str) -> str:
    """The sender as E.164 when it is a number, else as the provider wrote it.

    Providers write the sender's international number without the ``+``
    (``905321234567``), so bare digits are read as international first, then with the
    default region. (phonenumbers is imported here, at the first inbound message, not
    with the server: docs/architecture.md, "What a start imports".)
    """
    from appliance.imports.normalise import Normalised, normalise_msisdn

    given = msisdn.strip()
    digits = given.removeprefix("+")
    if given and digits.isascii() and digits.isdigit() and not digits.startswith("0"):
        found = normalise_msisdn("+" + digits, "")
        if isinstance(found, Normalised):
            return found.msisdn
    found = normalise_msisdn(given, region)
    return found.msisdn if isinstance(found, Normalised) else given


def store_raw(conn: Connection, raw: RawCallback, now_ms: int, parsed: bool,
              error: str | None) -> int:
    """Keep the inbound request as received; returns its id."""
    row = conn.execute(
        "INSERT INTO raw_inbound (provider, method, content_type, query, body, received_at,"
        " parsed, error) VALUES (?, ?, ?, ?, ?, ?, ?, ?) RETURNING id",
        (raw.provider, raw.method, raw.content_type, raw.query, raw.body, now_ms,
         1 if parsed else 0, error),
    ).fetchone()
    assert row is not None
    return as_int(row[0])


def _accounts_for(conn: Connection, msisdn: str) -> list[int]:
    """The accounts that have a message to ``msisdn``, through any provider.

    One probe of ``messages_msisdn (account_id, msisdn)`` per account: accounts are few,
    messages many, and without statistics SQLite would read the whole index to answer
    "which accounts" in one search by number.
    """
    return [as_int(r[0]) for r in conn.execute(
        "SELECT a.id FROM accounts a WHERE EXISTS (SELECT 1 FROM messages m"
        " WHERE m.account_id = a.id AND m.msisdn = ?) ORDER BY a.id", (msisdn,))]


def _insert(conn: Connection, provider: str, key: str | None, msisdn: str,
            msg: InboundMessage, text: str, received: int, raw_id: int,
            now_ms: int) -> tuple[int, bool]:
    """The message's row, inserted or found by its key: ``(id, new)``. Without a key
    (the provider gave no id) every message is new."""
    row = conn.execute(
        "INSERT INTO inbound_messages (provider, provider_msg_id, msisdn, to_number, text,"
        " parts, parts_received, sent_at, received_at, raw_id)"
        " VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)"
        " ON CONFLICT (provider, provider_msg_id) DO NOTHING RETURNING id",
        (provider, key, msisdn, msg.to, text, max(msg.parts, 1), received,
         max(msg.sent_at_ms, 0), now_ms, raw_id),
    ).fetchone()
    if row is not None:
        return as_int(row[0]), True
    found = conn.execute("SELECT id FROM inbound_messages WHERE provider = ?"
                         " AND provider_msg_id = ?", (provider, key)).fetchone()
    assert found is not None
    return as_int(found[0]), False


def _repeat(conn: Connection, raw_id: int, inbound_id: int) -> InboundResult:
    """A provider's retry of something already stored: counted, nothing else changes."""
    row = conn.execute("UPDATE inbound_messages SET repeats = repeats + 1 WHERE id = ?"
                       " RETURNING keyword", (inbound_id,)).fetchone()
    keyword = None if row is None or row[0] is None else str(row[0])
    return InboundResult(raw_id, inbound_id, True, keyword)


def _record_accounts(conn: Connection, inbound_id: int, msisdn: str) -> list[int]:
    """The accounts the message is listed to: found when it was first filed, else now."""
    found = [as_int(r[0]) for r in conn.execute(
        "SELECT account_id FROM inbound_accounts WHERE inbound_id = ?", (inbound_id,))]
    if found:
        return found
    accounts = _accounts_for(conn, msisdn)
    for account_id in accounts:
        conn.execute("INSERT INTO inbound_accounts (account_id, inbound_id) VALUES (?, ?)"
                     " ON CONFLICT (account_id, inbound_id) DO NOTHING", (account_id, inbound_id))
    return accounts


def _stop(conn: Connection, inbound_id: int, provider: str, msisdn: str,
          keyword: str, accounts: Sequence[int], now_ms: int) -> tuple[int, ...]:
    conn.execute("UPDATE inbound_messages SET keyword = ? WHERE id = ?", (keyword, inbound_id))
    if not msisdn.startswith("+"):
        return ()  # not a number anyone can send to
    reason = f"{keyword} received from {msisdn} via {provider} (inbound message {inbound_id})"
    if not accounts:  # nobody can place it: it binds every account, the safe side
        accounts = [as_int(r[0]) for r in conn.execute("SELECT id FROM accounts ORDER BY id")]
    added = []
    for account_id in accounts:
        _, created = suppressions.add(conn, account_id, msisdn, reason, "inbound", now_ms,
                                      inbound_id=inbound_id)
        if created:
            added.append(account_id)
    return tuple(added)


def _filed(conn: Connection, rules: InboundRules, raw_id: int, inbound_id: int,
           provider: str, msisdn: str, text: str, now_ms: int) -> InboundResult:
    """A whole message is here: its accounts, and a STOP honoured."""
    accounts = _record_accounts(conn, inbound_id, msisdn)
    forward_inbound(conn, inbound_id, accounts, now_ms)
    keyword = rules.keywords.match(text)
    added: tuple[int, ...] = ()
    if keyword is not None:
        added = _stop(conn, inbound_id, provider, msisdn, keyword, accounts, now_ms)
    return InboundResult(raw_id, inbound_id, False, keyword, added)


def _file_part(conn: Connection, rules: InboundRules, provider: str, msisdn: str,
               msg: InboundMessage, raw_id: int, now_ms: int) -> InboundResult:
    assert msg.concat_ref is not None
    key = f"parts:{msisdn}:{msg.concat_ref}:{msg.parts}"
    inbound_id, _ = _insert(conn, provider, key, msisdn, msg, "", 0, raw_id, now_ms)
    # The message's row is locked to the end of the unit before its parts are read: two
    # processes filing two of its parts at once on PostgreSQL would each read only its
    # own and the earlier ones, and the message would never be whole (its STOP missed).
    # The second now waits here, then reads the first's part.
    lock = dialect.of(conn).for_update
    if lock:
        conn.execute(f"SELECT id FROM inbound_messages WHERE id = ?{lock}", (inbound_id,))
    conn.execute(
        "INSERT INTO inbound_parts (inbound_id, part, text, provider_msg_id)"
        " VALUES (?, ?, ?, ?) ON CONFLICT (inbound_id, part) DO NOTHING",
        (inbound_id, msg.part, msg.text, msg.provider_msg_id))
    if conn.changes() == 0:
        return _repeat(conn, raw_id, inbound_id)
    have = {as_int(p): str(t) for p, t in conn.execute(
        "SELECT part, text FROM inbound_parts WHERE inbound_id = ?", (inbound_id,))}
    text = "".join(have.get(i, MISSING_PART) for i in range(1, msg.parts + 1))
    conn.execute("UPDATE inbound_messages SET text = ?, parts_received = ? WHERE id = ?",
                 (text, len(have), inbound_id))
    if len(have) < msg.parts:
        _record_accounts(conn, inbound_id, msisdn)  # listed while incomplete
        return InboundResult(raw_id, inbound_id, False, None)
    return _filed(conn, rules, raw_id, inbound_id, provider, msisdn, text, now_ms)


def file_message(conn: Connection, rules: InboundRules, provider: str,
                 msg: InboundMessage, raw_id: int, now_ms: int) -> InboundResult:
    """File one inbound message or part of one (a part of a write unit)."""
    msisdn = sender_number(msg.msisdn, rules.region)
    if msg.concat_ref is not None and msg.parts > 1:
        return _file_part(conn, rules, provider, msisdn, msg, raw_id, now_ms)
    inbound_id, new = _insert(conn, provider, msg.provider_msg_id, msisdn, msg, msg.text, 1,
                              raw_id, now_ms)
    if not new:
        return _repeat(conn, raw_id, inbound_id)
    return _filed(conn, rules, raw_id, inbound_id, provider, msisdn, msg.text, now_ms)


def receive_request(conn: Connection, rules: InboundRules, raw: RawCallback,
                    messages: Sequence[InboundMessage], parse_error: str | None,
                    now_ms: int) -> InboundReceipt:
    """An inbound request's write unit: store it raw, then file its messages.

    The raw row is written first; filing runs under its own savepoint, so whatever goes
    wrong there leaves the request stored (marked unparsed, with the reason) and the
    caller still answers ``2xx``.
    """
    raw_id = store_raw(conn, raw, now_ms, parsed=parse_error is None, error=parse_error)
    receipt = InboundReceipt(raw_id, error=parse_error)
    if parse_error is not None:
        return receipt
    conn.execute("SAVEPOINT file_inbound")
    try:
        for msg in messages:
            receipt.results.append(file_message(conn, rules, raw.provider, msg, raw_id, now_ms))
    except STORAGE_ERRORS:
        raise  # not the request's fault: the unit fails, the caller answers 503
    except Exception as exc:  # keep the raw request whatever filing does
        conn.execute("ROLLBACK TO file_inbound")
        conn.execute("RELEASE file_inbound")
        error = f"{type(exc).__name__}: {exc}"[:500]
        conn.execute("UPDATE raw_inbound SET parsed = 0, error = ? WHERE id = ?",
                     (error, raw_id))
        return InboundReceipt(raw_id, error=error)
    conn.execute("RELEASE file_inbound")
    return receipt


def receive_inbound(conn: Connection, rules: InboundRules, provider: str, msisdn: str,
                    to: str, text: str, provider_msg_id: str | None, raw: bytes,
                    now_ms: int, *, sent_at_ms: int = 0, concat_ref: str | None = None,
                    part: int = 1, parts: int = 1) -> InboundReceipt:
    """One inbound message that came over a provider's own session (a write unit).

    For SMPP: call it, in a write unit, for a ``deliver_sm`` that is not a delivery
    receipt, with ``msisdn`` = ``source_addr``, ``to`` = ``destination_addr``, ``text``
    = the decoded ``short_message`` (or ``message_payload``), ``raw`` = the PDU's bytes
    as received and ``rules`` = ``InboundRules.from_settings(appliance.settings)``.
    ``provider_msg_id`` is the SMSC's id for the message when it gives one (a repeat of
    the same id is stored once), else None (then every ``deliver_sm`` is a new message).
    A message in parts (UDH concatenation) may be handed over part by part with
    ``concat_ref``/``part``/``parts``, or joined first. Answer the SMSC's
    ``deliver_sm_resp`` only after the unit committed; when it fails, answer with an
    error status (``ESME_RX_T_APPN``) so the SMSC sends it again.
    """
    message = InboundMessage(msisdn=msisdn, to=to, text=text, provider_msg_id=provider_msg_id,
                             sent_at_ms=sent_at_ms, concat_ref=concat_ref, part=part,
                             parts=parts)
    request = RawCallback(provider=provider, method="SMPP", content_type=SMPP_CONTENT_TYPE,
                          query="", body=raw)
    return receive_request(conn, rules, request, [message], None, now_ms)


# -- reading -------------------------------------------------------------------------

@dataclass(frozen=True)
class Inbound:
    id: int
    provider: str
    provider_msg_id: str | None
    msisdn: str
    to: str
    text: str
    parts: int
    parts_received: int
    sent_at: int
    received_at: int
    keyword: str | None
    repeats: int


_COLUMNS: Final = ("m.id, m.provider, m.provider_msg_id, m.msisdn, m.to_number, m.text,"
                   " m.parts, m.parts_received, m.sent_at, m.received_at, m.keyword,"
                   " m.repeats")


def _inbound(row: Any) -> Inbound:
    return Inbound(int(row[0]), str(row[1]), None if row[2] is None else str(row[2]),
                   str(row[3]), str(row[4]), str(row[5]), int(row[6]), int(row[7]),
                   int(row[8]), int(row[9]), None if row[10] is None else str(row[10]),
                   int(row[11]))


@dataclass(frozen=True)
class InboundPage:
    messages: list[Inbound]
    total: int
    more: bool


def list_inbound(conn: Connection, account_id: int, *, msisdn: str | None = None,
                 stops_only: bool = False, before_id: int | None = None,
                 limit: int = 100) -> InboundPage:
    """The account's inbound messages, newest first (a read unit)."""
    where = "a.account_id = ?"
    args: list[Any] = [account_id]
    if msisdn is not None:
        where += " AND m.msisdn = ?"
        args.append(msisdn)
    if stops_only:
        where += " AND m.keyword IS NOT NULL"
    joined = "FROM inbound_accounts a JOIN inbound_messages m ON m.id = a.inbound_id"
    total = conn.execute(f"SELECT count(*) {joined} WHERE {where}", tuple(args)).fetchone()
    if before_id is not None:
        where += " AND a.inbound_id < ?"
        args.append(before_id)
    rows = conn.execute(f"SELECT {_COLUMNS} {joined} WHERE {where}"
                        " ORDER BY a.inbound_id DESC LIMIT ?", (*args, limit + 1)).fetchall()
    return InboundPage([_inbound(r) for r in rows[:limit]], as_int(total[0]) if total else 0,
                       len(rows) > limit)


def prune_raw(conn: Connection, cutoff_ms: int, batch: int) -> int:
    """Delete up to ``batch`` raw inbound requests received before ``cutoff_ms``; the
    messages filed from them stay."""
    # In the order of raw_inbound_received: ordered by id, SQLite (without statistics)
    # read the whole table on every prune to find the few, or none, that were old.
    conn.execute(
        "DELETE FROM raw_inbound WHERE id IN (SELECT id FROM raw_inbound"
        " WHERE received_at < ? ORDER BY received_at, id LIMIT ?)", (cutoff_ms, batch))
    return int(conn.changes())
