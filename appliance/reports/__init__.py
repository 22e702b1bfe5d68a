"""Delivery reports: stored first, matched to messages, applied newest-first.

``states`` names the message states and decides whether a report may change a
message (DLR-5); ``inbox`` stores callbacks raw and their reports keyed by what the
provider sent (DLR-2, 3); ``apply`` applies them to messages, at once or as soon as
the sender records the message (DLR-6); ``reconciler`` retries what is still waiting
(DLR-4); ``cutoff`` closes messages the provider never reported on (DLR-7);
``coverage`` and ``alerts`` say how well it all works (DLR-9, 10, 11), gathered by
``summary`` for ``/api/stats`` and ``doctor``; ``pruning`` keeps the inbox bounded
(DLR-12).
"""
