"""Advisories as data: the matcher over OSV ranges, the shipped snapshot over the shipped locks, the marks of show,
list and lock --check, the build gate ([advisories] fail_on) and sync from a local folder of OSV records."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from packaging.version import Version

import imagectl.cli.building
import imagectl.lock.verify
from imagectl.advisories.gate import gate_hits
from imagectl.advisories.match import findings, range_affects
from imagectl.advisories.record import Event, parse_record
from imagectl.advisories.snapshot import known_advisories, load_advisories, record_files
from imagectl.config import Config
from imagectl.errors import MatrixError
from imagectl.lock.store import read_lock

REPO = Path(__file__).resolve().parents[3]
LOCKS = REPO / "matrices" / "locks"


def record(ident: str, package: str, events: list[dict], **more) -> dict:
    """An OSV record of one PyPI package with one ECOSYSTEM range."""
    return {"id": ident, "affected": [{"package": {"ecosystem": "PyPI", "name": package},
                                       "ranges": [{"type": "ECOSYSTEM", "events": events}]}], **more}


def events(*pairs: tuple[str, str]) -> tuple[Event, ...]:
    return tuple(Event(kind, None if text == "0" else Version(text)) for kind, text in pairs)


@pytest.mark.parametrize("version, affected", [("1.9", False), ("2.0", True), ("2.4.9", True), ("2.5", False),
                                               ("3.0", True), ("3.1", True), ("3.1.1", False)])
def test_a_range_is_introduced_fixed_and_last_affected_in_version_order(version, affected):
    rng = events(("introduced", "3.0"), ("last_affected", "3.1"), ("introduced", "2.0"), ("fixed", "2.5"))
    assert range_affects(rng, Version(version)) is affected


def test_a_finding_joins_records_that_name_each_other_and_takes_the_worst_severity():
    pysec = parse_record(record("PYSEC-1", "Torch", [{"introduced": "0"}, {"fixed": "2.6.0"}],
                                aliases=["CVE-1", "GHSA-1"]), "pysec.json")
    ghsa = parse_record(record("GHSA-1", "torch", [{"introduced": "0"}, {"fixed": "2.6.0"}], aliases=["CVE-1"],
                               database_specific={"severity": "CRITICAL"}), "ghsa.json")
    listed = parse_record({"id": "X-2", "affected": [{"package": {"ecosystem": "PyPI", "name": "torch"},
                                                      "versions": ["2.3.1"]}]}, "x.json")
    found = findings([pysec, ghsa, listed], {"torch": "2.3.1", "numpy": "1.0"})
    assert [(f.id, f.ids[1:], f.fixed, f.severity) for f in found] == [
        ("CVE-1", ("GHSA-1", "PYSEC-1"), "2.6.0", "critical"), ("X-2", (), None, None)]
    assert findings([pysec, ghsa], {"torch": "2.6.0"}) == []


def test_a_shipped_torch_2_3_lock_carries_cve_2025_32434_fixed_in_2_6_0():
    known = known_advisories(Config())
    old = known.findings(read_lock(LOCKS / "torch-2.3.1-cu121-py3.10.txt").versions)
    mark = next(f for f in old if f.id == "CVE-2025-32434")
    assert (mark.package, mark.version, mark.fixed, mark.severity) == ("torch", "2.3.1", "2.6.0", "critical")
    assert "GHSA-53q9-r3pm-6pq6" in mark.ids
    new = known.findings(read_lock(LOCKS / "torch-2.6.0-cu124-py3.10.txt").versions)
    assert "CVE-2025-32434" not in {f.id for f in new}


def test_every_shipped_record_is_osv_with_its_source():
    files = sorted((REPO / "matrices" / "advisories").rglob("*.json"))
    assert files
    for path in files:
        data = json.loads(path.read_text())
        assert set(data["source"]) >= {"repository", "path", "commit"}, path
        assert parse_record(data, str(path)) is not None, path
        assert path.name == f"{data['id']}.json"


def test_show_and_list_mark_an_affected_profile_and_name_the_nearest_unaffected(run_cli):
    shown = json.loads(run_cli("show", "torch-2.3.1-cu121", "--json").out)
    mark = next(a for a in shown["advisories"] if a["id"] == "CVE-2025-32434")
    assert mark["fixed"] == "2.6.0" and mark["version"] == "2.3.1"
    nearest = shown["unaffected_profile"]
    assert nearest is not None
    later = json.loads(run_cli("show", nearest, "--json").out)
    assert not any(a["package"] == "torch" for a in later["advisories"]) and later["unaffected_profile"] is None
    text = run_cli("show", "torch-2.3.1-cu121").out
    assert "CVE-2025-32434 (GHSA-53q9-r3pm-6pq6" in text and "fixed in 2.6.0" in text
    rows = {r["name"]: r for r in json.loads(run_cli("list", "--framework", "torch", "--json").out)}
    assert "CVE-2025-32434" in {a["id"] for a in rows["torch-2.3-cu121"]["advisories"]}


def test_lock_check_reports_shipped_locks_below_a_fix_and_fails_only_under_fail_on(run_cli, tmp_path, monkeypatch):
    monkeypatch.setattr(imagectl.lock.verify, "yanked_problems", lambda lock, settings=None: [])
    checked = run_cli("lock", "--check", "--framework", "torch")
    below = {line.split(": ")[2] for line in checked.err.splitlines() if ": advisory CVE-2025-32434 " in line}
    expected = {p.name for p in LOCKS.glob("torch-*.txt") if Version(read_lock(p).versions["torch"]) < Version("2.6")}
    assert checked.code == 0 and {Path(p).name for p in below} == expected and len(expected) == 12
    (tmp_path / "imagectl.toml").write_text('[advisories]\nfail_on = ["GHSA-53Q9-R3PM-6PQ6"]\n')
    gated = run_cli("lock", "--check", "--framework", "torch")
    assert gated.code == 1 and "12 refused by [advisories] fail_on" in gated.err


def test_fail_on_stops_a_build_before_any_engine(run_cli, tmp_path, monkeypatch):
    def no_engine(config):
        raise AssertionError("the gate must refuse before an engine is asked for")

    monkeypatch.setattr(imagectl.cli.building, "engine_for", no_engine)
    (tmp_path / "imagectl.toml").write_text('[advisories]\nfail_on = "high"\n')
    refused = run_cli("build", "torch-2.3.1-cu121")
    last = refused.err.splitlines()[-1]
    assert refused.code == 1 and "refuses torch-2.3.1-cu121 (CVE-2025-32434)" in last, refused.err
    assert "imagectl: warning: torch-2.3.1-cu121:" in refused.err and "CVE-2025-32434 (torch>=2.6.0)" in refused.err


def test_the_gate_takes_a_severity_or_ids():
    found = load_advisories([REPO / "matrices" / "advisories"]).findings({"torch": "2.3.1", "filelock": "3.15.1"})
    assert {f.id for f in gate_hits(found, "critical")} == {"CVE-2025-32434"}
    assert "CVE-2025-68146" in {f.id for f in gate_hits(found, "moderate")}
    assert {f.id for f in gate_hits(found, ("ghsa-w853-jp5j-5j7f",))} == {"CVE-2025-68146"}
    assert gate_hits(found, None) == []


def test_sync_keeps_the_records_of_locked_packages_with_their_source(run_cli, tmp_path):
    source = tmp_path / "db"
    ghsa = source / "advisories/github-reviewed/2025/04/GHSA-aaaa/GHSA-aaaa.json"
    ghsa.parent.mkdir(parents=True)
    ghsa.write_text(json.dumps(record("GHSA-aaaa", "filelock", [{"introduced": "0"}, {"fixed": "9.0"}])))
    other = source / "advisories/github-reviewed/2025/04/GHSA-bbbb/GHSA-bbbb.json"
    other.parent.mkdir(parents=True)
    other.write_text(json.dumps(record("GHSA-bbbb", "not-a-locked-package", [{"introduced": "0"}])))
    out = tmp_path / "out"
    synced = run_cli("advisories", "sync", "--from", str(source), "-o", str(out))
    assert synced.code == 0, synced.err
    kept = json.loads((out / "filelock" / "GHSA-aaaa.json").read_text())
    assert kept["source"]["path"] == "advisories/github-reviewed/2025/04/GHSA-aaaa/GHSA-aaaa.json"
    assert not (out / "not-a-locked-package").exists()
    assert f"| {source} | no commit recorded | 1 |" in (out / "README.md").read_text()
    (tmp_path / "imagectl.toml").write_text(f'[paths]\nadvisories = ["{out}"]\n')
    listed = json.loads(run_cli("advisories", "list", "--id", "GHSA-aaaa", "--json").out)
    assert listed and all(lock.split(": ")[1].startswith("filelock ") for lock in listed[0]["locks"])


def test_sync_reads_pypa_yaml_where_pyyaml_is_installed(run_cli, tmp_path):
    pytest.importorskip("yaml")
    vulns = tmp_path / "db" / "vulns" / "torch"
    vulns.mkdir(parents=True)
    (vulns / "PYSEC-9.yaml").write_text("id: PYSEC-9\naliases:\n- CVE-9\naffected:\n- package:\n    ecosystem: PyPI\n"
                                        "    name: torch\n  ranges:\n  - type: ECOSYSTEM\n    events:\n"
                                        "    - introduced: \"0\"\n    - fixed: 2.10\n")
    out = tmp_path / "out"
    assert run_cli("advisories", "sync", "--from", str(tmp_path / "db"), "-o", str(out)).code == 0
    kept = json.loads((out / "torch" / "PYSEC-9.json").read_text())
    assert kept["affected"][0]["ranges"][0]["events"][1] == {"fixed": "2.10"}  # a string, never the float 2.1


def test_a_malformed_record_is_one_line_naming_its_file_exit_2(run_cli, tmp_path):
    source = tmp_path / "db"
    source.mkdir()
    (source / "GHSA-cccc.json").write_text(json.dumps({"id": "GHSA-cccc", "affected": [{"package": "torch"}]}))
    result = run_cli("advisories", "sync", "--from", str(source), "-o", str(tmp_path / "out"))
    assert result.code == 2 and result.err.count("\n") == 1 and "Traceback" not in result.err
    assert f"{source}/GHSA-cccc.json: affected[0].package must be an object with a name" in result.err
    assert not (tmp_path / "out").exists()
    with pytest.raises(MatrixError, match="bad.json: the OSV record has no id"):
        parse_record({"affected": []}, "bad.json")


def test_compat_marks_affected_profiles(run_cli):
    rows = {r["name"]: r for r in json.loads(run_cli("compat", "--driver", "550.54.15", "--gpu", "H100", "--json").out)}
    old = next(a for a in rows["torch-2.3-cu121"]["advisories"] if a["id"] == "CVE-2025-32434")
    assert old["fixed"] == "2.6.0"
    assert "CVE-2025-32434" not in {a["id"] for a in rows["torch-2.6-cu124"]["advisories"]}
    table = run_cli("compat", "--driver", "550.54.15", "--gpu", "H100").out
    assert "advisories: CVE-2025-32434(torch>=2.6.0)" in table


def test_an_advisories_folder_that_cannot_be_looked_at_is_one_line_naming_it(tmp_path, monkeypatch):
    """A team folder under a parent the user may not enter (EACCES; root passes any mode bits, so the OS error is
    raised by a stand-in walk): one MatrixError naming the folder, not a traceback."""
    folder = tmp_path / "team"
    folder.mkdir()

    def denied(self, pattern):
        raise PermissionError(13, "Permission denied")

    monkeypatch.setattr(type(folder), "rglob", denied)
    with pytest.raises(MatrixError, match=r"team: cannot read the advisories folder: Permission denied"):
        record_files(folder)
