"""``[registry] max_referrers`` (issue 36, item 4): read from the file and the environment, refused in one line when
it is no whole number in range; and the lines a copy of referrers says about what it left out."""

from __future__ import annotations

from pathlib import Path

import pytest

from imagectl.config import MAX_REFERRERS, load_config
from imagectl.errors import ConfigError
from imagectl.registry.referrers import CopiedReferrers

SUBJECT = "sha256:" + "1" * 64


def _write(tmp_path: Path, text: str) -> None:
    (tmp_path / "imagectl.toml").write_text(text)


def test_max_referrers_is_1000_unless_set_in_the_file_or_the_environment(tmp_path):
    assert load_config(env={}, cwd=tmp_path).max_referrers == 1000
    _write(tmp_path, "[registry]\nmax_referrers = 5\n")
    assert load_config(env={}, cwd=tmp_path).max_referrers == 5
    assert load_config(env={"IMAGECTL_REGISTRY_MAX_REFERRERS": " 7 "}, cwd=tmp_path).max_referrers == 7


@pytest.mark.parametrize("value", ["-1", "1.5", '"many"', "true", str(MAX_REFERRERS + 1)])
def test_a_max_referrers_that_is_no_whole_number_in_range_is_one_line_naming_the_key(tmp_path, value):
    _write(tmp_path, f"[registry]\nmax_referrers = {value}\n")
    with pytest.raises(ConfigError) as caught:
        load_config(env={}, cwd=tmp_path)
    message = str(caught.value)
    assert "\n" not in message and ConfigError.exit_code == 2
    assert f"imagectl.toml: [registry] max_referrers: expected a whole number from 0 to {MAX_REFERRERS}" in message


def test_a_max_referrers_variable_that_is_no_number_is_refused(tmp_path):
    with pytest.raises(ConfigError, match="IMAGECTL_REGISTRY_MAX_REFERRERS: expected a whole number"):
        load_config(env={"IMAGECTL_REGISTRY_MAX_REFERRERS": "lots"}, cwd=tmp_path)


def test_the_notes_name_each_referrer_left_out_and_what_the_limit_left():
    other = "sha256:" + "2" * 64
    done = CopiedReferrers(SUBJECT, "up.example/nvidia/cuda", copied=("sha256:" + "a" * 64,),
                           foreign=((other, f"its subject is {'sha256:' + '3' * 64}, not the image copied"),), left=7)
    first, last = done.notes()
    assert first == (f"referrer {other} in up.example/nvidia/cuda: its subject is sha256:{'3' * 64}, not the image "
                     "copied; not copied")
    assert last == (f"up.example/nvidia/cuda@{SUBJECT}: more referrers than [registry] max_referrers allows: copied 1 "
                    "of the first 2 listed, left 7 uncopied")
    assert CopiedReferrers(SUBJECT, "up.example/x", copied=("sha256:" + "a" * 64,)).notes() == []
