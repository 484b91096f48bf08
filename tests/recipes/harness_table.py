"""The recipe x backend table of docs/recipes/backends.md, from the harness.

Run the harness on each backend with `--junitxml`, then this script:

    for b in tensorflow jax torch; do
      KERAS_BACKEND=$b python -m pytest tests/recipes/test_harness.py \
          --junitxml=harness-$b.xml
    done
    python -m tests.recipes.harness_table harness-*.xml

Each XML file is one backend's run (the backend is read from the file
name: `tensorflow`, `jax` or `torch` in it). The table has a row per
recipe smoke command and a cell per backend: the resumed run's losses
against the uninterrupted run's (largest relative difference), what it
exported, or the failure, as recorded by `test_harness.py`.
"""

import json
import re
import sys
import xml.etree.ElementTree as ElementTree

BACKENDS = ("tensorflow", "jax", "torch")
TEST = "test_recipe_trains_resumes_after_a_kill_and_exports"


def backend_of(path):
    """The one backend named in `path` (`harness-jax.xml` -> `jax`)."""
    found = [b for b in BACKENDS if b in path]
    if len(found) != 1:
        raise SystemExit(f"Argument `{path}` must name one of the backends "
                         f"{BACKENDS} in its file name, e.g. harness-jax.xml.")
    return found[0]


def cells(path):
    """{smoke command id: markdown cell} from one junit XML file."""
    out = {}
    for case in ElementTree.parse(path).getroot().iter("testcase"):
        match = re.fullmatch(TEST + r"\[(.+)\]", case.get("name", ""))
        if not match:
            continue
        properties = {p.get("name"): p.get("value")
                      for p in case.iter("property")}
        seconds = float(case.get("time", 0))
        if case.find("failure") is not None or case.find("error") is not None:
            out[match[1]] = f"**failed** ({seconds:.0f} s)"
        elif case.find("skipped") is not None:
            reason = case.find("skipped").get("message", "")
            out[match[1]] = f"skipped: {reason}"
        else:
            losses = json.loads(properties["losses"])
            exports = ", ".join(json.loads(properties["exports"])) or "none"
            resumed = ", ".join(f"{x:.4f}" for x in losses["resumed"])
            diff = float(properties["max_rel_diff"])
            out[match[1]] = (
                f"equal: {resumed} (rel. diff {diff:.1g}); {exports}; "
                f"{seconds:.0f} s")
    return out


def table(paths):
    by_backend = {backend_of(path): cells(path) for path in paths}
    backends = [b for b in BACKENDS if b in by_backend]
    keys = sorted({key for c in by_backend.values() for key in c})
    lines = ["| recipe | " + " | ".join(backends) + " |",
             "|---|" + "---|" * len(backends)]
    for key in keys:
        lines.append(f"| {key} | " + " | ".join(
            by_backend[b].get(key, "not run") for b in backends) + " |")
    return "\n".join(lines)


if __name__ == "__main__":
    if len(sys.argv) < 2:
        raise SystemExit(__doc__)
    print(table(sys.argv[1:]))
