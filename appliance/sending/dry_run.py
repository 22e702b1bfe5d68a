"""The dry run: what a campaign would send, counted before anything is written (MSG-2).

Counted after personalisation (OPS-3): each contact's text, its encoding and parts,
and the contacts on the suppression list, whose messages would be created
``CANCELLED``; in Turkey also those without consent (IYS-2) and those that already have
the same text today (IYS-4), created ``CANCELLED`` too.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace
from typing import Any

from appliance.message_text.segments import TURKISH_TABLES, Counting, Segmentation, segment
from appliance.optout.consents import ALLOWED_SQL, no_consent_count
from appliance.optout.suppressions import suppressed_count
from appliance.sending.campaigns import list_id_of
from appliance.sending.duplicates import DayKeys, live_keys
from appliance.sending.personalise import Template, parse
from appliance.store.connection import Connection


@dataclass(frozen=True)
class DryRun:
    """What a campaign would send, counted after personalisation (MSG-2, OPS-3)."""

    list_name: str
    provider: str
    messages: int
    parts: int
    suppressed: int
    longest: Segmentation  # the message with the most parts (then the most units)
    longest_text: str
    ucs2_messages: int
    ucs2_because: str | None
    personalised: bool
    contacts: int = 0
    last_contact_id: int = 0
    ucs2_parts: int = 0  # what the same messages would take in UCS-2 (ENC-1)
    turkish_messages: int = 0  # messages that go as GSM-7 Turkish
    no_consent: int = 0  # IYS-2: left out of a commercial campaign for want of consent
    duplicate_today: int = 0  # IYS-4: the same text went to the number today

    @property
    def encoding(self) -> str:
        """UCS-2 when any message travels as UCS-2, else GSM-7 Turkish when any does."""
        if self.ucs2_messages:
            return "UCS-2"
        return "GSM-7 Turkish" if self.turkish_messages else "GSM-7"

    @property
    def segmentation(self) -> Segmentation:
        return self.longest


def _better(seg: Segmentation, than: Segmentation | None) -> bool:
    return than is None or (seg.count, seg.units) > (than.count, than.units)


def turkish_sql(prefixes: Sequence[str]) -> tuple[str, tuple[str, ...]]:
    """A SQL truth value over ``c.msisdn``: the number takes the Turkish tables."""
    if not prefixes:
        return "0", ()
    return ("(" + " OR ".join("c.msisdn LIKE ?" for _ in prefixes) + ")",
            tuple(p + "%" for p in prefixes))


@dataclass(frozen=True)
class _How:
    """How the provider sends: the numbers it sends the Turkish tables to, its count."""

    prefixes: Sequence[str]
    counting: Counting

    def to(self, turkish: bool) -> Counting:
        return self.counting if turkish else self.counting.plain


def dry_run(conn: Connection, account_id: int, list_name: str, provider: str,
            body: str, template: Template | None = None,
            turkish_prefixes: Sequence[str] = (), consent_gate: bool = False,
            day_keys: DayKeys | None = None, counting: Counting = TURKISH_TABLES) -> DryRun:
    """Count what a campaign to ``list_name`` would send (a read unit; writes nothing).

    ``messages`` are the contacts that would be sent to, ``suppressed`` those on the
    account's suppression list (their messages would be created ``CANCELLED``), and
    ``parts`` the SMS parts of the texts as each contact would get it. A personalised
    body is rendered once per distinct name (the text depends on nothing else).
    ``turkish_prefixes``: the numbers the provider sends the Turkish tables to (ENC-1);
    ``counting``: how its kind sends and counts (its tables, its count).
    ``consent_gate``: those without consent are left out (IYS-2). ``day_keys`` (with
    ``[compliance] country = "TR"``): those whose text already went to them today are
    left out too, and counted (IYS-4), as the campaign's expansion would.
    """
    how = _How(turkish_prefixes, counting)
    plan = _counted(conn, account_id, list_name, provider, body, template or parse(body),
                    how, consent_gate)
    if day_keys is None or plan.messages == 0:
        return plan
    return _less_repeats(conn, plan, account_id, template or parse(body), how,
                         consent_gate, day_keys)


def _sendable_sql(account_id: int, consent_gate: bool) -> str:
    consented = (f" AND EXISTS (SELECT 1 FROM consents k WHERE k.account_id = {int(account_id)}"
                 f" AND k.msisdn = c.msisdn AND {ALLOWED_SQL})") if consent_gate else ""
    return ("NOT EXISTS (SELECT 1 FROM suppressions s WHERE"
            f" s.account_id = ? AND s.msisdn = c.msisdn){consented}")


def _less_repeats(conn: Connection, plan: DryRun, account_id: int, template: Template,
                  how: _How, consent_gate: bool, day_keys: DayKeys) -> DryRun:
    """``plan`` without the messages a live message of today already carries the key of.

    The sendable contacts whose number has a key of that day at all are found along
    ``messages_msisdn (account_id, msisdn, dup_key)`` (a key leads with its day, so one
    range of the number's entries; usually none), then only their keys are worked out and
    looked up, and their parts taken off."""
    list_id = list_id_of(conn, account_id, plan.list_name)
    name_sql = "c.name" if template.personalised else "NULL"
    turkish, args = turkish_sql(how.prefixes)
    day = day_keys.day
    rows: list[Any] = conn.execute(
        f"SELECT c.msisdn, {name_sql}, {turkish} FROM contacts c WHERE c.list_id = ?"
        " AND c.id <= ? AND EXISTS (SELECT 1 FROM messages m WHERE m.account_id = ?"
        " AND m.msisdn = c.msisdn AND m.dup_key > ? AND m.dup_key < ?)"
        f" AND {_sendable_sql(account_id, consent_gate)}",
        (*args, list_id, plan.last_contact_id, account_id, day, day[:-1] + "0",
         account_id)).fetchall()
    if not rows:
        return plan
    texts: dict[Any, str] = {}
    keyed: dict[str, tuple[str, bool]] = {}
    numbers: dict[str, str] = {}
    for msisdn, name, to_turkey in rows:
        text = texts.get(name)
        if text is None:
            text = texts[name] = template.render(None if name is None else str(name))
        key = day_keys.of(str(msisdn), text)
        keyed[key], numbers[key] = (text, bool(to_turkey)), str(msisdn)
    repeats = [keyed[k] for k in live_keys(conn, account_id,
                                           ((numbers[k], k) for k in keyed))]
    if not repeats:
        return plan
    segs = {key: segment(key[0], how.to(key[1])) for key in set(repeats)}
    less = [segs[key] for key in repeats]
    return replace(
        plan, messages=plan.messages - len(less),
        parts=plan.parts - sum(s.count for s in less),
        ucs2_parts=plan.ucs2_parts - sum(s.ucs2_parts for s in less),
        ucs2_messages=plan.ucs2_messages - sum(s.encoding == "UCS-2" for s in less),
        turkish_messages=plan.turkish_messages - sum(
            s.encoding == "GSM-7 Turkish" for s in less),
        duplicate_today=len(less))


def _counted(conn: Connection, account_id: int, list_name: str, provider: str,
             body: str, template: Template, how: _How, consent_gate: bool) -> DryRun:
    """The dry run's counts but for today's repeats."""
    list_id = list_id_of(conn, account_id, list_name)
    row: Any = conn.execute(
        "SELECT COUNT(*), COALESCE(MAX(id), 0) FROM contacts WHERE list_id = ?",
        (list_id,)).fetchone()
    contacts, last_id = int(row[0]), int(row[1])
    suppressed = suppressed_count(conn, account_id, list_id)
    # A commercial campaign in Turkey: those without consent are left out (IYS-2).
    no_consent = no_consent_count(conn, account_id, list_id) if consent_gate else 0
    static = segment(template.render(None), how.counting.plain)
    if not template.personalised and not how.prefixes:
        sent = contacts - suppressed - no_consent
        return DryRun(list_name, provider, sent, sent * static.count, suppressed, static,
                      template.render(None), sent if static.encoding == "UCS-2" else 0,
                      static.ucs2_because, False, contacts, last_id, sent * static.ucs2_parts,
                      no_consent=no_consent)
    consented = (f" AND EXISTS (SELECT 1 FROM consents k WHERE k.account_id = {int(account_id)}"
                 f" AND k.msisdn = c.msisdn AND {ALLOWED_SQL})") if consent_gate else ""
    name_sql = "c.name" if template.personalised else "NULL"
    turkish, args = turkish_sql(how.prefixes)
    groups: list[Any] = conn.execute(
        f"SELECT {name_sql}, {turkish}, count(*) FROM contacts c WHERE c.list_id = ?"
        " AND NOT EXISTS (SELECT 1 FROM suppressions s WHERE s.account_id = ?"
        f" AND s.msisdn = c.msisdn){consented} GROUP BY 1, 2",
        (*args, list_id, account_id)).fetchall()
    messages = parts = ucs2 = ucs2_parts = in_turkish = 0
    longest: Segmentation | None = None
    longest_text = template.render(None)
    because: str | None = None  # from the largest group of UCS-2 messages
    because_count = 0
    seen: dict[tuple[str, bool], Segmentation] = {}
    for name, to_turkey, count in groups:
        text = template.render(None if name is None else str(name))
        key = (text, bool(to_turkey))
        seg = seen.get(key)
        if seg is None:
            seg = seen[key] = segment(text, how.to(key[1]))
        n = int(count)
        messages += n
        parts += n * seg.count
        ucs2_parts += n * seg.ucs2_parts
        if seg.encoding == "GSM-7 Turkish":
            in_turkish += n
        if seg.encoding == "UCS-2":
            ucs2 += n
            if n > because_count:
                because, because_count = seg.ucs2_because, n
        if _better(seg, longest):
            longest, longest_text = seg, text
    return DryRun(list_name, provider, messages, parts, suppressed, longest or static,
                  longest_text, ucs2, because, template.personalised, contacts, last_id,
                  ucs2_parts, in_turkish, no_consent)
