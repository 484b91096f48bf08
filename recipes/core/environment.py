"""What `results.json` records of the machine: versions and devices."""

import datetime
import platform


def environment():
    """Versions and devices, for results.json."""
    info = {
        "python": platform.python_version(),
        "platform": platform.platform(),
        "time": datetime.datetime.now(datetime.timezone.utc).isoformat(),
    }
    for module in ("keras", "tensorflow", "keras_hub", "keras_synth"):
        try:
            info[module] = __import__(module).__version__
        except Exception:  # pragma: no cover - optional
            pass
    try:
        import tensorflow as tf

        info["devices"] = [d.name for d in tf.config.list_logical_devices()]
    except Exception:  # pragma: no cover
        pass
    return info
