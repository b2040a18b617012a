"""Fuzz-harness self-check target: dies from a signal on its third case (no torch)."""

import ctypes


def run(examples, journal, seed=None):
    for i in range(examples):
        journal.case(f"probe_crash: case {i}")
        if i == 2:
            ctypes.string_at(0)  # SIGSEGV
    return []
