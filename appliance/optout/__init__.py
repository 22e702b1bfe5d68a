"""Opt-outs (OPS-4): the per-account suppression list, its CSV import and STOP keywords.

``suppressions`` holds the store units (add, remove, look up, list); ``suppression_import``
reads an uploaded list with the import line parser and normaliser; ``keywords`` decides
whether an inbound message is a STOP. Inbound messages themselves are
:mod:`appliance.inbound`.
"""
