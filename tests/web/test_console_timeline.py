"""What the message page tells a user about each report, and the chart's hour slots."""

from __future__ import annotations

from appliance.sending.messages import HistoryEntry, Message
from appliance.web.pages.chart import HOUR_MS, HourBar, hour_slots, open_by_hour_svg
from appliance.web.pages.timeline import message_timeline

T0 = 1_790_000_000_000


def message(state: str = "DELIVERED", submitted_at: int | None = T0 + 2_000,
            finalised_at: int | None = T0 + 5_000) -> Message:
    return Message(id=1, ref="01M8PW9A8Y6E12CP71BTY1CXZM", account_id=1, campaign_id=None,
                   provider="sim", msisdn="+905321234567", body="hi", state=state,
                   state_at=T0 + 4_000, attempts=1, next_attempt_at=T0, provider_msg_id="P1",
                   error=None, created_at=T0, updated_at=T0 + 5_000,
                   submitted_at=submitted_at, finalised_at=finalised_at)


def report(status: str, state: str, reported_at: int, received_at: int,
           outcome: str | None = "APPLIED", repeats: int = 0) -> HistoryEntry:
    return HistoryEntry(status=status, state=state, reported_at=reported_at,
                        received_at=received_at, repeats=repeats, outcome=outcome,
                        error_code=None)


def test_an_early_repeated_report_and_a_late_intermediate_one_are_explained() -> None:
    history = [
        report("delivered", "DELIVERED", T0 + 1_500, T0 + 1_000, repeats=2),  # before submit
        report("accepted", "ACCEPTED", T0 + 1_200, T0 + 3_000, outcome="STALE"),
    ]
    events = message_timeline(message(), history)
    assert [e.kind for e in events] == ["ours", "applied", "ours", "stale"]
    early = events[1]
    assert "early" in early.tags and "repeated ×2" in early.tags
    assert any("before our record of the submission" in n for n in early.notes)
    assert any("2 more times: the duplicates were ignored" in n for n in early.notes)
    stale = events[3]
    assert "not applied" in stale.tags
    assert any("final state DELIVERED" in n and "intermediate" in n for n in stale.notes)


def test_an_older_final_report_says_the_newer_one_won() -> None:
    history = [
        report("failed", "FAILED", T0 + 9_000, T0 + 3_000),
        report("delivered", "DELIVERED", T0 + 4_000, T0 + 6_000, outcome="STALE"),
    ]
    stale = message_timeline(message("FAILED"), history)[-1]
    assert any("older (by the provider's clock) than the FAILED report" in n
               for n in stale.notes)


def test_a_tie_without_provider_times_names_the_precedence() -> None:
    history = [report("delivered", "DELIVERED", 0, T0 + 3_000),
               report("expired", "EXPIRED", 0, T0 + 4_000, outcome="STALE")]
    stale = message_timeline(message(), history)[-1]
    assert any("DELIVERED takes precedence" in n for n in stale.notes)


def test_a_waiting_report_and_a_cut_off_are_shown() -> None:
    history = [report("accepted", "ACCEPTED", 0, T0 + 1_000, outcome=None)]
    events = message_timeline(message("UNKNOWN", submitted_at=None,
                                      finalised_at=T0 + 9_000), history)
    assert events[1].kind == "waiting" and "waiting in the inbox" in events[1].notes[-1]
    assert events[-1].title.startswith("Cut off")


def test_each_receipt_of_a_message_in_parts_is_labelled_with_its_part() -> None:
    two = Message(**{**message("FAILED").__dict__, "parts": 2, "encoding": "UCS-2",
                     "ucs2_because": "ş"})
    history = [
        HistoryEntry("failed", "FAILED", T0 + 3_000, T0 + 3_500, 0, "APPLIED", "8", part=2),
        HistoryEntry("delivered", "DELIVERED", T0 + 3_000, T0 + 4_000, 0, "APPLIED", None,
                     part=1),
        # Older than part 1's DELIVERED: stale for part 1, whatever part 2 said.
        HistoryEntry("accepted", "ACCEPTED", T0 + 2_500, T0 + 4_500, 0, "STALE", None,
                     part=1),
    ]
    events = message_timeline(two, history)
    titles = [e.title for e in events]
    assert titles[0] == "Accepted by the appliance (QUEUED, 2 UCS-2 parts)"
    assert "Report failed → FAILED, provider code 8 (part 2 of 2)" in titles
    assert "Report delivered → DELIVERED (part 1 of 2)" in titles
    stale = events[-1]
    assert stale.title.endswith("(part 1 of 2)")
    assert any("final state DELIVERED" in n for n in stale.notes)
    assert any("the part became FAILED" in n for n in events[2].notes)


