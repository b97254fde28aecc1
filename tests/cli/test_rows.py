"""`psp embed`'s overlap of reading, encoding and writing (cli/rows.py): order, errors and stopping."""

from __future__ import annotations

import itertools
import threading
import time

import pytest

from psp_hf.cli.rows import WriteBehind, read_ahead


def test_read_ahead_keeps_order_and_raises_where_the_error_came():
    def items():
        yield from range(5)
        raise ValueError("line 6 is bad")

    got = []
    with pytest.raises(ValueError, match="line 6 is bad"):
        for item in read_ahead(items(), ahead=2):
            got.append(item)
    assert got == [0, 1, 2, 3, 4]


def test_read_ahead_stops_its_producer_when_closed():
    produced = []

    def endless():
        for number in itertools.count():
            produced.append(number)
            yield number

    reader = read_ahead(endless(), ahead=2)
    assert [next(reader) for _ in range(3)] == [0, 1, 2]
    reader.close()
    count = len(produced)
    time.sleep(0.3)
    assert len(produced) == count <= 3 + 2 + 1  # taken, queued, and at most one in hand
    assert not any(thread.name == "psp-read-ahead" for thread in threading.enumerate())


def test_write_behind_writes_in_order_one_at_a_time():
    written, running, most = [], [0], [0]
    lock = threading.Lock()

    def write(rows):
        with lock:
            running[0] += 1
            most[0] = max(most[0], running[0])
        time.sleep(0.01)
        written.append(rows)
        with lock:
            running[0] -= 1

    with WriteBehind(write) as out:
        for rows in range(6):
            out.write(rows)
    assert written == list(range(6))
    assert most[0] == 1


def test_a_failed_write_comes_out_at_the_next_write_or_at_the_end():
    def write(rows):
        if rows == 1:
            raise OSError(28, "No space left on device")

    with WriteBehind(write) as out:
        out.write(0)
        out.write(1)
        with pytest.raises(OSError, match="No space left"):
            out.write(2)
    with pytest.raises(OSError, match="No space left"), WriteBehind(write) as last:
        last.write(1)


def test_read_ahead_stops_even_when_the_producer_has_run_out():
    # The producer finished its items and waits for room to say so: closing must still end it (not leave it
    # blocked on a full queue, which would also hold up the caller's exit path).
    reader = read_ahead(iter([0, 1]), ahead=1)
    assert next(reader) == 0
    time.sleep(0.3)  # item 1 fills the queue; the end marker waits behind it
    reader.close()
    assert not any(thread.name == "psp-read-ahead" for thread in threading.enumerate())
