"""python -m torch_npu.tools.transplt -i SRC -o OUT [-r rules.json] [-s] [distributed -m ENTRY -t MODEL]"""

import sys

from torch_npu.tools.transplt.cli import main

sys.exit(main())
