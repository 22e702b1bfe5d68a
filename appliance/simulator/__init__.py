"""The built-in provider simulator: a local fake of the Vonage SMS API.

``behaviour`` holds the knobs (delivery rate, report delays, early, duplicate,
reordered, silent and unknown-ref reports, throttling); ``server`` is the Starlette
app that takes submissions and decides their receipts, ``receipts`` pushes them (retried,
counted) and ``vonage_format`` writes answers, receipts and inbound messages as Vonage
does, signed; ``smsc`` and
``smsc_behaviour`` are the SMSC simulator (SMPP 3.4) beside it; ``run`` serves them
(``appliance simulator``, and inside ``appliance demo``).
"""

from appliance.simulator.behaviour import Behaviour
from appliance.simulator.server import Simulator

__all__ = ["Behaviour", "Simulator"]
