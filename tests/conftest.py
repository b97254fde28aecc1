# ======================================================================================================
# Hub test server — keep this block FIRST in conftest.py.
#
# huggingface_hub, transformers, datasets and sentence-transformers read HF_ENDPOINT (and the cache paths)
# once, when they are imported. So before anything imports them, this block starts the Hub-compatible
# server of tests/hub_server/ on 127.0.0.1 and points the whole test session (and every subprocess a
# test starts, which inherits os.environ) at it, with a throwaway HF_HOME and a dummy token.
#
# Fixtures: `hub_server` (session; the HubServer: .url, .root, .failing(...), .reset(), .unique_repo_id(),
# .repo_files(), .requests) and `hub_repo_id` (a fresh "<user>/test-<random>" id per test).
# ======================================================================================================
import atexit
import os
import shutil
import sys
import tempfile
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent))
from hub_server import HubServer  # noqa: E402 - tests/ holds the server package; tests/ is not a package

if "huggingface_hub" in sys.modules:
    # Too late to redirect it: its constants already point elsewhere. Fail loudly rather than talk to
    # the real Hub (or hang on the missing network).
    raise RuntimeError("huggingface_hub was imported before tests/conftest.py could set HF_ENDPOINT")

_HF_TMP = Path(tempfile.mkdtemp(prefix="psp-tests-hf-"))
_HUB_SERVER = HubServer(root=_HF_TMP / "hub").start()
os.environ.update(
    {
        "HF_ENDPOINT": _HUB_SERVER.url,
        "HF_HOME": str(_HF_TMP / "hf_home"),
        "HF_TOKEN": "hf_psp_tests_dummy_token",
        "HF_HUB_DISABLE_XET": "1",  # the server speaks the LFS protocol, not Xet
        "HF_HUB_DISABLE_TELEMETRY": "1",
        "HF_HUB_DISABLE_PROGRESS_BARS": "1",
        "HF_HUB_OFFLINE": "0",
        "TRANSFORMERS_OFFLINE": "0",
        "HF_DATASETS_OFFLINE": "0",
    }
)
# Cache locations that would override HF_HOME: everything must land in the throwaway folder.
for _name in ("HF_HUB_CACHE", "HF_DATASETS_CACHE", "HF_XET_CACHE", "HF_ASSETS_CACHE", "HF_TOKEN_PATH"):
    os.environ.pop(_name, None)


@atexit.register
def _stop_hub_server() -> None:
    _HUB_SERVER.stop()
    shutil.rmtree(_HF_TMP, ignore_errors=True)


@pytest.fixture(scope="session")
def hub_server() -> HubServer:
    """The Hub-compatible server all HF libraries in this session (and its subprocesses) talk to."""
    return _HUB_SERVER


@pytest.fixture
def hub_repo_id(hub_server: HubServer) -> str:
    """A repo id no other test uses (the repo itself is not created)."""
    return hub_server.unique_repo_id("test")


# ======================================================================================================
# End of the Hub test server block. Other fixtures go below.
# ======================================================================================================


@pytest.fixture(autouse=True)
def psp_log_on_stderr():
    """Library messages on stderr as `psp` shows them, so a test reads what a command-line user reads."""
    from psp_hf.logs import show_on_stderr

    show_on_stderr()


@pytest.fixture
def train_here(capsys):
    """`psp train ARGS` in this process (no interpreter start-up); returns (exit code, stderr)."""
    import torch

    from psp_hf.cli import main

    threads = torch.get_num_threads()

    def run(*args: str) -> tuple[int, str]:
        capsys.readouterr()
        code = main(["train", *args])
        return code, capsys.readouterr().err

    yield run
    torch.set_num_threads(threads)  # --threads changes the whole process


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item, call):
    """Under CI (the CI variable set), a test skipped because the shared data folder is missing fails instead: CI
    has the data, so such a skip would hide a broken path, not a missing download."""
    outcome = yield
    report = outcome.get_result()
    if report.skipped and os.environ.get("CI"):
        reason = str(report.longrepr)
        if "PSP_DATA" in reason or ("data" in reason and ("not present" in reason or "not found" in reason)):
            report.outcome = "failed"
            report.longrepr = f"the shared data folder is missing under CI: {reason}"
