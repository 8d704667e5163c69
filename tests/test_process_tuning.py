"""The broker's own process tuning (broker/network/process_tuning.py) on this machine's glibc."""
from __future__ import annotations

import subprocess
import sys

from broker.network import process_tuning


def test_glibc_is_found_by_its_soname():
    libc = process_tuning._libc()
    assert libc is not None
    assert hasattr(libc, "mallopt") and hasattr(libc, "malloc_trim")


def test_tuning_malloc_starts_no_process():
    """ctypes.util.find_library would run ``ldconfig -p`` in a new process at every start."""
    script = ("import subprocess\n"
              "started = []\n"
              "real = subprocess.Popen.__init__\n"
              "def spy(self, *a, **k):\n"
              "    started.append(a[0] if a else k.get('args'))\n"
              "    real(self, *a, **k)\n"
              "subprocess.Popen.__init__ = spy\n"
              "from broker.network.process_tuning import tune_malloc, trim_malloc\n"
              "tune_malloc(); trim_malloc()\n"
              "import sys; print(started, 'ctypes.util' in sys.modules)\n")
    out = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True,
                         timeout=60, check=True)
    assert out.stdout.strip() == "[] False"
