"""Full garbage collections of a served process, timed (bench.load's server reads).

On PYTHONPATH, Python imports this at start. Where HWNAS_GC_TRACE names a folder (bench.load
sets it for the server's processes only), each full collection is appended to
`<folder>/gc-<pid>.log` as `<end, unix seconds> <pause, ms>`: every request of a server
process waits out such a pause. Any version of the server can be traced this way, the commit
before a change included.
"""

import gc
import os
import time

_folder = os.environ.get("HWNAS_GC_TRACE")
if _folder:
    _log = open(os.path.join(_folder, f"gc-{os.getpid()}.log"), "a", buffering=1)  # noqa: SIM115 - for the process's life
    _began = [0.0]

    def _timed(phase, info):
        if info["generation"] != 2:
            return
        if phase == "start":
            _began[0] = time.perf_counter()
        else:
            _log.write(f"{time.time():.3f} {(time.perf_counter() - _began[0]) * 1000:.2f}\n")

    gc.callbacks.insert(0, _timed)
