"""The processes that watch a recipe: a watchdog that ends it when it waits
too long (for its cluster or its processes), and a guard that tells the
user when one process of a multi-process run stops; and the recipe's name
for messages.
"""

import os
import sys

# The guard process started by `start_guard`, until `release_guard`.
_GUARD_PROCESS = []


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


# Run by the guard process: unless the recipe writes "done" to its stdin
# before it ends, says which process stopped and whether the coordinator
# still listens (JAX ends the other processes when it does not).
_GUARD = """
import socket, sys
index, count, coordinator, program = sys.argv[1:5]
if sys.stdin.read() != "done":
    host, _, port = coordinator.rpartition(":")
    try:
        socket.create_connection((host.strip("[]"), int(port)), 2).close()
        gone = ""
    except OSError:
        gone = (f" The coordinator, process 0 at {coordinator}, is not "
                "listening: it stopped, and JAX ends every other process.")
    sys.stderr.write(
        f"{program}: error: Process {index} of {count} stopped before the "
        f"run ended.{gone} Start every process again with the same "
        "command: the run resumes from its last backup "
        "(<model_dir>/backup).\\n")
"""


def start_guard(index, count, coordinator):
    """Starts the guard process of process `index` of `count`: unless
    `release_guard` runs before this process ends, it tells the user which
    process stopped and whether the coordinator still listens."""
    import atexit
    import subprocess

    guard = subprocess.Popen(
        [sys.executable, "-c", _GUARD, str(index), str(count), coordinator,
         program()], stdin=subprocess.PIPE, text=True)
    _GUARD_PROCESS.append(guard)
    atexit.register(release_guard)


def release_guard():
    """Tells the guard process that this process ends as it should."""
    while _GUARD_PROCESS:
        guard = _GUARD_PROCESS.pop()
        try:
            guard.stdin.write("done")
            guard.stdin.close()
        except OSError:  # pragma: no cover - the guard already ended
            pass
        guard.wait()


__all__ = ["program", "release_guard", "start_guard", "start_watchdog"]
