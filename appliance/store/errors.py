"""What can go wrong in the store, as one set of classes for both backends.

The PostgreSQL connection (:mod:`appliance.store.pg`) raises these classes itself; an
SQLite connection raises apsw's, which stay what they are (apsw is fast because nothing
wraps it). So code that must catch a kind of failure on either backend catches the
tuples below, which hold both:

* :data:`INTEGRITY_ERRORS`: a unique, foreign-key, not-null or check constraint
  refused the statement (nothing of that statement was written);
* :data:`STORAGE_ERRORS`: the store could not write or be reached (full disk, I/O
  error, the database server gone or refusing connections, a lock that did not come,
  the writer stopped); the unit was rolled back, so the caller answers ``503`` and the
  client sends it again;
* :data:`STORE_ERRORS`: any error of the store (everything above, and SQL it refused).
"""

from __future__ import annotations

import apsw

from appliance.store.writer import WriterClosed


class StoreError(Exception):
    """The database refused or failed a statement (PostgreSQL backend)."""


class IntegrityError(StoreError):
    """A constraint refused the statement: unique, foreign key, not null, check."""


class StorageUnavailable(StoreError):
    """The store could not write or could not be reached; nothing of the unit was written.

    On PostgreSQL: the connection was lost or refused, the server is shutting down or in
    recovery, the disk is full, the database is read-only (a standby after a failover).
    """


class StoreConflict(StorageUnavailable):
    """The unit met another process's work and was rolled back: a deadlock, a
    serialization failure or a lock that did not come within the lock timeout. Sending
    it again succeeds; to a client it is a ``503`` like any other unavailability."""


INTEGRITY_ERRORS: tuple[type[BaseException], ...] = (apsw.ConstraintError, IntegrityError)
STORAGE_ERRORS: tuple[type[BaseException], ...] = (
    apsw.FullError, apsw.IOError, apsw.CantOpenError, apsw.ReadOnlyError, apsw.CorruptError,
    apsw.NotADBError, apsw.BusyError, apsw.LockedError, apsw.NoMemError,
    StorageUnavailable, WriterClosed,
)
STORE_ERRORS: tuple[type[BaseException], ...] = (apsw.Error, StoreError, WriterClosed)


class NotAnApplianceDatabase(RuntimeError):
    """The database has tables but no appliance schema version: refused, not guessed at."""
