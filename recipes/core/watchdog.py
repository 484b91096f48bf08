"""A watchdog process that ends a recipe which waits too long (for its
cluster or its processes), and the recipe's name for messages.
"""

import os
import sys


def program():
    """`python -m recipes.<name>` of the running recipe, for messages."""
    spec = getattr(sys.modules.get("__main__"), "__spec__", None)
    name = getattr(spec, "name", "") or ""
    return "python -m " + name.removesuffix(".__main__") if name else "recipes"


# Run by a watchdog process: ends the process `pid` (the recipe) with
# `message` on stderr unless its stdin closes (the recipe's cluster is up,
# or the recipe ended) within `timeout` seconds.
_WATCHDOG = """
import os, select, signal, sys
pid, timeout, message = int(sys.argv[1]), float(sys.argv[2]), sys.argv[3]
if not select.select([sys.stdin], [], [], timeout)[0]:
    sys.stderr.write(message + "\\n")
    sys.stderr.flush()
    os.kill(pid, signal.SIGKILL)
"""


def start_watchdog(timeout, message):
    """Starts a watchdog process that ends this one with `message` on
    stderr unless its stdin is closed within `timeout` seconds (close it
    once what was waited for is up)."""
    import subprocess

    return subprocess.Popen(
        [sys.executable, "-c", _WATCHDOG, str(os.getpid()), str(timeout),
         message], stdin=subprocess.PIPE)


__all__ = ["program", "start_watchdog"]
