"""Sending: our refs, the token bucket, the sender loop, messages and campaigns.

``refs`` makes each message's reference before anything leaves the process (DLR-1);
``messages`` and ``campaigns`` are the store units; ``rate`` paces each provider;
``sender`` claims due messages, submits them and records what came of it in one
write unit per batch (DLR-6, DLR-8); ``expansion`` turns a campaign into messages
in bounded, resumable units.
"""
