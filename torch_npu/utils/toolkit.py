"""The CANN-shaped toolkit shipped with torch_npu (docs/toolkit.md): where it is, and the environment
CANN's set_env.sh would give, applied at import when the user has not set it."""

import os
import warnings
from typing import Optional

from torch_npu.utils import _toolkit_layout


def get_toolkit_path() -> Optional[str]:
    """The toolkit directory (include/, lib64/, bin/npu-smi, set_env.sh, version files), set up on
    first use; None when running from a source tree that was never built."""
    return _toolkit_layout.ensure()


def _set_environment() -> None:
    """ASCEND_HOME_PATH / ASCEND_TOOLKIT_HOME point at the toolkit unless the user set them (a real
    CANN install's set_env.sh wins), so tools that look for CANN there find it."""
    if os.environ.get("ASCEND_HOME_PATH"):
        return
    try:
        home = get_toolkit_path()
    except OSError as e:  # a broken install must not break `import torch_npu`
        warnings.warn(f"torch_npu's toolkit could not be set up ({e}); ASCEND_HOME_PATH is left unset")
        return
    if home is None:
        return
    os.environ["ASCEND_HOME_PATH"] = home
    os.environ.setdefault("ASCEND_TOOLKIT_HOME", home)


def npu_smi() -> None:
    """The `npu-smi` command: runs the toolkit's bin/npu-smi."""
    import runpy
    import sys

    home = get_toolkit_path()
    if home is None:
        sys.exit("npu-smi: torch_npu has no toolkit here (run it from an installed package)")
    script = os.path.join(home, "bin", "npu-smi")
    sys.argv[0] = script
    runpy.run_path(script, run_name="__main__")
