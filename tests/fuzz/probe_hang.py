"""Fuzz-harness self-check target: never finishes its second case (no torch)."""

import time


def run(examples, journal, seed=None):
    for i in range(examples):
        journal.case(f"probe_hang: case {i}")
        if i == 1:
            time.sleep(3600)
    return []
