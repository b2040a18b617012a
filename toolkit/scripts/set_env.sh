# set_env.sh - `source` it to use torch_npu's CANN-shaped toolkit as CANN's set_env.sh is used:
# ASCEND_HOME_PATH / ASCEND_TOOLKIT_HOME point at the toolkit, lib64 goes on LD_LIBRARY_PATH and bin
# (npu-smi) on PATH. Importing torch_npu sets ASCEND_HOME_PATH itself when it is unset.
_npu_toolkit_here="$(cd "$(dirname "${BASH_SOURCE[0]:-$0}")" && pwd)"
# The lib64 links are made on first use (a wheel cannot carry them); a read-only install gets a
# complete copy in the user's cache directory, which is then the toolkit.
_npu_toolkit_home="$(python3 "${_npu_toolkit_here}/../utils/_toolkit_layout.py" 2>/dev/null)"
[ -n "${_npu_toolkit_home}" ] || _npu_toolkit_home="${_npu_toolkit_here}"
export ASCEND_TOOLKIT_HOME="${_npu_toolkit_home}"
export ASCEND_HOME_PATH="${_npu_toolkit_home}"
export ASCEND_OPP_PATH="${_npu_toolkit_home}/opp"
export ASCEND_AICPU_PATH="${_npu_toolkit_home}"
export LD_LIBRARY_PATH="${_npu_toolkit_home}/lib64${LD_LIBRARY_PATH:+:${LD_LIBRARY_PATH}}"
export PYTHONPATH="${_npu_toolkit_home}/python/site-packages${PYTHONPATH:+:${PYTHONPATH}}"
export PATH="${_npu_toolkit_home}/bin${PATH:+:${PATH}}"
unset _npu_toolkit_here _npu_toolkit_home
