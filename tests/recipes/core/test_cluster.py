"""recipes.core.cluster: TF_CONFIG and the chief."""

import pytest

from recipes.core import cluster as cluster_lib


WORKERS = '{"cluster": {"worker": ["10.0.0.1:2222", "10.0.0.2:2222"]}, '


@pytest.mark.parametrize("config, chief", [
    (WORKERS + '"task": {"type": "worker", "index": 0}}', True),
    (WORKERS + '"task": {"type": "worker", "index": 1}}', False),
    ('{"cluster": {"chief": ["a:1"], "worker": ["b:2"]}, '
     '"task": {"type": "worker", "index": 0}}', False),
    ('{"cluster": {"chief": ["a:1"], "worker": ["b:2"]}, '
     '"task": {"type": "chief", "index": 0}}', True),
    ("", True),
])
def test_tf_config_names_the_chief(monkeypatch, config, chief):
    monkeypatch.setenv("TF_CONFIG", config)
    assert cluster_lib.is_chief() is chief
    cluster, kind, index = cluster_lib.parse_tf_config()
    if config:
        assert kind in cluster and 0 <= index < len(cluster[kind])
    else:
        assert (cluster, kind, index) == (None, None, None)


@pytest.mark.parametrize("config, problem", [
    ("{cluster: 1}", "is not valid JSON"),
    ("[1, 2]", "is not a JSON object"),
    ('{"task": {"type": "worker", "index": 0}}', 'has no "cluster"'),
    ('{"cluster": {"worker": "a:1"}, "task": {"type": "worker", '
     '"index": 0}}', "not as a non-empty list of \"host:port\" strings"),
    ('{"cluster": {"worker": ["a"]}, "task": {"type": "worker", '
     '"index": 0}}', "not as a non-empty list"),
    ('{"cluster": {"workers": ["a:1"]}, "task": {"type": "worker", '
     '"index": 0}}', "unknown job 'workers'"),
    ('{"cluster": {"worker": ["a:1"]}}', 'has no "task"'),
    ('{"cluster": {"worker": ["a:1"]}, "task": {"type": "chief", '
     '"index": 0}}', "type 'chief', which is not a job"),
    ('{"cluster": {"worker": ["a:1", "b:2"]}, "task": {"type": "worker", '
     '"index": 2}}', r"index 2; the 'worker' job has 2 address\(es\)"),
    ('{"cluster": {"worker": ["a:1"]}, "task": {"type": "worker", '
     '"index": "0"}}', "index '0'"),
])
def test_a_malformed_tf_config_is_named_with_what_was_expected(
        monkeypatch, config, problem):
    monkeypatch.setenv("TF_CONFIG", config)
    with pytest.raises(ValueError, match=problem) as info:
        cluster_lib.parse_tf_config()
    message = str(info.value)
    assert message.startswith("Environment variable `TF_CONFIG` ")
    assert f"Received: TF_CONFIG={config!r}" in message
    assert '{"cluster": {"worker": ["host0:port0"' in message  # expected
    with pytest.raises(ValueError):
        cluster_lib.is_chief()
