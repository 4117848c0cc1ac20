"""``imagectl matrix --format ...``: each CI shape checked against the structure its consumer requires."""

from __future__ import annotations

import json
import re

import pytest
import yaml

from imagectl.ci.outputs import (
    GITHUB_EMPTY,
    GITHUB_KEYS,
    GITHUB_MAX_JOBS,
    GITLAB_MAX_JOBS,
    github_matrix,
    gitlab_pipeline,
    markdown_table,
    render,
)
from imagectl.errors import InputError
from imagectl.matrix.names import list_profiles

PROFILE_NAME = re.compile(r"^[a-z][a-z0-9_]*-[0-9.]+-[a-z]+[0-9]+(-[a-z0-9.]+)*$")


def check_github_matrix(text: str, max_jobs: int = GITHUB_MAX_JOBS) -> list[dict[str, str]]:
    """GitHub Actions' strategy.matrix of chunks: one line of JSON, an object whose only key is ``include``, a
    list of chunks ``{"chunk": n, "chunks": N, "profiles": {"include": [...]}}`` numbered 1..N, each
    ``profiles`` an include-only matrix of 1 to ``max_jobs`` flat entries with the same keys and string values
    (``verified`` a boolean), no more chunks than ``max_jobs``; returns the entries of every chunk in order."""
    assert "\n" not in text.strip()
    document = json.loads(text)
    assert isinstance(document, dict) and list(document) == ["include"]
    chunks = document["include"]
    assert isinstance(chunks, list) and len(chunks) <= max_jobs
    include: list[dict[str, str]] = []
    for number, chunk in enumerate(chunks, start=1):
        assert chunk == {"chunk": number, "chunks": len(chunks), "profiles": chunk["profiles"],
                         "indexes": chunk["indexes"]}
        assert list(chunk["profiles"]) == ["include"] and 1 <= len(chunk["profiles"]["include"]) <= max_jobs
        builds = chunk["profiles"]["include"]
        # one index job per profile of the chunk, naming every platform the chunk builds it for (none elsewhere)
        assert chunk["indexes"] == {"include": [
            {"profile": name, "platforms": ",".join(e["platform"] for e in builds if e["profile"] == name)}
            for name in dict.fromkeys(e["profile"] for e in builds)]}
        include += builds
    for entry in include:
        assert isinstance(entry, dict) and tuple(entry) == GITHUB_KEYS
        assert isinstance(entry["verified"], bool) and (entry["unverified"] == "") == entry["verified"]
        assert all(isinstance(v, str) for k, v in entry.items() if k != "verified")
        assert all(v for k, v in entry.items() if k not in ("verified", "unverified"))
        assert PROFILE_NAME.match(entry["profile"]) and entry["platform"] in entry["platforms"].split(",")
    assert len({(e["profile"], e["platform"]) for e in include}) == len(include)
    return include


_KEY = re.compile(r"^[A-Za-z_.][A-Za-z0-9_.-]*:( |$)")


def parse_gitlab(text: str) -> dict:
    """A small reader for the YAML subset the gitlab output uses (block mappings and lists, JSON-quoted
    scalars), so the structure is checked without PyYAML; PyYAML, when installed, must read the same."""
    lines = [(len(r) - len(r.lstrip()), r.strip())
             for r in text.splitlines() if r.strip() and not r.lstrip().startswith("#")]
    value, end = _block(lines, 0, lines[0][0] if lines else 0)
    assert end == len(lines), f"unparsed line {lines[end]}"
    return value


def _block(lines: list[tuple[int, str]], i: int, indent: int) -> tuple[object, int]:
    if lines[i][1].startswith("- "):
        items: list = []
        while i < len(lines) and lines[i][0] == indent and lines[i][1].startswith("- "):
            rest = lines[i][1][2:]
            if _KEY.match(rest):
                lines[i] = (indent + 2, rest)
                value, i = _block(lines, i, indent + 2)
            else:
                value, i = _scalar(rest), i + 1
            items.append(value)
        return items, i
    mapping: dict = {}
    while i < len(lines) and lines[i][0] == indent and not lines[i][1].startswith("- "):
        assert _KEY.match(lines[i][1]), lines[i]
        key, _, value = lines[i][1].partition(":")
        i += 1
        if value.strip():
            mapping[key] = _scalar(value.strip())
        elif i < len(lines) and lines[i][0] > indent:
            mapping[key], i = _block(lines, i, lines[i][0])
        else:
            mapping[key] = None
    return mapping, i


