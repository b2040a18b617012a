"""Upstream test files that check chip-specific behaviour a software NPU cannot honestly provide: reported
with the reason by `make upstream-tests` (and in docs/conformance.md), not run. Paths relative to test/."""

CHIP_SPECIFIC = {
}
