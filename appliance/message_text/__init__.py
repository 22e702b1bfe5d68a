"""A message's text as SMS carries it: alphabets, encodings and parts (MSG-1, ENC-1).

Pure functions, no I/O, below both the providers and sending: the API, the campaign
confirmation and dry run, the HTTP adapters and the SMPP transport all count and encode
with these tables, so the parts a user is shown are the parts that go out.

- :mod:`.alphabets`: the GSM 7-bit tables (the default alphabet and its extension, the
  Turkish single shift and locking shift tables), text to septets and back.
- :mod:`.segments`: which encoding a text travels in and how it is split into parts.
- :mod:`.language`: a provider's ``national_language`` and the destinations it applies to.
- :mod:`.words`: words folded as the STOP keywords compare them.
"""
