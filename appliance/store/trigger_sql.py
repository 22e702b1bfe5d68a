"""A PostgreSQL trigger: a row trigger that calls a PL/pgSQL function of its own.

SQLite's triggers hold their statements; PostgreSQL's call a function. The count
triggers (:mod:`appliance.store.count_triggers`) and the webhook outbox's
(:mod:`appliance.store.webhook_triggers`) are written as both from one definition each;
this is the PostgreSQL half they share.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class PgTrigger:
    """A PostgreSQL trigger that calls one of the functions."""

    name: str
    table: str
    function: str  # the function's name; its CREATE is among the functions installed
    when: str  # AFTER INSERT, AFTER UPDATE OF x, AFTER DELETE
    condition: str = ""  # the WHEN (...) of the trigger, "" for none

    def ddl(self) -> str:
        where = f"\n    WHEN ({self.condition})" if self.condition else ""
        return (f"CREATE TRIGGER {self.name} {self.when} ON {self.table}\n"
                f"    FOR EACH ROW{where} EXECUTE FUNCTION {self.function}()")


def pg_function(name: str, statements: str) -> str:
    """A trigger function that runs ``statements`` (each ending in ``;``) and returns."""
    return (f"\nCREATE OR REPLACE FUNCTION {name}() RETURNS trigger LANGUAGE plpgsql AS $fn$\n"
            f"BEGIN{statements}\n    RETURN NULL;\nEND $fn$")
