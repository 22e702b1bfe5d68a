"""OPS-1, OPS-2, OPS-6 in the store: what the sender's claim takes, in which order, and
what a pause, a crash or a closed window does to it. A real SQLite file through the
writer; the end-to-end behaviour (a real server and provider) is in the other tests."""

from __future__ import annotations

from collections import Counter

import apsw

from appliance.sending import campaign_messages, dry_run, steering
from appliance.sending import campaigns as camp
from appliance.sending.accept import NewMessage, insert_message
from appliance.sending.claims import claim_due, mark_sending
from appliance.sending.recovery import recover_interrupted
from appliance.sending.windows import SendWindow
from appliance.store import Store

NOW = 1_800_000_000_000  # 2027-01-15T08:00:00Z
PROVIDER = "sim"


def _account(c: apsw.Connection) -> int:
    row = c.execute("SELECT id FROM accounts WHERE name = 'acme'").fetchone()
    if row:
        return int(row[0])
    return int(c.execute("INSERT INTO accounts (name, created_at) VALUES ('acme', 0)"
                         " RETURNING id").fetchone()[0])  # type: ignore[index]


def make_campaign(store: Store, name: str, contacts: int, *, send_at: int | None = None,
                  window: SendWindow | None = None, body: str = "hi {name|there}") -> int:
    def unit(c: apsw.Connection) -> int:
        acct = _account(c)
        list_id = int(c.execute("INSERT INTO lists (account_id, name, created_at)"
                                " VALUES (?, ?, 0) RETURNING id", (acct, name)
                                ).fetchone()[0])  # type: ignore[index]
        c.executemany("INSERT INTO contacts (list_id, msisdn, name, created_at)"
                      " VALUES (?, ?, ?, 0)",
                      [(list_id, f"+90532{list_id:02d}{i:05d}", f"N{i}") for i in range(contacts)])
        new = camp.NewCampaign(acct, name, PROVIDER, body, f"key-{name}", send_at, window)
        found, _ = camp.create_campaign(c, new, NOW)
        refs = iter(range(10**9))
        while campaign_messages.expand_chunk(c, camp.get_campaign(c, found.id),  # type: ignore[arg-type]
                                lambda: f"{name}-{next(refs)}", NOW):
            pass
        return found.id

    return store.writer.call(unit)


def single(store: Store, ref: str, priority: int = camp.PRIORITY_HIGH) -> None:
    store.writer.call(lambda c: insert_message(c, NewMessage(
        _account(c), PROVIDER, "+905559990000", "one", priority=priority), ref, NOW))


def claim(store: Store, limit: int, now: int = NOW, turn: int = 0) -> list[str]:
    got = store.writer.call(lambda c: claim_due(c, PROVIDER, now, limit, turn))
    return [m.ref for m in got]


def campaign_of(ref: str) -> str:
    return ref.split("-")[0]


def test_a_single_message_goes_before_a_campaigns_backlog(store: Store) -> None:
    make_campaign(store, "big", 300)
    first = claim(store, 50)
    single(store, "urgent")
    second = claim(store, 50)
    assert "urgent" not in first
    assert second[0] == "urgent"  # ahead of the 49 campaign messages claimed with it


def test_normal_priority_singles_share_the_rate_with_the_campaigns(store: Store) -> None:
    make_campaign(store, "big", 300)
    for i in range(30):
        single(store, f"normal-{i}", camp.PRIORITY_NORMAL)
    assert Counter(campaign_of(r) for r in claim(store, 10)) == {"normal": 5, "big": 5}
    for i in range(30):
        single(store, f"high-{i}")
    assert Counter(campaign_of(r) for r in claim(store, 10)) == {"high": 10}


def test_running_campaigns_share_each_claim_evenly_whatever_their_size(store: Store) -> None:
    make_campaign(store, "aaa", 1000)
    make_campaign(store, "bbb", 100)
    make_campaign(store, "ccc", 1000)
    counts: Counter[str] = Counter()
    for turn in range(6):
        counts.update(campaign_of(r) for r in claim(store, 50, turn=turn))
    # 300 claimed: about 100 each (round robin: the remainder rotates)
    assert sum(counts.values()) == 300
    assert all(abs(n - 100) <= 2 for n in counts.values()), counts
    for turn in range(6, 10):
        counts.update(campaign_of(r) for r in claim(store, 50, turn=turn))
    # the small one is done at 100; the others share what it leaves
    assert counts["bbb"] == 100 and abs(counts["aaa"] - counts["ccc"]) <= 2
    assert counts["aaa"] + counts["ccc"] == 400


def test_the_claim_interleaves_the_campaigns(store: Store) -> None:
    make_campaign(store, "aaa", 100)
    make_campaign(store, "bbb", 100)
    got = [campaign_of(r) for r in claim(store, 10)]
    assert got == ["aaa", "bbb"] * 5


def test_a_paused_scheduled_or_closed_campaign_is_not_claimed(store: Store) -> None:
    paused = make_campaign(store, "paused", 20)
    make_campaign(store, "later", 20, send_at=NOW + 3_600_000)
    # 08:00Z is 11:00 in Istanbul: a 12:00-18:00 window is closed
    make_campaign(store, "closed", 20, window=SendWindow(12 * 60, 18 * 60, "Europe/Istanbul"))
    make_campaign(store, "open", 20, window=SendWindow(9 * 60, 20 * 60, "Europe/Istanbul"))
    acct = store.readers.call(_account)
    store.writer.call(lambda c: steering.pause_campaign(c, paused, acct, NOW))
    assert {campaign_of(r) for r in claim(store, 100)} == {"open"}
    assert {campaign_of(r) for r in claim(store, 100, now=NOW + 3_600_000)} == {"later", "closed"}


