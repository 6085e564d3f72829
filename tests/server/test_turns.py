"""Threads take short turns at the interpreter while one computes at length
(server.services.turns), and the interval before once none does."""

from __future__ import annotations

import sys
import threading

from server.services.turns import TURN_S, short_turns


def test_turns_are_short_while_any_thread_is_inside_and_as_before_after() -> None:
    before = sys.getswitchinterval()
    assert before > TURN_S  # CPython's 5 ms, as a test process has it
    inside, leave = threading.Event(), threading.Event()

    def other() -> None:
        with short_turns():
            inside.set()
            leave.wait(10)

    thread = threading.Thread(target=other)
    with short_turns():
        thread.start()
        assert inside.wait(10)
        assert sys.getswitchinterval() == TURN_S
    assert sys.getswitchinterval() == TURN_S  # the other thread is still inside
    leave.set()
    thread.join(10)
    assert sys.getswitchinterval() == before
