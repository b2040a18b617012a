"""Test helpers in the style of the operator-adaptation guide (TestCase, create_common_tensor)."""