def test_every_hour_of_the_window_gets_a_slot_and_bars_are_escaped_text() -> None:
    start = 10 * HOUR_MS + 123
    bars = [HourBar(12 * HOUR_MS, 3, 10)]
    slots = hour_slots(bars, start, 15 * HOUR_MS)
    assert [s.hour_ms // HOUR_MS for s in slots] == [10, 11, 12, 13, 14]
    assert [(s.still_open, s.total) for s in slots] == [(0, 0), (0, 0), (3, 10), (0, 0), (0, 0)]
    svg = str(open_by_hour_svg(bars, start, 15 * HOUR_MS))
    assert svg.count('class="total"') == 5 and svg.count('class="open"') == 1
    assert "3 still open of 10" in svg


def test_a_campaign_is_done_only_when_nothing_can_change_and_its_bar_is_never_blank() -> None:
    from appliance.web.pages.chart import state_bar_svg, state_groups
    from appliance.web.pages.sending import campaign_phase

    def data(state: str, counts: dict[str, int], total: int = 100) -> dict[str, object]:
        final = sum(n for s, n in counts.items()
                    if s in ("DELIVERED", "FAILED", "EXPIRED", "REJECTED", "UNKNOWN"))
        return {"state": state, "counts": counts, "total": total, "finalised": final}

    assert campaign_phase(data("RUNNING", {"QUEUED": 100})) == ("SENDING", 2)
    # Nothing left to send (the API's DONE) but 15 still SUBMITTED: not done yet.
    awaiting = data("DONE", {"SUBMITTED": 15, "DELIVERED": 85})
    assert campaign_phase(awaiting) == ("AWAITING REPORTS", 10)
    assert campaign_phase(data("DONE", {"DELIVERED": 90, "UNKNOWN": 10})) == ("DONE", None)
    assert campaign_phase(data("CANCELLED", {"CANCELLED": 60, "DELIVERED": 40})) == (
        "CANCELLED", None)
    assert campaign_phase(data("CANCELLED", {"CANCELLED": 60, "SUBMITTED": 40}))[1] == 10

    all_queued = state_groups({"QUEUED": 40}, 100)  # 60 more not even created yet
    assert dict((c, n) for c, _, n in all_queued)["waiting"] == 100
    svg = str(state_bar_svg({"QUEUED": 40}, 100))
    assert 'class="waiting"' in svg and 'width="1000.00"' in svg


def test_a_report_from_a_provider_whose_clock_is_ahead_is_listed_by_our_receive_time() -> None:
    # Received in the very millisecond we recorded the submission, stamped 90 s later by
    # the provider: it comes after the submission, with both times and the reason.
    history = [report("delivered", "DELIVERED", T0 + 92_000, T0 + 2_000)]
    events = message_timeline(message(), history)
    assert [e.title.split(" ")[0] for e in events] == ["Accepted", "Submitted", "Report"]
    last = events[-1]
    assert (last.at_ms, last.reported_at) == (T0 + 2_000, T0 + 92_000)
    assert "early" not in last.tags
    assert any("90 s after we received it" in n and "clock is ahead" in n for n in last.notes)


def test_the_last_hours_label_ends_inside_the_chart() -> None:
    import re

    from appliance.web.pages.chart import LABEL_HALF_W, WIDTH

    end = 100 * HOUR_MS
    svg = str(open_by_hour_svg([], end - 48 * HOUR_MS, end))
    labels = re.findall(r'<text x="([\d.]+)" y="\d+" text-anchor="(middle|end)">\d\d:00</text>',
                        svg)
    assert len(labels) >= 8
    for x, anchor in labels:
        right = float(x) + (LABEL_HALF_W if anchor == "middle" else 0)
        assert right <= WIDTH, (x, anchor)
