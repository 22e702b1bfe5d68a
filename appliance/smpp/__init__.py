"""SMPP 3.4: one persistent ESME session per provider of ``kind = "smpp"`` (SMPP-1..5).

A session is a *transport*: it binds, keeps the link alive, writes ``submit_sm`` PDUs
inside a window and a rate, and says what became of each one; it hands every inbound
``deliver_sm`` to a callback and answers it only once that callback has stored it.

- :mod:`.status`: ``command_status`` codes, their names, which ones mean "retry".
- :mod:`.pdu`: framing, the control PDUs, and ``submit_sm``/``deliver_sm`` through the
  ``smpp34`` codec.
- :mod:`.encoding`: part texts -> ``short_message`` bytes (GSM-7 or UCS-2, UDH).
- :mod:`.addresses`: TON/NPI of an address from its shape.
- :mod:`.settings`: a provider's ``kind = "smpp"`` table, checked.
- :mod:`.kind`: the ``smpp`` kind's declaration (listed by :mod:`appliance.provider_kinds`).
- :mod:`.submission`: what goes in (:class:`Segment`) and what comes out
  (:class:`SegmentOutcome`).
- :mod:`.ids`: SMSC message ids in one canonical form (``receipt_id_format``).
- :mod:`.receipt`: reading a delivery receipt (TLVs, else the text).
- :mod:`.deliver`: an inbound ``deliver_sm`` as handed to the appliance.
- :mod:`.link`: one bound TCP connection.
- :mod:`.session`: the session: links, reconnects, window, rate, observable state.

And how the appliance runs it:

- :mod:`.transport`: the provider's transport: a message to segments, and back to
  part outcomes.
- :mod:`.intake`: each ``deliver_sm`` stored first (receipts, inbound messages).
- :mod:`.uncertain`: UNCERTAIN parts settled by a late answer or by their receipt.
- :mod:`.id_memory`: what ``receipt_id_format = "auto"`` learnt, kept across starts.
- :mod:`.lifecycle`: the sessions started and stopped with the sender, the ``smpp`` loop.
- :mod:`.metrics`: the sessions in ``/metrics``.
"""
