"""The import preview reads the first lines exactly as the worker will."""

from __future__ import annotations

from appliance.imports.preview import PREVIEW_BYTES, preview


def test_the_preview_shows_columns_and_what_becomes_of_each_line() -> None:
    text = ("phone;name;city\n0532 123 45 67;Ayşe;İzmir\n\nnot a number\n"
            "+90 532 765 4321;Mehmet\n")
    shown = preview(text.encode(), "TR")
    assert [(r.line_number, r.outcome) for r in shown.rows] == [
        (1, "header"), (2, "ok"), (4, "rejected"), (5, "ok")]
    assert shown.rows[1].cells == ["0532 123 45 67", "Ayşe", "İzmir"]
    assert (shown.rows[1].msisdn, shown.rows[1].name) == ("+905321234567", "Ayşe")
    assert shown.rows[2].reason and shown.blank == 1 and shown.columns == 3


def test_a_slice_of_a_large_file_is_cut_to_whole_lines_and_bad_encoding_is_said() -> None:
    lines = "".join(f"0532 {i:03d} 45 67, Çağrı\n" for i in range(5000)).encode()
    head = lines[:1000]  # ends inside a line, maybe inside a character
    shown = preview(head[:-1], "TR", complete=False)
    assert len(shown.rows) == 10 and all(r.outcome == "ok" for r in shown.rows)
    assert len(lines) > PREVIEW_BYTES and len(preview(lines, "TR").rows) == 10
    assert "UTF-8" in preview(b"\xff\x00 not text\n", "TR").error
