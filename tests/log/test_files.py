"""The data directory's state files (broker/log/files.py write_json): whole or not at all."""
from __future__ import annotations

import json
import os

import pytest

from broker.log.files import write_json


def test_write_json_makes_the_directory_and_leaves_no_temporary_file(tmp_path):
    path = tmp_path / "fresh" / "state.json"
    write_json(str(path), {"b": 1, "a": [1, 2]}, indent=1, sort_keys=True)
    assert json.loads(path.read_text()) == {"a": [1, 2], "b": 1}
    assert path.read_text().startswith('{\n "a"')
    assert os.listdir(path.parent) == ["state.json"]
    umask = os.umask(0)
    os.umask(umask)
    assert path.stat().st_mode & 0o777 == 0o644 & ~umask


def test_write_json_keeps_the_old_file_when_the_new_document_cannot_be_written(tmp_path):
    path = tmp_path / "state.json"
    write_json(str(path), {"version": 1})
    with pytest.raises(TypeError):
        write_json(str(path), {"version": object()})
    assert json.loads(path.read_text()) == {"version": 1}
    assert os.listdir(tmp_path) == ["state.json"]


def test_write_json_gives_a_secret_to_its_owner_only(tmp_path):
    path = tmp_path / "secret.json"
    write_json(str(path), {"key": "x"}, mode=0o600)
    assert path.stat().st_mode & 0o777 == 0o600
