"""What a registry, an image or a record says reaches a terminal escaped (issue 24, item 3): the commands run with
stdout and stderr on a real pseudo-terminal, and what the terminal receives holds no control or bidi character
imagectl did not put there itself (JSON keeps the exact values)."""

from __future__ import annotations

import json
import os
import pty
import sys

import pytest
from tagfakes import FakeStore, digest_of, tag_on

from imagectl.cli import main
from imagectl.cli.printable import printable
from imagectl.labels import CUDA, FRAMEWORK, FRAMEWORK_VERSION, PYTHON
from imagectl.tags.store import Move

NAME = "torch-2.3-cu121"
OSC_CSI = "\x1b]0;PWNED\x07\x1b[2J"
FORGED = "x\r\n2099-01-01T00:00:00Z  latest  rollback  -  -  root@forged"
BIDI = "12.1\u202e\r\nevil"


def on_a_terminal(monkeypatch, tmp_path, *args: str) -> tuple[int, bytes]:
    """Run ``imagectl ARGS`` in-process with stdout and stderr on a pseudo-terminal; exit status and the bytes the
    terminal received."""
    master, slave = pty.openpty()
    monkeypatch.chdir(tmp_path)
    with os.fdopen(os.dup(slave), "w", encoding="utf-8", closefd=True) as term:
        monkeypatch.setattr(sys, "stdout", term)
        monkeypatch.setattr(sys, "stderr", term)
        assert term.isatty()
        code = main(list(args))
        term.flush()
    os.close(slave)
    received = b""
    while True:
        try:
            chunk = os.read(master, 65536)
        except OSError:  # the slave side is closed and drained
            break
        if not chunk:
            break
        received += chunk
    os.close(master)
    return code, received


def hostile_store() -> FakeStore:
    store = FakeStore()
    store.add(tag_on(1), digest_of(1))
    store.add(tag_on(2), digest_of(2))
    store.add("latest", digest_of(2))
    store.label_map[digest_of(2)] = {FRAMEWORK: "torch", FRAMEWORK_VERSION: "2.3.1" + OSC_CSI, CUDA: BIDI,
                                     PYTHON: "3.10"}
    store.log.append(Move("latest", digest_of(2), digest_of(1), "rollback\x1b[31m", "2024-01-03T00:00:00Z", FORGED))
    return store


def registry_mode(tmp_path, monkeypatch, store: FakeStore) -> None:
    (tmp_path / "imagectl.toml").write_text('[registry]\nurl = "registry.example.com"\nnamespace = "ml"\n')
    monkeypatch.setattr("imagectl.cli.tags_cmd.open_tag_store", lambda repo, config, engine: store)
    for name in [n for n in os.environ if n.startswith("IMAGECTL_") and not n.startswith("IMAGECTL_TEST_")]:
        monkeypatch.delenv(name)


def controls(received: bytes) -> set[str]:
    """The control and bidi characters the terminal received, but the line ends a pty writes (CR LF)."""
    text = received.decode("utf-8").replace("\r\n", "\n")
    return {ch for ch in text if ch != "\n" and printable(ch) != ch}


@pytest.mark.parametrize("args", [("history", NAME), ("history", NAME, "--moves")])
def test_history_shows_hostile_labels_and_records_escaped(tmp_path, monkeypatch, args):
    registry_mode(tmp_path, monkeypatch, hostile_store())
    code, received = on_a_terminal(monkeypatch, tmp_path, *args)
    assert code == 0, received
    assert controls(received) == set(), received
    lines = received.decode().replace("\r\n", "\n").splitlines()
    assert not any(line.startswith("2099-") for line in lines)  # no forged line of the move log
    if "--moves" in args:
        assert "\\x1b[31m" in received.decode() and "x\\r\\n2099" in received.decode()
    else:
        assert "2.3.1\\x1b]0;PWNED\\x07\\x1b[2J" in received.decode() and "\\u202e" in received.decode()


def test_json_keeps_the_exact_values(tmp_path, monkeypatch, capsys):
    registry_mode(tmp_path, monkeypatch, hostile_store())
    monkeypatch.chdir(tmp_path)
    assert main(["history", NAME, "--moves", "--json"]) == 0
    [move] = json.loads(capsys.readouterr().out)
    assert move["by"] == FORGED and move["action"] == "rollback\x1b[31m"


def test_an_error_quoting_a_registry_is_escaped(tmp_path, monkeypatch):
    store = hostile_store()

    def refuse() -> list[str]:
        from imagectl.errors import RegistryError

        raise RegistryError(f"registry said: {OSC_CSI}")

    store.tags = refuse  # type: ignore[method-assign]
    registry_mode(tmp_path, monkeypatch, store)
    code, received = on_a_terminal(monkeypatch, tmp_path, "history", NAME)
    assert code == 1 and controls(received) == set(), received
    assert "registry said: \\x1b]0;PWNED" in received.decode()


def test_printable_escapes_every_control_and_bidi_character_and_keeps_the_rest():
    assert printable("torch 2.3.1 — ok é") == "torch 2.3.1 — ok é"
    assert printable("a\tb\rc\nd\x00e\x7f\x9b") == "a\\tb\\rc\\nd\\x00e\\x7f\\x9b"
    assert printable("\u202e\u2066\u200f\u2028") == "\\u202e\\u2066\\u200f\\u2028"


def test_an_imports_warning_quoting_a_label_is_escaped(tmp_path, monkeypatch):
    """``import REF --name P --no-check`` of an image labelled ``imagectl.profile="...OSC...CSI"`` warns about the
    label: the warning reaches the terminal escaped."""
    from imagectl.images.importer import ImportResult, SourceImage
    from imagectl.reference import parse_reference

    calls = []

    def imported(text, managed, options, env):
        calls.append(text)
        labelled = f"its imagectl labels say it was built as torch-9{OSC_CSI}"  # the importer's own note, as made
        source = SourceImage(parse_reference(text), in_registry=True, digest=digest_of(3), labels={}, created="",
                             key="3" * 10)
        return ImportResult(source, f"registry.example.com/ml/{NAME}", tag=tag_on(3), digest=digest_of(3),
                            notes=[labelled, "not checked (--no-check): what the image contains is unknown"])

    registry_mode(tmp_path, monkeypatch, hostile_store())
    monkeypatch.setattr("imagectl.cli.import_cmd.import_image", imported)
    code, received = on_a_terminal(monkeypatch, tmp_path, "import", "team/img:1", "--name", NAME, "--no-check")
    assert code == 0 and calls == ["team/img:1"], received
    assert controls(received) == set(), received
    assert "built as torch-9\\x1b]0;PWNED\\x07\\x1b[2J" in received.decode()
