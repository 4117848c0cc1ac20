"""``validate --json`` and ``render --json``: one JSON document on stdout, same exit statuses as without."""

import hashlib
import json
from pathlib import Path

from imagectl.images.build_key import build_key
from imagectl.render.context import NETRC_FILE

REPO = Path(__file__).resolve().parents[2]
FIXTURE_MATRICES = REPO / "tests/fixtures/matrices"
SECRET = "s3cr3t-pw"


def test_validate_json_clean_matrix(run_cli, use_matrix):
    use_matrix(FIXTURE_MATRICES)
    r = run_cli("validate", "--json")
    assert r.code == 0, r.out
    report = json.loads(r.out)
    assert report["ok"] is True and report["violations"] == [] and report["profiles"] > 0
    assert "cudnn_pin_agrees" in report["rules"] and "template_renders" in report["rules"]
    assert "0 violations" in r.err


def test_validate_json_violations_exit_1(run_cli, use_matrix, tmp_path):
    mine = tmp_path / "mine"
    mine.mkdir()
    torch = (FIXTURE_MATRICES / "torch.toml").read_text().replace('cudnn = "8.7.0.84"', 'cudnn = "8.9.7.29"')
    (mine / "torch.toml").write_text(torch)
    (mine / "cuda.toml").write_text((FIXTURE_MATRICES / "cuda.toml").read_text())
    use_matrix(mine)
    r = run_cli("validate", "--json", "--junit", "out.xml")
    assert r.code == 1
    report = json.loads(r.out)  # stdout is the JSON document only
    assert report["ok"] is False
    (bad,) = [v for v in report["violations"] if v["rule"] == "cudnn-pin-agrees"]
    assert set(bad) == {"rule", "profile", "message", "source"}
    assert bad["message"] == "cudnn = 8.9.7.29 but pins say nvidia-cudnn-cu11==8.7.0.84"
    assert bad["profile"].startswith("torch-") and "mine/torch.toml" in bad["source"]
    assert f"{len(report['violations'])} violations" in r.err
    assert b"<failure" in (tmp_path / "out.xml").read_bytes()


def _expected(run_cli, name: str, *args: str) -> dict[str, bytes]:
    """The context ``render NAME -o`` writes, read back as name -> bytes."""
    out = Path(f"expected-{name}")
    assert run_cli("render", name, *args, "-o", str(out)).code == 0
    return {p.relative_to(out).as_posix(): p.read_bytes() for p in sorted(out.rglob("*")) if p.is_file()}


def test_render_json_lists_hashes_and_build_key(run_cli, use_matrix):
    use_matrix(FIXTURE_MATRICES)
    r = run_cli("render", "torch-2.3-cu121", "--json")
    assert r.code == 0, r.err
    doc = json.loads(r.out)
    assert doc["profile"] == "torch-2.3-cu121" and doc["base_digest"] is None and "base" in doc["note"]
    files = _expected(run_cli, "torch-2.3-cu121")
    assert set(doc["files"]) == set(files) and "Dockerfile" in files
    for name, content in files.items():
        assert doc["files"][name] == {"sha256": hashlib.sha256(content).hexdigest(), "size": len(content)}
    assert doc["build_key"] == build_key(files, base_digest="", build_args={})
    assert len(doc["build_key"]) == 64 and not Path("ctx").exists()


def test_render_json_with_output_writes_and_prints(run_cli, use_matrix, tmp_path):
    use_matrix(FIXTURE_MATRICES)
    r = run_cli("render", "torch-2.3-cu121", "--json", "-o", "ctx")
    assert r.code == 0, r.err
    doc = json.loads(r.out)
    assert (tmp_path / "ctx" / "Dockerfile").is_file()
    written = (tmp_path / "ctx" / "Dockerfile").read_bytes()
    assert doc["files"]["Dockerfile"]["sha256"] == hashlib.sha256(written).hexdigest()


def test_render_json_added_files_build_args_and_no_secrets(run_cli, use_matrix, tmp_path):
    use_matrix(FIXTURE_MATRICES)
    (tmp_path / "site" / "sub").mkdir(parents=True)
    (tmp_path / "site" / "sub" / "wheel.txt").write_bytes(b"added file\n")
    (tmp_path / "imagectl.toml").write_text(
        "[paths]\ncontext = [\"site\"]\n"
        f"[pip]\nextra_index_urls = [\"https://bot:{SECRET}@extra.example.com/simple\"]\n"
        "[build]\nargs = { HTTP_PROXY = \"http://proxy.example:3128\" }\n")
    r = run_cli("render", "torch-2.3-cu121", "--json")
    assert r.code == 0, r.err
    assert SECRET not in r.out + r.err and "proxy.example" not in r.out
    doc = json.loads(r.out)
    assert NETRC_FILE in doc["files"]
    assert doc["files"]["files/sub/wheel.txt"] == {"sha256": hashlib.sha256(b"added file\n").hexdigest(), "size": 11}
    files = _expected(run_cli, "torch-2.3-cu121")
    rendered = {name: content for name, content in files.items() if not name.startswith("files/")}
    added = {name: hashlib.sha256(content).hexdigest() for name, content in files.items() if name.startswith("files/")}
    assert added == {"files/sub/wheel.txt": doc["files"]["files/sub/wheel.txt"]["sha256"]}
    args = {"HTTP_PROXY": "http://proxy.example:3128"}
    assert doc["build_key"] == build_key(rendered, base_digest="", build_args=args, file_digests=added)
    assert doc["build_key"] != build_key(rendered, base_digest="", build_args={}, file_digests=added)
