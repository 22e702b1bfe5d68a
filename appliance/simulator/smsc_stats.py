"""What the simulated SMSC saw (:class:`SmscStats`), and the texts it read back.

:class:`SmscStats` counts what came in per segment (``destination`` and
``short_message``, UDH included), so a test can prove nothing was sent twice:
``received`` counts every ``submit_sm`` (a throttled one comes again), ``taken`` the
times a segment was taken (must be once).

Each segment taken is also read as a handset would (ENC-1): its text decoded in its
``data_coding``, a GSM-7 one with the national language tables its UDH announces (IEI
``0x24``/``0x25``, TS 23.040 §9.2.3.24.15/16), its septets one an octet or packed as
the SMSC was told (``septets``, mirroring the provider's option), and the parts of a
concatenated message joined again in order once all have come. ``texts`` lists
``(destination, text)`` of every message so read, so a test can prove the text sent is
the text a handset shows.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field

from appliance.smpp import pdu
from appliance.smpp.deliver import message_text, shift_tables, split_udh
from appliance.smpp.encoding import gsm7_septets

SegmentKey = tuple[str, bytes]  # (destination_addr, short_message)
MessageKey = tuple[str, int, int]  # (destination_addr, concatenation ref, total)


@dataclass
class SmscStats:
    received: Counter[SegmentKey] = field(default_factory=Counter)  # every submit_sm
    taken: Counter[SegmentKey] = field(default_factory=Counter)  # taken (must be once each)
    accepted: dict[SegmentKey, str] = field(default_factory=dict)  # taken -> message id
    finals: dict[str, str] = field(default_factory=dict)  # message id -> final word
    silent: set[str] = field(default_factory=set)  # message ids never reported
    receipts_written: Counter[str] = field(default_factory=Counter)  # deliver_sm per id
    receipts_acked: dict[str, list[str]] = field(default_factory=dict)  # ROK'd words per id
    deliver_statuses: Counter[int] = field(default_factory=Counter)  # deliver_sm_resp codes
    submit_statuses: Counter[int] = field(default_factory=Counter)  # what we answered
    mo_acked: list[str] = field(default_factory=list)  # inbound texts answered ESME_ROK
    binds: int = 0
    bind_refused: int = 0
    enquire_links: int = 0
    unbinds: int = 0
    unanswered: int = 0
    drops: int = 0
    max_outstanding: int = 0  # most submit_sm received and not yet answered on a session
    arrivals: list[float] = field(default_factory=list)  # monotonic time of each submit_sm
    texts: list[tuple[str, str]] = field(default_factory=list)  # (destination, whole text)
    pending: dict[MessageKey, dict[int, str]] = field(default_factory=dict)  # parts so far
    # ROUTE-4: the validity_period each segment came with ("": the SMSC's default).
    validity: dict[SegmentKey, str] = field(default_factory=dict)

    # ``received`` is keyed by what was sent: two different messages with the same
    # text to the same number count as one segment sent twice, so tests vary the text.

    @property
    def submits(self) -> int:
        return sum(self.received.values())

    def duplicates(self) -> dict[SegmentKey, int]:
        """Segments that arrived more than once (there must be none)."""
        return {key: n for key, n in self.received.items() if n > 1}

    def read(self, sm: pdu.ShortMessage, packed: bool = False) -> None:
        """Read a segment taken as a handset does; a whole message goes to ``texts``."""
        payload, concat = split_udh(sm.esm_class, sm.short_message)
        tables = shift_tables(sm.esm_class, sm.short_message)
        if sm.data_coding == 0 and packed:
            payload = gsm7_septets(payload, len(sm.short_message) - len(payload), "packed")
        text = message_text(sm.data_coding, payload, tables)
        if text is None:
            return
        if concat is None:
            self.texts.append((sm.destination_addr, text))
            return
        ref, total, seq = concat
        key = (sm.destination_addr, ref, total)
        parts = self.pending.setdefault(key, {})
        parts[seq] = text
        if len(parts) == total and set(parts) == set(range(1, total + 1)):
            del self.pending[key]
            self.texts.append((sm.destination_addr, "".join(parts[i] for i in sorted(parts))))

    def snapshot(self, sessions: int) -> dict[str, object]:
        """Everything held, as JSON (segments as ``dest:hex``)."""

        def seg(key: SegmentKey) -> str:
            return f"{key[0]}:{key[1].hex()}"

        return {
            "submits": self.submits,
            "received": {seg(k): n for k, n in self.received.items()},
            "taken": {seg(k): n for k, n in self.taken.items()},
            "accepted": {seg(k): mid for k, mid in self.accepted.items()},
            "finals": dict(self.finals),
            "silent": sorted(self.silent),
            "receipts_written": dict(self.receipts_written),
            "receipts_acked": {mid: list(words) for mid, words in self.receipts_acked.items()},
            "deliver_statuses": {str(k): n for k, n in self.deliver_statuses.items()},
            "submit_statuses": {str(k): n for k, n in self.submit_statuses.items()},
            "mo_acked": list(self.mo_acked),
            "texts": [list(t) for t in self.texts],
            "binds": self.binds, "bind_refused": self.bind_refused,
            "enquire_links": self.enquire_links, "unbinds": self.unbinds,
            "unanswered": self.unanswered, "drops": self.drops,
            "max_outstanding": self.max_outstanding,
            "sessions": sessions,
        }