def test_a_pause_gives_back_what_was_reserved_and_nothing_of_it_can_be_marked(
        store: Store) -> None:
    cid = make_campaign(store, "p", 30)
    reserved = store.writer.call(lambda c: claim_due(c, PROVIDER, NOW, 10))
    acct = store.readers.call(_account)
    store.writer.call(lambda c: steering.pause_campaign(c, cid, acct, NOW))
    assert store.writer.call(lambda c: mark_sending(c, reserved, NOW)) == []
    states = store.readers.call(lambda c: dict(c.execute(
        "SELECT state, count(*) FROM messages WHERE claimed_at IS NULL GROUP BY state")))
    assert states == {"QUEUED": 30}
    store.writer.call(lambda c: steering.resume_campaign(c, cid, acct, NOW))
    again = store.writer.call(lambda c: claim_due(c, PROVIDER, NOW, 10))
    marked = store.writer.call(lambda c: mark_sending(c, again, NOW))
    assert len(marked) == 10 and all(m.attempts == 1 for m in marked)


def test_a_cancel_leaves_nothing_to_send_and_a_reservation_cannot_be_marked(
        store: Store) -> None:
    cid = make_campaign(store, "c", 30)
    reserved = store.writer.call(lambda c: claim_due(c, PROVIDER, NOW, 10))
    acct = store.readers.call(_account)
    _, cancelled = store.writer.call(lambda c: steering.cancel_campaign(c, cid, acct, NOW))
    assert cancelled == 30
    assert store.writer.call(lambda c: mark_sending(c, reserved, NOW)) == []
    assert claim(store, 100) == []


def test_after_a_crash_only_the_marked_messages_are_uncertain(store: Store) -> None:
    make_campaign(store, "k", 40)
    reserved = store.writer.call(lambda c: claim_due(c, PROVIDER, NOW, 40))
    store.writer.call(lambda c: mark_sending(c, reserved[:4], NOW))
    uncertain = store.writer.call(lambda c: recover_interrupted(c, PROVIDER, NOW, False))
    assert uncertain == 4
    states = store.readers.call(lambda c: dict(c.execute(
        "SELECT state, count(*) FROM messages WHERE claimed_at IS NULL GROUP BY state")))
    assert states == {"UNCERTAIN": 4, "QUEUED": 36}
    assert len(claim(store, 100)) == 36  # the rest is sent in its turn, never twice


def test_the_campaign_is_personalised_per_contact_and_counts_its_real_parts(
        store: Store) -> None:
    long_name = "Ş" * 80  # UCS-2, and two parts for this one contact
    def unit(c: apsw.Connection) -> int:
        acct = _account(c)
        list_id = int(c.execute("INSERT INTO lists (account_id, name, created_at)"
                                " VALUES (?, 'n', 0) RETURNING id", (acct,)
                                ).fetchone()[0])  # type: ignore[index]
        c.executemany("INSERT INTO contacts (list_id, msisdn, name, created_at)"
                      " VALUES (?, ?, ?, 0)",
                      [(list_id, "+905320000001", "Ayse"), (list_id, "+905320000002", None),
                       (list_id, "+905320000003", long_name)])
        return acct

    acct = store.writer.call(unit)
    plan = store.readers.call(lambda c: dry_run.dry_run(c, acct, "n", PROVIDER,
                                                     "Merhaba {name|Musterimiz}!"))
    assert (plan.messages, plan.parts, plan.ucs2_messages) == (3, 4, 1)
    assert plan.longest.count == 2 and plan.ucs2_because == "Ş"
    cid = store.writer.call(lambda c: camp.create_campaign(c, camp.NewCampaign(
        acct, "n", PROVIDER, "Merhaba {name|Musterimiz}!", "k"), NOW)[0].id)
    store.writer.call(lambda c: campaign_messages.expand_chunk(c, camp.get_campaign(c, cid),  # type: ignore[arg-type]
                                                  iter(["r1", "r2", "r3"]).__next__, NOW))
    bodies = store.readers.call(lambda c: sorted(str(r[0]) for r in c.execute(
        "SELECT body FROM messages")))
    assert bodies == ["Merhaba Ayse!", "Merhaba Musterimiz!", f"Merhaba {long_name}!"]
    progress = store.readers.call(lambda c: camp.campaign_progress(
        c, camp.get_campaign(c, cid), NOW))  # type: ignore[arg-type]
    assert progress.parts == 4 and progress.max_parts == 2


def test_a_message_claimed_in_time_and_marked_after_its_validity_is_cancelled_unsent(
        store: Store) -> None:
    """ROUTE-4 at the mark: a message reserved while still valid whose validity runs out
    before its bytes would go (the lane held it between the claim and the mark) is made
    ``CANCELLED``, never ``SENDING``, and counts no attempt; a valid one beside it goes."""
    store.writer.call(lambda c: insert_message(c, NewMessage(
        _account(c), PROVIDER, "+905559990001", "otp", validity_s=30), "short", NOW))
    store.writer.call(lambda c: insert_message(c, NewMessage(
        _account(c), PROVIDER, "+905559990002", "otp", validity_s=600), "long", NOW))
    reserved = store.writer.call(lambda c: claim_due(c, PROVIDER, NOW + 29_000, 10, 0))
    assert sorted(m.ref for m in reserved) == ["long", "short"]  # both valid at the claim
    marked = store.writer.call(lambda c: mark_sending(c, reserved, NOW + 31_000))
    assert [m.ref for m in marked] == ["long"]
    rows = {str(r[0]): (r[1], r[2], r[3]) for r in store.writer.call(lambda c: c.execute(
        "SELECT ref, state, error, attempts FROM messages").fetchall())}
    assert rows["short"] == ("CANCELLED", "expired before sending", 0)
    assert rows["long"] == ("SENDING", None, 1)
