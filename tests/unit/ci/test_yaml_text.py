"""The YAML the CI outputs write without a YAML library: PyYAML reads back exactly the value written, whatever a
string holds (YAML's words for booleans and null, numbers, comment and mapping marks, line breaks, controls)."""

from __future__ import annotations

import random
import string

import pytest
import yaml

from imagectl.ci.yaml_text import yaml_comment, yaml_document, yaml_lines, yaml_string

AWKWARD = ["", "yes", "no", "on", "off", "null", "~", "true", "1.0", "0x1f", "1e3", "#x", "a #b", ": x", "a: b",
           "- a", "[a]", "{a: b}", "*ref", "&anchor", "!tag", "%dir", "@x", "`x`", "'q'", '"q"', "a\\b", " lead",
           "trail ", "a\nb", "a\n", "\n", "a\n\nb\n", "\ta", "a\r\nb", "\x00", "\x85", "\u2028", "é", "$(params.x)",
           "{{item}}", "---", "...", "a\n---\nb", "|", ">", "%"]


def test_every_awkward_string_reads_back_as_written():
    value = {"list": AWKWARD, "map": {f"k{n}": s for n, s in enumerate(AWKWARD)},
             "nested": [{"a": AWKWARD, "b": [[s] for s in AWKWARD]}]}
    assert yaml.safe_load(yaml_document(value)) == value


def test_random_strings_read_back_as_written():
    rng = random.Random(37)
    alphabet = string.printable + "\x00\x85\u2028é"
    for _ in range(3000):
        text = "".join(rng.choice(alphabet) for _ in range(rng.randint(0, 16)))
        value = {"k": [text, {"v": text}], "s": text}
        assert yaml.safe_load(yaml_document(value)) == value, repr(text)


def test_keys_that_yaml_would_read_as_other_types_are_quoted():
    value = {"on": 1, "yes": 2, "Null": 3, "n": 4, "a b": 5, "plain-key_1.x": 6}
    text = yaml_document(value)
    assert yaml.safe_load(text) == value
    assert '"on": 1' in text and '"n": 4' in text and "plain-key_1.x: 6" in text


def test_scalars_and_empty_collections():
    value = {"t": True, "f": False, "z": None, "i": 8, "s": "8", "e": {}, "l": []}
    assert yaml.safe_load(yaml_document(value)) == value
    assert yaml_lines(value) == ["t: true", "f: false", "z: null", "i: 8", 's: "8"', "e: {}", "l: []"]


def test_a_script_is_a_literal_block_kept_as_written():
    script = "#!/bin/sh\nset -eu\nif [ -n \"$X\" ]; then\n  echo \"$X\"\nfi\n"
    text = yaml_document({"steps": [{"script": script}, {"script": script.rstrip("\n")}]})
    assert "  - script: |\n      #!/bin/sh\n      set -eu\n" in text and "script: |-\n" in text
    assert yaml.safe_load(text) == {"steps": [{"script": script}, {"script": script.rstrip("\n")}]}


@pytest.mark.parametrize("text", [" lead\nx", "x \ny", "a\n\n", "a\tb\nc", "é\nx", "a\r\nb"])
def test_a_string_a_literal_block_would_change_is_a_json_string(text):
    line = yaml_document({"s": text}).splitlines()[0]
    assert line == f"s: {yaml_string(text)}"


def test_nested_lists_are_compact_and_ordered():
    value = {"steps": [[{"name": "build", "x": 1}], [{"name": "index"}]]}
    assert yaml_lines(value) == ["steps:", "  - - name: \"build\"", "      x: 1", "  - - name: \"index\""]


def test_a_comment_is_one_line():
    assert yaml_comment("unverified: p: no\n  pins\r\nyet") == "# unverified: p: no pins yet"


def test_not_a_yaml_value_is_a_programming_error():
    with pytest.raises(TypeError, match="not a YAML scalar: float"):
        yaml_document({"x": 1.5})
