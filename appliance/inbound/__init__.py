"""Inbound (MO) messages (OPS-4): stored raw first, filed, STOP keywords honoured.

``store`` holds the write units (``receive_request`` for the HTTP route,
``receive_inbound`` for a session transport such as SMPP) and the read units behind
``GET /api/inbound`` and the console's inbound page.
"""
