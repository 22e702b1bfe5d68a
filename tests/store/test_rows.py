"""Typed rows: a unit reads each column with a converter that checks its type."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import apsw
import pytest

from appliance.store.rows import (
    RowTypeError,
    as_bytes,
    as_float,
    as_int,
    as_str,
    one,
    opt_int,
    opt_str,
)


def test_each_converter_takes_its_type_and_refuses_the_others() -> None:
    assert as_int(7) == 7 and as_int(3.0) == 3 and as_int(True) == 1
    assert as_float(2) == 2.0 and as_float(0.5) == 0.5
    assert as_str("x") == "x" and as_bytes(b"\x00") == b"\x00"
    assert opt_int(None) is None and opt_str(None) is None and opt_int(4) == 4
    wrong: list[tuple[Any, Callable[[Any], object]]] = [
        (1.5, as_int), ("12", as_int), (None, as_int), (b"1", as_int), ("1.0", as_float),
        (None, as_float), (5, as_str), (None, as_str), ("blob", as_bytes), ("1", opt_int),
        (1, opt_str)]
    for value, read in wrong:
        with pytest.raises(RowTypeError, match="expected"):
            read(value)


def test_a_driver_buffer_is_read_as_bytes() -> None:
    buffer: Any = memoryview(b"ab")
    assert as_bytes(buffer) == b"ab"


def test_one_refuses_a_statement_that_returned_no_row(tmp_path: Path) -> None:
    conn = apsw.Connection(str(tmp_path / "a.db"))
    try:
        conn.execute("CREATE TABLE t (n INTEGER)")
        conn.execute("INSERT INTO t VALUES (5)")
        assert as_int(one(conn.execute("SELECT n FROM t"))[0]) == 5
        with pytest.raises(LookupError, match="no row"):
            one(conn.execute("SELECT n FROM t WHERE n = 6"))
    finally:
        conn.close()