def _scalar(text: str) -> object:
    return json.loads(text) if text.startswith('"') else text


GITLAB_KEYS = {"build": ["PLATFORM", "PROFILE"], "index": ["PLATFORMS", "PROFILE"], "promote": ["PROFILE"]}


def check_gitlab_pipeline(text: str, include: str | None = ".gitlab-ci.yml",
                          max_jobs: int = GITLAB_MAX_JOBS) -> list[str]:
    """A GitLab child pipeline: build jobs (one per profile and platform: entries of one PLATFORM and a PROFILE
    list), index jobs (entries of one PLATFORMS and a PROFILE list) and promote jobs (one PROFILE list), at most
    ``max_jobs`` jobs each, extending the templates; every profile built is indexed with the platforms it was built
    for and promoted once.  Returns the profiles promoted."""
    document = parse_gitlab(text)
    jobs = {k: v for k, v in document.items() if k not in ("include", "stages") and not k.startswith(".")}
    assert jobs, "a child pipeline needs at least one job"
    if include:
        assert document["include"] == [{"local": include}] and "stages" not in document
    seen: dict[str, list[tuple[str, str]]] = {"build": [], "index": [], "promote": []}
    for name, job in jobs.items():
        assert set(job) == {"stage", "extends", "parallel"}, name
        assert job["extends"] == f".imagectl-{job['stage']}"
        matrix = job["parallel"]["matrix"]
        assert isinstance(matrix, list) and 1 <= len(matrix)
        count = 0
        for entry in matrix:
            assert list(entry) == GITLAB_KEYS[job["stage"]], entry
            value = entry.get("PLATFORM", entry.get("PLATFORMS", ""))
            assert isinstance(value, str) and all(PROFILE_NAME.match(p) for p in entry["PROFILE"])
            seen[job["stage"]] += [(p, value) for p in entry["PROFILE"]]
            count += len(entry["PROFILE"])
        assert 1 <= count <= max_jobs
    built, promoted = seen["build"], [p for p, _ in seen["promote"]]
    assert len(set(built)) == len(built) and len(set(promoted)) == len(promoted)
    assert sorted(seen["index"]) == sorted((p, ",".join(pl for q, pl in built if q == p)) for p in promoted)
    assert sorted(promoted) == sorted({p for p, _ in built})
    return promoted


def test_github_matrix_has_one_entry_per_profile(matrix):
    profiles = list_profiles(matrix)
    text = github_matrix(profiles)
    include = check_github_matrix(text)
    assert [e["profile"] for e in include] == [p.name for p in profiles]
    assert json.loads(text)["include"][0]["chunks"] == 1
    first = include[0]
    assert first == {"profile": "torch-2.7-cu128", "framework": "torch", "cuda": "12.8", "python": first["python"],
                     "verified": True, "unverified": "", "platform": "linux/amd64", "platforms": "linux/amd64"}


def test_github_unverified_entry_carries_its_reason(matrix_copy):
    matrix_copy.edit("torch.toml", 'cuda = "11.8"\n', 'cuda = "11.8"\n  unverified = "no source for its pins"\n')
    include = check_github_matrix(github_matrix(list_profiles(matrix_copy.load())))
    reasons = {e["profile"]: e["unverified"] for e in include if not e["verified"]}
    assert reasons == {name: "no source for its pins" for name in
                       ("torch-2.3-cu118", "torch-2.3-cu118-devel", "torch-2.3-cu118-base")}


def test_github_splits_into_chunks_in_order(matrix):
    profiles = list_profiles(matrix)  # 12
    document = json.loads(github_matrix(profiles, max_jobs=5))
    assert [(c["chunk"], c["chunks"], len(c["profiles"]["include"])) for c in document["include"]] == [
        (1, 3, 5), (2, 3, 5), (3, 3, 2)]
    assert [e["profile"] for c in document["include"] for e in c["profiles"]["include"]] == [p.name for p in profiles]
    assert len(check_github_matrix(github_matrix(profiles, max_jobs=4), max_jobs=4)) == 12  # 3 chunks of 4


