"""Seeing the appliance run: metrics, readiness, the operations alerts, the report-health
summary, request ids, the disk's reserve."""
