"""A message's states, and which of them are final: one definition of each set.

Below both the providers (which map a provider's words to a reported state) and the
sending and report parts (which move a message through its states), so both read the
same sets and neither imports the other for them.

* ``REPORTED_FINAL_STATES``: the final states a provider can report (``DELIVERED``,
  ``FAILED``, ``EXPIRED``, ``REJECTED``); ``REPORTED_FINAL`` orders them, strongest
  first for ties.
* ``REPORTED_INTERMEDIATE_STATES``: the intermediate states a provider can report;
  ``REPORTED_INTERMEDIATE`` orders them, latest in the lifecycle first.
* ``FINAL_STATES``: every state a message never leaves by itself: the reported finals,
  our cut-off (``UNKNOWN``) and never sent (``CANCELLED``).
* ``NOT_YET_SENT``, ``AWAITING_REPORT``, ``OPEN_AFTER_SUBMIT``: where a message is
  between its acceptance and its first report (see :mod:`appliance.reports.states`).
"""

from __future__ import annotations

REPORTED_FINAL = ("DELIVERED", "FAILED", "EXPIRED", "REJECTED")
REPORTED_INTERMEDIATE = ("ENROUTE", "ACCEPTED")
REPORTED_FINAL_STATES = frozenset(REPORTED_FINAL)
REPORTED_INTERMEDIATE_STATES = frozenset(REPORTED_INTERMEDIATE)
# A provider's status word no adapter knows: kept verbatim, mapped to an intermediate
# state, so it is in the history but never closes a message nor moves it backwards.
UNKNOWN_WORD_STATE = "ENROUTE"
# Our cut-off state: final, but weaker than anything the provider says is final.
CUT_OFF = "UNKNOWN"
# Final and never sent (a suppressed number, a cancelled campaign): no report applies.
NEVER_SENT = "CANCELLED"
FINAL_STATES = frozenset({*REPORTED_FINAL, CUT_OFF, NEVER_SENT})
# The sender has not recorded the submission yet: reports wait.
NOT_YET_SENT = frozenset({"QUEUED", "SENDING"})
# Submitted (or maybe submitted) and nothing heard yet: any report applies.
AWAITING_REPORT = frozenset({"SUBMITTED", "RETRY", "UNCERTAIN"})
# Open after submission: what the cut-off closes.
OPEN_AFTER_SUBMIT = frozenset({"SUBMITTED", "UNCERTAIN", *REPORTED_INTERMEDIATE})
