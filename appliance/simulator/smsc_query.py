"""What the simulated SMSC answers to ``query_sm`` (SMPP 3.4 sections 4.8.1, 4.8.2).

It knows the fate of every id it issued (the final word its receipt carries, or would
carry when receipts are off: ``--silent-rate 1``) from the moment it took the segment,
and answers with it: ``message_state`` (section 5.2.28) and ``final_date`` (section
7.1.1, the time it took the segment, as its receipt's ``done date``). An id it never
issued is ``ESME_RQUERYFAIL``; a ``query_sm`` on a receiver-only bind is
``ESME_RINVBNDSTS``; one it cannot read is a ``generic_nack``. So a provider whose
receipts are off still reaches full coverage by asking.
"""

from __future__ import annotations

from collections import Counter
from datetime import datetime

from appliance.smpp import pdu
from appliance.smpp.query import (
    ESME_RQUERYFAIL,
    absolute_time,
    query_sm_resp,
    read_query_sm,
)
from appliance.smpp.status import ESME_RINVBNDSTS, ESME_RINVCMDLEN, ESME_ROK

STATE_VALUES = {"ENROUTE": 1, "DELIVRD": 2, "EXPIRED": 3, "DELETED": 4, "UNDELIV": 5,
                "ACCEPTD": 6, "UNKNOWN": 7, "REJECTD": 8}


class QueryBook:
    """The fate of each id issued, and the answers to ``query_sm`` about them."""

    def __init__(self) -> None:
        self._fates: dict[str, tuple[str, datetime]] = {}
        self.asked: Counter[str] = Counter()  # query_sm per id (unknown ids too)

    def learn(self, message_id: str, word: str, done: datetime) -> None:
        self._fates[message_id] = (word, done)

    def answer(self, frame: bytes, mode: str) -> bytes:
        """The ``query_sm_resp`` (or ``generic_nack``) to one ``query_sm``."""
        sequence = pdu.header(frame).sequence
        try:
            q = read_query_sm(frame)
        except pdu.PduError:
            return pdu.generic_nack(sequence, ESME_RINVCMDLEN)
        self.asked[q.message_id] += 1
        if mode not in ("transmitter", "transceiver"):
            return query_sm_resp(sequence, ESME_RINVBNDSTS)
        fate = self._fates.get(q.message_id)
        if fate is None:
            return query_sm_resp(sequence, ESME_RQUERYFAIL)
        word, done = fate
        return query_sm_resp(sequence, ESME_ROK, message_id=q.message_id,
                             final_date=absolute_time(done),
                             message_state=STATE_VALUES[word],
                             error_code=0 if word == "DELIVRD" else 1)
