"""`psp data fetch` and `psp eval` from Hub copies of the evaluation sets (the tests' Hub server, real rows)."""

from __future__ import annotations

import pytest
from hub_mirror import DATA, mirror


@pytest.fixture(scope="module")
def hub_copies(hub_server, tmp_path_factory):
    if not DATA.is_dir():
        pytest.skip(f"real data not found at {DATA} (set PSP_DATA)")
    return mirror(hub_server, tmp_path_factory.mktemp("hub-copies"))


def test_fetch_writes_the_folder_layout(hub_copies, tmp_path, capsys):
    from psp_hf.cli import main

    out = tmp_path / "data"
    assert main(["data", "fetch", "--for", "eval", "-o", str(out), "-q"]) == 0
    print(sorted(p.relative_to(out).as_posix() for p in out.rglob("*") if p.is_file()))
