"""`io.reading.read_json`: every bad JSON file a user hands psp ends in one error line naming the file."""

from __future__ import annotations

import pytest

from psp_hf.errors import PSPInputError
from psp_hf.io.reading import read_json


def test_a_good_file_gives_its_value(tmp_path):
    (tmp_path / "c.json").write_text('{"model_type": "psp"}', encoding="utf-8")
    (tmp_path / "m.json").write_text('[{"path": "0"}]', encoding="utf-8")
    assert read_json(tmp_path / "c.json") == {"model_type": "psp"}
    assert read_json(tmp_path / "m.json", list) == [{"path": "0"}]


@pytest.mark.parametrize(
    "content,kind,message",
    [
        (b'{\n  "a": 1,\n  oops\n}', dict, r"c.json:3: not valid JSON \(Expecting property name"),
        (b"[1, 2]", dict, r"c.json: expected a JSON object, found a list"),
        (b'{"a": 1}', list, r"c.json: expected a JSON array, found a dict"),
        (b'{"a": "\xff"}', dict, r"c.json: not valid JSON \(not UTF-8 at byte 7\)"),
    ],
)
def test_a_bad_file_names_itself_and_the_line(tmp_path, content, kind, message):
    (tmp_path / "c.json").write_bytes(content)
    with pytest.raises(PSPInputError, match=message):
        read_json(tmp_path / "c.json", kind)


def test_the_option_that_named_the_file_comes_first(tmp_path):
    with pytest.raises(PSPInputError, match=r"^--eval-results .*missing.json: no such file$"):
        read_json(tmp_path / "missing.json", what="--eval-results")
    with pytest.raises(PSPInputError, match=r"^--eval-results .*: cannot read it \(Is a directory\)$"):
        read_json(tmp_path, what="--eval-results")
