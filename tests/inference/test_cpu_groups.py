"""Encode's worker threads keep to disjoint CPU groups; the caller's thread and the process's mask stay as they are."""

import os
import threading

import numpy as np
import pytest

from psp_hf.inference import cpu_groups as groups_module
from psp_hf.inference.batches import run_batches
from psp_hf.inference.cpu_groups import ENVIRONMENT_SWITCH, cpu_groups, keep_to

linux_only = pytest.mark.skipif(not hasattr(os, "sched_setaffinity"), reason="no CPU affinity on this platform")


@pytest.fixture
def allowed_cpus(monkeypatch):
    """Pretend the process may use the CPUs given (the set is what sched_getaffinity(0) answers)."""

    def pretend(cpus: set[int]) -> None:
        monkeypatch.setattr(groups_module.os, "sched_getaffinity", lambda pid: set(cpus), raising=False)
        monkeypatch.setattr(groups_module.os, "sched_setaffinity", lambda pid, mask: None, raising=False)

    monkeypatch.delenv(ENVIRONMENT_SWITCH, raising=False)
    return pretend


def test_groups_are_disjoint_and_cover_the_allowed_cpus(allowed_cpus):
    allowed_cpus({0, 1, 2, 3, 5, 8, 9})
    groups = cpu_groups(3)
    assert groups == [{0, 3, 9}, {1, 5}, {2, 8}]
    allowed_cpus({4, 6})
    assert cpu_groups(2) == [{4}, {6}]


def test_no_groups_where_they_cannot_help_or_are_switched_off(allowed_cpus, monkeypatch):
    allowed_cpus({0, 1})
    assert cpu_groups(1) is None  # one worker: nothing to keep apart
    assert cpu_groups(3) is None  # more workers than CPUs: disjoint groups would leave one without a CPU
    monkeypatch.setenv(ENVIRONMENT_SWITCH, "0")
    assert cpu_groups(2) is None


def test_keep_to_never_raises(monkeypatch, caplog):
    asked = []

    def refuse(pid, mask):
        asked.append(mask)
        raise OSError(22, "Invalid argument")

    monkeypatch.setattr(groups_module.os, "sched_setaffinity", refuse, raising=False)
    with caplog.at_level("DEBUG", logger=groups_module.__name__):
        keep_to({0, 2})  # a container that forbids the change: encode runs unrestricted instead of failing
        keep_to(None)  # no group: not even asked
    assert asked == [{0, 2}]
    assert "could not keep an encode thread to CPUs [0, 2]" in caplog.text


def _masks_seen(num_threads: int) -> dict[str, set[int]]:
    """The CPU mask of each thread that ran a step of a toy job on `num_threads` threads."""
    seen: dict[str, set[int]] = {}
    lock = threading.Lock()
    out = np.zeros(40)

    def prepare(start: int, stop: int) -> None:
        with lock:
            seen[threading.current_thread().name] = os.sched_getaffinity(0)

    def finish(start: int, stop: int, _: None) -> None:
        out[start:stop] = 1

    run_batches(prepare, finish, 40, 1, num_threads, pipeline=False)
    assert out.all()
    return seen


@linux_only
def test_workers_run_on_their_groups_and_the_caller_is_untouched(monkeypatch):
    monkeypatch.delenv(ENVIRONMENT_SWITCH, raising=False)
    before = os.sched_getaffinity(0)
    seen = _masks_seen(2)
    assert os.sched_getaffinity(0) == before  # the caller's thread (and the process's mask) as they were
    assert set(seen) <= {"psp-encode-0", "psp-encode-1"}
    if len(before) >= 2:
        expected = cpu_groups(2)
        for name, mask in seen.items():
            assert mask == expected[int(name.rsplit("-", 1)[1])]
        # A thread started after the call gets the process's mask, not a worker's.
        later: list[set[int]] = []
        thread = threading.Thread(target=lambda: later.append(os.sched_getaffinity(0)))
        thread.start()
        thread.join()
        assert later == [before]
    else:  # one CPU: the workers run where the process may run
        assert all(mask == before for mask in seen.values())


@linux_only
def test_switched_off_workers_keep_the_process_mask(monkeypatch):
    monkeypatch.setenv(ENVIRONMENT_SWITCH, "0")
    before = os.sched_getaffinity(0)
    assert all(mask == before for mask in _masks_seen(2).values())


@linux_only
def test_spread_cpus_off_leaves_the_workers_unrestricted(monkeypatch):
    monkeypatch.delenv(ENVIRONMENT_SWITCH, raising=False)
    before = os.sched_getaffinity(0)
    masks: list[set[int]] = []
    run_batches(lambda a, b: masks.append(os.sched_getaffinity(0)), lambda a, b, _: None, 20, 1, 2, spread_cpus=False)
    assert masks and all(mask == before for mask in masks)


@pytest.mark.parametrize("encoder_type", ["psp", "lstm"])
def test_encode_spreads_its_workers_unless_torch_runs_the_model(encoder_type, monkeypatch, allowed_cpus):
    from psp_hf import PSPEncoder
    from psp_hf.inference import batches
    from psp_hf.tokenization.pieces import train_tokenizer

    allowed_cpus({0, 1})
    asked: list = []
    monkeypatch.setattr(batches, "keep_to", asked.append)
    corpus = ["a man plays a guitar", "two dogs run in a field", "stocks fell on monday"] * 10
    model = PSPEncoder.from_tokenizer(train_tokenizer(corpus, vocab_size=60), hidden_size=8, encoder_type=encoder_type)
    alone = model.encode(corpus, batch_size=4)
    np.testing.assert_array_equal(model.encode(corpus, batch_size=4, num_threads=2), alone)
    # A torch model's intra-op threads would inherit a worker's group: its workers run unrestricted.
    expected = [{0}, {1}] if encoder_type == "psp" else [None, None]
    assert sorted(asked, key=str) == sorted(expected, key=str)
