"""A message's life as a timeline: our own steps and every report the provider sent.

Built from the message row and its kept report history (``message_history``), in the
order things reached us: by our own clock (when we recorded a step, when a report was
received), never by the provider's, whose clock may be ahead or behind. A report shows
both times, and says so when the provider's is ahead of ours; at the same millisecond
our own step comes first. (The API's ``history`` keeps its own order.) Each report says
what became of it: applied, still waiting in the inbox, or kept but not applied, and
then why, replaying the newer-wins rule (``appliance.reports.states.decide``) over the
reports applied before it to the same part. For a message in several parts each report
is labelled with its part. Reports that arrived before our own record of the submission
(the race the inbox absorbs) and reports that came more than once (repeats, ignored)
are marked.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

from appliance.reports.states import (
    CUT_OFF,
    FINAL_STATES,
    REPORTED_FINAL,
    Verdict,
    decide,
)
from appliance.sending.messages import Action, HistoryEntry, Message


@dataclass(frozen=True)
class Event:
    at_ms: int
    title: str
    kind: str  # "ours", "applied", "stale" or "waiting"
    tags: tuple[str, ...] = ()
    notes: tuple[str, ...] = ()
    reported_at: int | None = None
    order: int = 0


@dataclass
class _Replay:
    state: str = "SUBMITTED"
    state_at: int = 0
    notes: list[str] = field(default_factory=list)


def stale_reason(current: str, current_at: int, reported: str, reported_at: int) -> str:
    """Why a report of ``reported`` did not replace ``current`` (newer wins, DLR-5)."""
    if decide(current, current_at, reported, reported_at) is not Verdict.STALE:
        return "not applied: the message already had a newer or stronger state"
    if current == CUT_OFF:
        return (f"not applied: after the cut-off ({CUT_OFF}) only a final report from the"
                " provider changes the state, and this one is intermediate")
    if current in REPORTED_FINAL and reported not in FINAL_STATES:
        return (f"not applied: the message already had the final state {current}; an"
                " intermediate report never overwrites a final one (it arrived out of order)")
    if current_at and reported_at and reported_at < current_at:
        return (f"not applied: older (by the provider's clock) than the {current} report"
                " already applied; reports arrive out of order and the newer one wins")
    return (f"not applied: same provider time as {current} (or none given), and"
            f" {current} takes precedence")


def part_label(message: Message, part: int | None) -> str:
    """Which part a report was about, for a message in several parts ('' for one)."""
    if message.parts <= 1 and part in (None, 1):
        return ""
    if part is None:
        return " (whole message)"
    return f" (part {part} of {message.parts})" if part <= message.parts else f" (part {part})"


def message_timeline(message: Message, history: list[HistoryEntry],
                     actions: Sequence[Action] = ()) -> list[Event]:
    encoding = f", {message.parts} {message.encoding} parts" if message.parts > 1 else ""
    events: list[Event] = [Event(message.created_at,
                                 f"Accepted by the appliance (QUEUED{encoding})",
                                 "ours", order=0)]
    if message.submitted_at is not None:
        pid = f", provider id {message.provider_msg_id}" if message.provider_msg_id else ""
        events.append(Event(message.submitted_at,
                            f"Submitted to {message.provider} (SUBMITTED{pid})", "ours", order=2))
    # Newer wins per part: each part's reports are replayed on their own.
    replays: dict[int | None, _Replay] = {}
    submitted = message.submitted_at
    for i, h in enumerate(sorted(history, key=lambda h: h.received_at)):
        replay = replays.setdefault(h.part, _Replay())
        label = part_label(message, h.part)
        tags: list[str] = []
        notes: list[str] = []
        if submitted is None or h.received_at < submitted:
            tags.append("early")
            notes.append("arrived before our record of the submission (the race): it waited"
                         " in the inbox and was matched once the send was recorded")
        if h.repeats:
            tags.append(f"repeated ×{h.repeats}")
            notes.append(f"the same report came {h.repeats} more time"
                         f"{'' if h.repeats == 1 else 's'}: the duplicates were ignored")
        if h.outcome == "APPLIED":
            kind = "applied"
            if label:
                notes.append(f"applied: the part became {h.state}; the message is"
                             " the aggregate of its parts")
            else:
                notes.append(f"applied: the message became {h.state}")
            replay.state, replay.state_at = h.state, h.reported_at
        elif h.outcome == "STALE":
            kind = "stale"
            tags.append("not applied")
            notes.append(stale_reason(replay.state, replay.state_at, h.state, h.reported_at))
        else:
            kind = "waiting"
            notes.append("waiting in the inbox for its message")
        ahead_s = (h.reported_at - h.received_at) / 1000 if h.reported_at else 0
        if ahead_s >= 1:
            notes.append(f"the provider's time is {ahead_s:,.0f} s after we received it (its"
                         " clock is ahead of ours): listed by when it reached us")
        code = f", provider code {h.error_code}" if h.error_code else ""
        events.append(Event(h.received_at, f"Report {h.status} → {h.state}{code}{label}", kind,
                            tuple(tags), tuple(notes), h.reported_at or None, order=3 + i))
    for a in actions:
        verb = "Resend requested" if a.action == "resend" else "Marked failed"
        note = ("the provider may already have had it: it was submitted once more"
                if a.action == "resend" else "final: never sent again")
        events.append(Event(a.at, f"{verb} by {a.actor} ({a.from_state} → {a.to_state})",
                            "ours", ("decision",), (note,), order=10**8))
    if message.state == CUT_OFF and message.finalised_at is not None:
        events.append(Event(message.finalised_at, "Cut off: no final report within the"
                            f" delivery window ({CUT_OFF})", "ours", order=10**9))
    elif message.error and message.state in ("RETRY", "UNCERTAIN", "REJECTED", "CANCELLED"):
        events.append(Event(message.updated_at, f"{message.state}: {message.error}", "ours",
                            order=10**9))
    return sorted(events, key=lambda e: (e.at_ms, e.order))
