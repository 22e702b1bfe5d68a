"""Status webhooks out (OPS-5): every message state change, POSTed to the operator.

``outbox`` holds the store units (the triggers in ``schema.sql`` write the events, in
the transaction of the state change), ``signature`` the HMAC every POST carries, and
``delivery`` the scheduler loop that sends them, in order per message, at least once.
"""
