"""Report retention (DLR-12): bounded deletes, by our own receive time.

* Unmatched inbox rows older than ``[reports] inbox_retention_days`` (by
  ``received_at``, never the provider's clock) are deleted: the inbox stays small.
  Matched rows are the messages' report history and stay with them.
* Raw callbacks older than ``raw_retention_days`` are deleted; the parsed reports
  they produced keep their place (``raw_id`` may then point at nothing).

Each function is a write unit removing at most ``batch`` rows; the retention loop
(:mod:`appliance.retention`) runs them.
"""

from __future__ import annotations

from appliance.store.connection import Connection


def prune_inbox(conn: Connection, cutoff_ms: int, batch: int) -> int:
    conn.execute(
        "DELETE FROM report_inbox WHERE id IN (SELECT id FROM report_inbox"
        " WHERE received_at < ? AND applied_at IS NULL ORDER BY received_at LIMIT ?)",
        (cutoff_ms, batch))
    return int(conn.changes())


def prune_raw_reports(conn: Connection, cutoff_ms: int, batch: int) -> int:
    conn.execute(
        "DELETE FROM raw_reports WHERE id IN (SELECT id FROM raw_reports"
        " WHERE received_at < ? ORDER BY received_at LIMIT ?)",
        (cutoff_ms, batch))
    return int(conn.changes())
