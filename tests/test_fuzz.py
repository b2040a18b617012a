"""Property-based fuzzing (CI profile): the runtime C API, torch.npu.* and the npu ops with bad input
end in a defined error code or a clear Python exception: no crash, no hang, no unclear message.

Each target runs in a child process (fuzz/runner.py) with a fixed seed and few cases; `make fuzz`
runs the same targets with many. The counts are printed (pytest -s) and kept in the report's output.
"""

import pytest

from fuzz.runner import run_target

CI_EXAMPLES = {"runtime_api": 300, "device_api": 120, "ops": 400}


@pytest.mark.parametrize("target", sorted(CI_EXAMPLES))
def test_fuzz_target_has_no_crash_hang_or_unclear_error(target):
    result = run_target(target, CI_EXAMPLES[target], timeout=300, seed=0)
    print(f"\n{target}: {result['cases']} cases, {result['calls']} calls, {result.get('succeeded', 0)} ok, "
          f"{result['seconds']}s")
    assert result["crash"] is None, result["crash"]
    assert result["hang"] is None, f"hung during: {result['hang']}"
    assert not result["failures"], "\n".join(result["failures"])
    assert result["cases"] >= CI_EXAMPLES[target]


def test_runner_reports_the_case_that_crashed():
    result = run_target("probe_crash", 10, timeout=60)
    assert result["crash"] is not None
    # Under AddressSanitizer (make sanitize-adapter) the child reports the signal itself and exits.
    assert "SIGSEGV" in result["crash"] or "AddressSanitizer: SEGV" in result["crash"], result["crash"]
    assert "probe_crash: case 2" in result["crash"]


def test_runner_reports_the_case_that_hung():
    result = run_target("probe_hang", 10, timeout=5)
    assert result["hang"] == "probe_hang: case 1"
    assert result["crash"] is None
