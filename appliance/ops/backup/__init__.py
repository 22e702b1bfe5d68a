"""Backups: the online copy, its schedule and status, restores, durable writes (APP-3)."""
