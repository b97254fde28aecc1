"""Issue 35: property-based fuzzing of everything psp reads from disk (tests/fuzz_inputs.py). Every generated
input ends in a correct result or one `psp: error:` line, never a traceback. Bounded here (a few examples a
reader, no deadline); bench/fuzz.py runs the same generators for longer."""

from __future__ import annotations

import pytest
from fuzz_inputs import READERS, Context, run_one
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

FAST = [reader for reader in READERS if not reader.slow]
SLOW = [reader for reader in READERS if reader.slow]
CI = settings(
    max_examples=12,
    deadline=None,
    database=None,
    derandomize=True,  # the same inputs on every CI run; bench/fuzz.py explores
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture, HealthCheck.data_too_large],
)


@pytest.fixture(scope="module")
def context(tmp_path_factory) -> Context:
    return Context.build(tmp_path_factory.mktemp("fuzz"), with_run=True)


def _check(reader, context, data) -> None:
    value = data.draw(reader.strategy(context), label=reader.name)
    outcome, detail = run_one(reader, context, value)
    assert outcome != "failure", f"{reader.name}: {detail}"


@pytest.mark.parametrize("reader", FAST, ids=[reader.name for reader in FAST])
def test_model_folder_and_pair_readers_never_trace_back(context, reader):
    @CI
    @given(data=st.data())
    def property_(data):
        _check(reader, context, data)

    property_()


@pytest.mark.slow
@pytest.mark.parametrize("reader", SLOW, ids=[reader.name for reader in SLOW])
def test_training_readers_never_trace_back(context, reader):
    @settings(CI, max_examples=5)
    @given(data=st.data())
    def property_(data):
        _check(reader, context, data)

    property_()
