"""The Dockerfile, linted here (CI has no container engine to build it): pinned slim bases, a non-root user for what
runs, a health check that works against a real server, exec-form start-up, no caches or apt lists left in layers,
every copied path present and let through .dockerignore, and only real `psp serve` variables set."""

from __future__ import annotations

import argparse
import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from psp_hf import PSPEncoder

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from serve_server import ServerThread, tiny_tokenizer  # noqa: E402 - tests/ holds the helper; it is not a package

from psp_hf.serve.app import ServeConfig, create_app  # noqa: E402

ROOT = Path(__file__).resolve().parents[2]


def instructions(text: str) -> list[tuple[str, str]]:
    """(INSTRUCTION, arguments) of a Dockerfile: comments dropped, continuation lines joined."""
    joined = re.sub(r"\\\n", " ", "\n".join(line for line in text.splitlines() if not line.lstrip().startswith("#")))
    out = []
    for line in joined.splitlines():
        if line.strip():
            word, _, rest = line.strip().partition(" ")
            out.append((word.upper(), " ".join(rest.split())))
    return out


@pytest.fixture(scope="module")
def dockerfile() -> list[tuple[str, str]]:
    return instructions((ROOT / "Dockerfile").read_text(encoding="utf-8"))


def _final_stage(steps):
    start = max(i for i, (word, _) in enumerate(steps) if word == "FROM")
    return steps[start:]


def test_bases_are_pinned_slim_images(dockerfile):
    bases = [args.split()[0] for word, args in dockerfile if word == "FROM"]
    assert bases, "no FROM"
    for base in bases:
        name, _, tag = base.partition(":")
        assert tag and tag != "latest" and "slim" in tag, base


def test_what_runs_is_not_root_and_starts_in_exec_form(dockerfile):
    final = _final_stage(dockerfile)
    words = [word for word, _ in final]
    users = [args for word, args in final if word == "USER"]
    assert users and users[-1] not in ("root", "0"), users
    assert words.index("USER") < words.index("ENTRYPOINT")
    assert json.loads(dict(final)["ENTRYPOINT"]) == ["psp", "serve"]  # exec form: SIGTERM reaches psp
    assert not any(word == "RUN" for word in words[words.index("USER") :]), "RUN after USER runs as the user"


def test_layers_keep_no_caches(dockerfile):
    for word, args in dockerfile:
        if word != "RUN":
            continue
        if "apt-get install" in args:
            assert "--no-install-recommends" in args and "rm -rf /var/lib/apt/lists/*" in args, args
        if re.search(r"\bpip (install|wheel)\b", args):
            assert "--no-cache-dir" in args, args


def test_copied_paths_exist_and_pass_dockerignore(dockerfile):
    allowed = [
        line[1:].strip()
        for line in (ROOT / ".dockerignore").read_text(encoding="utf-8").splitlines()
        if line.startswith("!")
    ]
    for word, args in dockerfile:
        if word != "COPY" or args.startswith("--from"):
            continue
        for source in args.split()[:-1]:
            assert (ROOT / source).exists(), source
            assert source in allowed, f"{source} is excluded by .dockerignore"


def test_variables_are_real_options_and_the_port_is_exposed(dockerfile):
    from psp_hf.cli.serve import add_arguments, environment_variable

    parser = argparse.ArgumentParser()
    add_arguments(parser)
    real = {environment_variable(dest) for dest in vars(parser.parse_args(["m"]))}
    set_here = dict(re.findall(r"(\w+)=(\S+)", " ".join(args for word, args in dockerfile if word == "ENV")))
    ours = {name for name in set_here if name.startswith("PSP_SERVE_")}
    assert ours and ours <= real, ours - real
    exposed = [args for word, args in _final_stage(dockerfile) if word == "EXPOSE"]
    assert exposed == [set_here["PSP_SERVE_PORT"]]


def test_the_health_check_passes_on_a_server_and_fails_without_one(dockerfile, tmp_path):
    check = dict(_final_stage(dockerfile))["HEALTHCHECK"]
    assert re.search(r"--interval=\d+s", check) and re.search(r"--timeout=\d+s", check)
    command = json.loads(check.split(" CMD ", 1)[1])
    assert command[0] == "python" and "/health" in command[-1]
    command[0] = sys.executable
    encoder = PSPEncoder.from_tokenizer(tiny_tokenizer(tmp_path), hidden_size=8, seed=1)
    with ServerThread(create_app({"m": encoder}, ServeConfig(api_key="k"))) as server:  # /health needs no key
        env = os.environ | {"PSP_SERVE_PORT": str(server.port)}
        assert subprocess.run(command, env=env, capture_output=True, timeout=60).returncode == 0
    closed = subprocess.run(command, env=env, capture_output=True, timeout=60)
    assert closed.returncode != 0