def test_github_refuses_more_chunks_than_one_matrix_runs(matrix):
    profiles = list_profiles(matrix)  # 12: 3 chunks of 4 fit a limit of 4; 4 chunks of 3 do not fit a limit of 3
    with pytest.raises(InputError, match=r"12 profiles need 4 chunks of at most 3 build jobs \(12 jobs, one per "
                                         r"platform\), and one matrix runs at most 3"):
        github_matrix(profiles, max_jobs=3)


def test_github_empty_matrix_is_the_documented_string():
    assert github_matrix([]) == GITHUB_EMPTY == '{"include":[]}'
    assert check_github_matrix(GITHUB_EMPTY) == []


def test_gitlab_pipeline_fans_out_build_and_promote(matrix):
    profiles = list_profiles(matrix)
    text = gitlab_pipeline(profiles)
    assert check_gitlab_pipeline(text) == [p.name for p in profiles]


def test_gitlab_pipeline_without_include_declares_its_stages(matrix):
    document = parse_gitlab(gitlab_pipeline(list_profiles(matrix)[:2], include=None))
    assert document["stages"] == ["build", "index", "promote"] and "include" not in document


def test_gitlab_splits_more_than_200_profiles(matrix):
    profiles = list_profiles(matrix)
    many = (profiles * 80)[:450]
    document = parse_gitlab(gitlab_pipeline(many))
    jobs = ["imagectl-build", "imagectl-build-2", "imagectl-build-3"]
    assert [k for k in document if k.startswith("imagectl-build")] == jobs
    sizes = [len(document[k]["parallel"]["matrix"][0]["PROFILE"]) for k in jobs]
    assert sizes == [200, 200, 50]


def test_gitlab_max_jobs_splits_sooner(matrix):
    profiles = list_profiles(matrix)  # 12
    text = gitlab_pipeline(profiles, max_jobs=5)
    document = parse_gitlab(text)
    assert [len(document[k]["parallel"]["matrix"][0]["PROFILE"]) for k in document if k.startswith("imagectl-")] == [
        5, 5, 2, 5, 5, 2, 5, 5, 2]
    assert check_gitlab_pipeline(text, max_jobs=5) == [p.name for p in profiles]


@pytest.mark.parametrize("fmt", ["github", "gitlab", "tekton"])
def test_max_jobs_below_one_is_refused(matrix, fmt):
    with pytest.raises(InputError, match="--max-jobs 0: must be a positive integer"):
        render(list_profiles(matrix), fmt, max_jobs=0)


@pytest.mark.parametrize("fmt", ["json", "markdown", "argo"])
def test_max_jobs_is_refused_where_there_are_no_jobs(matrix, fmt):
    with pytest.raises(InputError, match=f"--max-jobs applies to --format github, gitlab, tekton, not {fmt}"):
        render(list_profiles(matrix), fmt, max_jobs=10)


def test_gitlab_empty_pipeline_still_has_a_job():
    document = parse_gitlab(gitlab_pipeline([]))
    jobs = [k for k in document if k != "stages"]
    assert jobs == ["imagectl-nothing-to-build"]
    assert document["stages"] == ["build"] and document[jobs[0]]["stage"] == "build"
    assert document[jobs[0]]["script"] and "parallel" not in document[jobs[0]]


def test_gitlab_output_reads_the_same_with_pyyaml(matrix):
    for profiles in (list_profiles(matrix), []):
        text = gitlab_pipeline(profiles)
        assert yaml.safe_load(text) == parse_gitlab(text)


def test_markdown_table_one_row_per_build(matrix):
    text = markdown_table(list_profiles(matrix))
    lines = text.strip().splitlines()
    assert lines[0].startswith("| Framework | Version | CUDA | cuDNN | NCCL | Python | Min driver |")
    assert set(lines[1].replace("|", "")) == {"-"}
    body = lines[2:]
    assert len(body) == 3  # 2.7.1 cu128, 2.3.1 cu121, 2.3.1 cu118 (2.3.0 is not listed: 2.3.1 is newer)
    assert all(line.count("|") == lines[0].count("|") for line in body)
    row = next(line for line in body if "| 2.3.1 | 12.1 |" in line)
    assert "8.9.2.26" in row and "2.20.5" in row and "530.30.02" in row
    assert "**3.10**" in row and "`torch-2.3-cu121`" in row
    assert "ubuntu22.04, ubuntu24.04" in next(line for line in body if "| 12.8 |" in line)


def test_markdown_empty_table_is_still_a_table():
    lines = markdown_table([]).strip().splitlines()
    assert len(lines) == 3 and lines[2].count("|") == lines[0].count("|")


