"""Runs a script in a fresh Python process with two logical CPU devices.

`tf.distribute.MirroredStrategy` tests need several devices, and logical
devices can only be configured before TensorFlow initialises: the script
runs in its own process (this one is left alone). Generic: any recipe test
can use it.
"""

import json
import os
import subprocess
import sys
import textwrap

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(
    os.path.abspath(__file__))))

PRELUDE = textwrap.dedent(
    """
    import tensorflow as tf

    _cpu = tf.config.list_physical_devices("CPU")[0]
    tf.config.set_logical_device_configuration(
        _cpu, [tf.config.LogicalDeviceConfiguration()] * 2)
    """
)


def run_with_two_cpus(script, *args, timeout=900):
    """Runs `script` (Python source) after configuring two logical CPUs.

    The script reports by printing one line `RESULT <json>`; that JSON is
    returned. `args` become `sys.argv[1:]`. Fails (AssertionError with the
    end of stderr) when the process fails or prints no result.
    """
    env = dict(os.environ, KERAS_BACKEND="tensorflow",
               TF_CPP_MIN_LOG_LEVEL="2", CUDA_VISIBLE_DEVICES="",
               PYTHONPATH=ROOT + os.pathsep + os.environ.get("PYTHONPATH", ""))
    process = subprocess.run(
        [sys.executable, "-c", PRELUDE + textwrap.dedent(script)]
        + [str(a) for a in args],
        cwd=ROOT, env=env, capture_output=True, text=True, timeout=timeout,
    )
    lines = [line for line in process.stdout.splitlines()
             if line.startswith("RESULT ")]
    assert process.returncode == 0 and lines, process.stderr[-3000:]
    return json.loads(lines[-1][len("RESULT "):])
