"""Shared pytest configuration.

Hypothesis budget: property-based tests run a small, fixed (derandomized)
number of examples by default so that the suite stays fast on every backend.
Set `KERAS_SYNTH_HYPOTHESIS_EXAMPLES=N` (any positive integer) to run N
new random examples per property test instead. The long search of README
"Robustness" (4 property tests x 2500 = 10,000 cases, not run in CI):

    KERAS_SYNTH_HYPOTHESIS_EXAMPLES=2500 KERAS_BACKEND=tensorflow \
        python -m pytest -q tests/layers/test_synthesizer_attention_properties.py \
        --hypothesis-show-statistics
"""

import os

from hypothesis import HealthCheck, settings

_EXAMPLES = os.environ.get("KERAS_SYNTH_HYPOTHESIS_EXAMPLES", "").strip()

settings.register_profile(
    "keras_synth",
    # Building a Keras layer per example is slow next to Hypothesis' usual
    # budget; a first call also pays for tracing/compilation.
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
    print_blob=True,
    max_examples=int(_EXAMPLES) if _EXAMPLES else 10,
    # The default run is reproducible (same examples each time); a run with
    # an explicit budget explores new random examples.
    derandomize=not _EXAMPLES,
)
settings.load_profile("keras_synth")
