"""recipes.core.data_files."""

import pytest

from recipes.core import data_files


def test_check_data_file(tmp_path):
    with pytest.raises(data_files.DataError,
                       match=r"Expected the vocabulary at .*nope; no such"):
        data_files.check_data_file(str(tmp_path / "nope"), "vocabulary")
    with pytest.raises(data_files.DataError, match="it is not a file"):
        data_files.check_data_file(str(tmp_path))
    (tmp_path / "empty").write_text("")
    with pytest.raises(data_files.DataError, match="is empty"):
        data_files.check_data_file(str(tmp_path / "empty"))
    (tmp_path / "ok").write_text("x")
    assert data_files.check_data_file(str(tmp_path / "ok")) == str(
        tmp_path / "ok")
