"""The election test's checker (run.py's `check`) must fail on the histories it guards against."""

from __future__ import annotations

import pytest

from run import Event, check

LANGUAGES = {"rust", "python"}


def history(*rows: tuple[int, str, str, int]) -> list[Event]:
    return [Event(at, worker, kind, term) for at, worker, kind, term in rows]


def test_a_clean_handover_passes():
    check(history((1, "rust-1", "lead", 1), (2, "rust-1", "act", 1), (3, "rust-1", "lost", 1),
                  (4, "python-2", "lead", 2), (5, "python-2", "act", 2)), LANGUAGES)


def test_an_old_leader_acting_after_a_new_one_led_fails():
    # A paused ex-leader that acts on SIGCONT before checking its lease.
    with pytest.raises(AssertionError, match="two leaders at once"):
        check(history((1, "rust-1", "lead", 1), (4, "python-2", "lead", 2), (5, "rust-1", "act", 1),
                      (6, "python-2", "act", 2)), LANGUAGES)


def test_terms_that_do_not_increase_fail():
    with pytest.raises(AssertionError, match="strictly increase"):
        check(history((1, "rust-1", "lead", 2), (4, "python-2", "lead", 2)), LANGUAGES)