def test_render_json_is_list_rows(matrix):
    rows = json.loads(render(list_profiles(matrix), "json"))
    assert {"name", "framework", "cuda", "cudnn", "nccl", "python", "min_driver"} <= set(rows[0])


# --- through the CLI ------------------------------------------------------------------------------


def test_cli_matrix_formats(run_cli, use_matrix, test_matrix_dir):
    use_matrix(test_matrix_dir)
    github = run_cli("matrix", "--format", "github")
    assert github.code == 0 and len(check_github_matrix(github.out)) == 12 and github.err == ""
    gitlab = run_cli("matrix", "--format", "gitlab", "--framework", "torch")
    assert gitlab.code == 0 and len(check_gitlab_pipeline(gitlab.out)) == 12
    markdown = run_cli("matrix", "--format", "markdown")
    assert markdown.code == 0 and markdown.out.startswith("| Framework |")
    plain = run_cli("matrix")
    assert plain.code == 0 and len(json.loads(plain.out)) == 12


def test_cli_matrix_unknown_framework_and_format(run_cli, use_matrix, test_matrix_dir):
    use_matrix(test_matrix_dir)
    r = run_cli("matrix", "--framework", "caffe")
    assert r.code == 2 and r.err.startswith("imagectl: --framework 'caffe'") and len(r.err.splitlines()) == 1
    assert run_cli("matrix", "--format", "yaml").code == 2


def test_cli_max_jobs(run_cli, use_matrix, test_matrix_dir):
    use_matrix(test_matrix_dir)
    github = run_cli("matrix", "--format", "github", "--max-jobs", "5")
    assert github.code == 0 and len(check_github_matrix(github.out, max_jobs=5)) == 12
    assert [c["chunks"] for c in json.loads(github.out)["include"]] == [3, 3, 3]
    gitlab = run_cli("matrix", "--format", "gitlab", "--max-jobs", "5")
    assert gitlab.code == 0 and len(check_gitlab_pipeline(gitlab.out, max_jobs=5)) == 12
    assert "imagectl-build-3:" in gitlab.out and "imagectl-build-4:" not in gitlab.out


def test_cli_max_jobs_above_the_documented_limit_warns(run_cli, use_matrix, test_matrix_dir):
    use_matrix(test_matrix_dir)
    r = run_cli("matrix", "--format", "gitlab", "--max-jobs", "500")
    assert r.code == 0 and len(check_gitlab_pipeline(r.out, max_jobs=500)) == 12
    assert r.err == "warning: --max-jobs 500 is above gitlab's documented 200 jobs per matrix\n"
    assert run_cli("matrix", "--format", "github", "--max-jobs", "256").err == ""


@pytest.mark.parametrize(("args", "message"), [
    (("--max-jobs", "0"), "imagectl: Invalid value for '--max-jobs': 0 is not in the range x>=1."),
    (("--max-jobs", "-1"), "imagectl: Invalid value for '--max-jobs': -1 is not in the range x>=1."),
    (("--max-jobs", "ten"), "imagectl: Invalid value for '--max-jobs': 'ten'"),
    (("--max-jobs", "2.5"), "imagectl: Invalid value for '--max-jobs': '2.5'"),
    (("--max-jobs",), "imagectl: Option '--max-jobs' requires an argument."),
    (("--max-jobs", "3"), "imagectl: 12 profiles need 4 chunks of at most 3 build jobs (12 jobs, one per platform), "
                          "and one matrix runs at most 3 of them"),
    (("--format", "markdown", "--max-jobs", "3"), "imagectl: --max-jobs applies to --format github, gitlab, tekton"),
])
def test_cli_bad_max_jobs_is_one_line_exit_2(run_cli, use_matrix, test_matrix_dir, args, message):
    use_matrix(test_matrix_dir)
    r = run_cli("matrix", "--format", "github", *args)
    assert r.code == 2 and r.out == "" and r.err.startswith(message), r.err
    assert len(r.err.splitlines()) == 1 and "Traceback" not in r.err


def test_cli_matrix_is_listed_in_help(run_cli):
    r = run_cli("--help")
    assert r.code == 0 and "matrix" in r.out
    sub = run_cli("matrix", "--help")
    assert sub.code == 0 and "verify" in sub.out and "sync" in sub.out
