"""SMPP 3.4: one persistent ESME session per provider (SMPP-1..5).

A session is a *transport*: it binds, keeps the link alive, writes ``submit_sm`` PDUs
inside a window and a rate, and says what became of each one; it hands every inbound
``deliver_sm`` to a callback and answers it only once that callback has stored it.

- :mod:`.status`: ``command_status`` codes, their names, which ones mean "retry".
- :mod:`.pdu`: framing, the control PDUs, and ``submit_sm``/``deliver_sm`` through the
  ``smpp34`` codec.
- :mod:`.encoding`: part texts -> ``short_message`` bytes (GSM-7 or UCS-2, UDH).
- :mod:`.addresses`: TON/NPI of an address from its shape.
- :mod:`.settings`: a provider's ``kind = "smpp"`` table, checked.
- :mod:`.submission`: what goes in (:class:`Segment`) and what comes out
  (:class:`SegmentOutcome`).
- :mod:`.ids`: SMSC message ids in one canonical form (``receipt_id_format``).
- :mod:`.receipt`: reading a delivery receipt (TLVs, else the text).
- :mod:`.deliver`: an inbound ``deliver_sm`` as handed to the appliance.
- :mod:`.link`: one bound TCP connection.
- :mod:`.session`: the session: links, reconnects, window, rate, observable state.
"""
