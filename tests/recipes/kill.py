"""Kills a recipe process at a line of its output (fault tests)."""

import signal
import time


def kill_at_line(process, wanted, timeout=300):
    """SIGKILLs `process` (text stdout) when it prints the line `wanted`
    (e.g. `batch-end epoch=2 batch=3` of `tests/recipes/progress_run.py`);
    returns the lines it printed. Fails (with its output's end) when it
    ends otherwise or takes more than `timeout` seconds."""
    seen, deadline = [], time.time() + timeout
    try:
        for line in process.stdout:
            seen.append(line)
            if line.strip() == wanted:
                process.send_signal(signal.SIGKILL)
                break
            assert time.time() < deadline, "".join(seen)[-3000:]
        process.wait(timeout=60)
    finally:
        if process.poll() is None:
            process.kill()
            process.wait()
    assert process.returncode == -signal.SIGKILL, "".join(seen)[-3000:]
    return seen
