"""``imagectl matrix verify``: the pure comparisons, build location, and the command against local indexes."""

from __future__ import annotations

import json
import socket
import xml.etree.ElementTree as ET
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest
from packaging.requirements import Requirement

from imagectl.upstream.index_builds import IndexBuild, builds_of
from imagectl.upstream.verify import (
    DIFFERS,
    MISSING,
    UNSTATED,
    UNVERIFIABLE,
    Companion,
    compare_build,
    compare_companion,
    locate_build,
)
from imagectl.pypi import DistFile

PINS_2_3_1 = [
    'nvidia-cuda-runtime-cu12 (==12.1.105) ; platform_system == "Linux" and platform_machine == "x86_64"',
    'nvidia-cudnn-cu12 (==8.9.2.26) ; platform_system == "Linux" and platform_machine == "x86_64"',
    'nvidia-nccl-cu12 (==2.20.5) ; platform_system == "Linux" and platform_machine == "x86_64"',
    'triton (==2.3.1) ; platform_system == "Linux" and platform_machine == "x86_64" and python_version < "3.12"',
    "sympy",
]
CU118_PINS = [
    'nvidia-cuda-runtime-cu11==11.8.89; platform_system == "Linux"',
    'nvidia-cudnn-cu11==8.7.0.84; platform_system == "Linux"',
    'nvidia-nccl-cu11==2.20.5; platform_system == "Linux"',
    'triton==2.3.1; platform_system == "Linux" and python_version < "3.12"',
]
ABIS = ("cp38", "cp39", "cp310", "cp311", "cp312")


def build(lines: list[str], abis: tuple[str, ...] = ABIS, **changes: Any) -> IndexBuild:
    facts = IndexBuild("torch", "2.3.1", "", "torch-2.3.1-cp311-cp311-manylinux1_x86_64.whl", "3.11",
                       tuple(Requirement(line) for line in lines), abis)
    return replace(facts, **changes)


def release_of(matrix, version: str = "2.3.1"):
    fw = matrix.frameworks["torch"]
    return fw, next(r for r in fw.releases if r.version == version)


def pypi_variant(release):
    return next(v for v in release.variants if v.pypi)


def rows(findings) -> set[tuple[str, str, str, str]]:
    return {(f.what, f.matrix, f.index, f.kind) for f in findings}


# --- pure comparisons -----------------------------------------------------------------------------


def test_agreeing_build_has_no_findings(matrix):
    fw, release = release_of(matrix)
    assert compare_build(fw, release, pypi_variant(release), build(PINS_2_3_1)) == []


def test_each_stated_pin_and_field_is_compared(matrix):
    fw, release = release_of(matrix)
    lines = [line.replace("2.20.5", "2.21.5").replace("12.1.105", "12.4.127") for line in PINS_2_3_1]
    found = rows(compare_build(fw, release, pypi_variant(release), build(lines)))
    assert ("nccl", "2.20.5", "nvidia-nccl-cu12==2.21.5", DIFFERS) in found
    assert ("pin nvidia-nccl-cu12", "2.20.5", "nvidia-nccl-cu12==2.21.5", DIFFERS) in found
    assert ("cuda", "12.1", "12.4 (nvidia-cuda-runtime-cu12==12.4.127)", DIFFERS) in found
    assert len(found) == 4  # cuda, nccl, and the two pins


def test_unstated_pins_are_notes_and_missing_fields_differ(matrix):
    fw, release = release_of(matrix)
    variant = replace(pypi_variant(release), cudnn=None, pins=())
    found = rows(compare_build(fw, release, variant, build(PINS_2_3_1)))
    assert ("cudnn", "-", "nvidia-cudnn-cu12==8.9.2.26", DIFFERS) in found
    assert ("pin triton", "-", "==2.3.1", UNSTATED) in found
    assert ("pin nvidia-cuda-runtime-cu12", "-", "==12.1.105", UNSTATED) in found


def test_a_range_is_met_or_not(matrix):
    fw, release = release_of(matrix)
    lines = [line for line in PINS_2_3_1 if not line.startswith("triton")]
    lines += ['triton~=2.3.0; platform_system == "Linux"']
    assert compare_build(fw, release, pypi_variant(release), build(lines)) == []
    variant = replace(pypi_variant(release), pins=(("triton", "2.4.0"),))
    assert ("pin triton", "2.4.0", "triton~=2.3.0", DIFFERS) in rows(compare_build(fw, release, variant, build(lines)))


def test_markers_follow_the_wheels_python(matrix):
    fw, release = release_of(matrix)
    # read for CPython 3.12, triton's marker (python_version < "3.12") does not hold, and the matrix pins triton
    # only where python < 3.12: nothing to report, on 3.12 or on the other Pythons
    assert compare_build(fw, release, pypi_variant(release), build(PINS_2_3_1, python="3.12")) == []
    everywhere = replace(pypi_variant(release), pin_python=())  # the pin made unconditional: wrong on 3.12
    found = rows(compare_build(fw, release, everywhere, build(PINS_2_3_1, python="3.12")))
    assert found == {("pin triton", "2.3.1", "not a direct requirement", UNVERIFIABLE)}
    found = rows(compare_build(fw, release, everywhere, build(PINS_2_3_1)))
    assert found == {("pin triton on Python 3.12", "2.3.1", "not required there (marker)", DIFFERS)}


def test_a_pin_the_marker_keeps_must_not_be_dropped(matrix):
    fw, release = release_of(matrix)
    narrow = replace(pypi_variant(release), pin_python=(("triton", "<3.11"),))
    found = rows(compare_build(fw, release, narrow, build(PINS_2_3_1, python="3.10")))
    assert found == {("pin triton on Python 3.11", "-", "==2.3.1 (its marker holds there)", DIFFERS)}


def test_pins_for_other_platforms_do_not_count(matrix):
    fw, release = release_of(matrix)
    lines = [line.replace('platform_machine == "x86_64"', 'platform_machine == "aarch64"') for line in PINS_2_3_1]
    found = compare_build(fw, release, pypi_variant(release), build(lines))
    assert {f.kind for f in found} == {UNVERIFIABLE} and not any(f.failing for f in found)


def test_python_list_against_the_abis(matrix):
    fw, release = release_of(matrix)
    assert compare_build(fw, release, pypi_variant(release), build(PINS_2_3_1, abis=ABIS + ("cp313t",))) == []
    newer_abis = ("cp39", "cp310", "cp311", "cp312", "cp313")
    found = rows(compare_build(fw, release, pypi_variant(release), build(PINS_2_3_1, abis=newer_abis)))
    assert found == {("python", "3.8 3.9 3.10 3.11 3.12", "3.9 3.10 3.11 3.12 3.13", DIFFERS)}
    pure = rows(compare_build(fw, release, pypi_variant(release), build(PINS_2_3_1, abis=())))
    assert {f[3] for f in pure} == {UNVERIFIABLE}


def test_a_yanked_release_differs(matrix):
    fw, release = release_of(matrix)
    found = rows(compare_build(fw, release, pypi_variant(release), build(PINS_2_3_1, yanked="broken wheels")))
    assert found == {("yanked", "listed", "every file yanked: broken wheels", DIFFERS)}


def test_cuda_toolkit_pin_states_the_cuda_minor(matrix):
    fw, release = release_of(matrix)
    variant = replace(pypi_variant(release), cuda="13.0", cudnn=None, nccl=None, pins=(("cuda-toolkit", "13.0.2"),))
    lines = ['cuda-toolkit[cublas,cudart]==13.0.2; platform_system == "Linux"']
    assert compare_build(fw, release, variant, build(lines)) == []
    found = rows(compare_build(fw, release, replace(variant, cuda="12.8"), build(lines)))
    assert found == {("cuda", "12.8", "13.0 (cuda-toolkit==13.0.2)", DIFFERS)}


def test_an_extra_named_like_the_cuda_tag_applies(matrix):
    fw, release = release_of(matrix)
    variant = replace(pypi_variant(release), cudnn=None, nccl=None, pins=(("plugin-cu12", "1.0"),))
    lines = ['plugin-cu12==1.0; extra == "cu121"', 'plugin-cu13==1.0; extra == "cu130"']
    found = rows(compare_build(fw, release, variant, build(lines)))
    assert found == {("cuda", "12.1", "no requirement states it", UNVERIFIABLE)}  # plugin-cu13 is not applicable


def companion(lines: list[str], local: str = "") -> IndexBuild:
    return IndexBuild("torchvision", "0.18.1", local, "torchvision-0.18.1-cp311-cp311-manylinux1_x86_64.whl", "3.11",
                      tuple(Requirement(line) for line in lines), ("cp311",))


@pytest.mark.parametrize(("lines", "kind"), [
    (["torch==2.3.1"], None),
    (["numpy", "torch (==2.3.1)"], None),
    (["torch==2.3.0"], DIFFERS),
    (["torch>=2.3"], UNVERIFIABLE),
    (["torch<2.0"], DIFFERS),
    (["numpy"], UNVERIFIABLE),
])
def test_companion_by_its_torch_requirement(matrix, lines, kind):
    fw, release = release_of(matrix)
    found = compare_companion(fw, release, "cu121", Companion("torchvision", "0.18.1", companion(lines)), ())
    assert [f.kind for f in found] == ([kind] if kind else [])
    assert all(f.what == "companion torchvision" for f in found)


def test_companion_with_a_local_version_pin(matrix):
    fw, release = release_of(matrix)
    pinned = companion(["torch==2.3.1+cu118"], "cu118")
    assert compare_companion(fw, release, "cu118", Companion("torchvision", "0.18.1", pinned), ()) == []
    ranged = companion(["torch>=2.3"], "cu118")
    found = compare_companion(fw, release, "cu118", Companion("torchvision", "0.18.1", ranged), ())
    assert found[0].kind == UNVERIFIABLE


def test_missing_companion_and_the_frameworks_own_requirement(matrix):
    fw, release = release_of(matrix)
    missing = compare_companion(fw, release, "cu121", Companion("torchvision", "0.18.1", None, "not on the index"), ())
    assert rows(missing) == {("companion torchvision", "0.18.1", "not on the index", MISSING)}
    own = (Requirement("torchvision==0.18.1"),)
    assert compare_companion(fw, release, "cu121", Companion("torchvision", "0.18.1", companion(["numpy"])), own) == []
    wrong = compare_companion(fw, release, "cu121", Companion("torchvision", "0.18.0", None), own)
    assert [f.kind for f in wrong] == [DIFFERS] and "torch requires torchvision==0.18.1" in wrong[0].index


def files(*names: str) -> list[DistFile]:
    return [DistFile(name, f"https://files.example/{name}") for name in names]


def test_locate_build_on_pypi_a_mirror_and_a_cuda_index(matrix):
    fw, release = release_of(matrix)
    cu121, cu118 = pypi_variant(release), next(v for v in release.variants if v.cuda == "11.8")
    plain = builds_of(files("torch-2.3.1-cp311-cp311-manylinux1_x86_64.whl",
                            "torch-2.2.0-cp311-cp311-manylinux1_x86_64.whl"))
    assert locate_build(fw, release, cu121, plain, "https://pypi.org/simple/")
    assert locate_build(fw, release, cu118, plain, "https://pypi.org/simple") is None
    assert locate_build(fw, release, cu121, plain, "https://mirror.example/pypi/simple")  # a mirror: the same answer
    older = builds_of(files("torch-2.2.0-cp311-cp311-manylinux1_x86_64.whl"))
    assert locate_build(fw, release, cu121, older, "https://mirror.example/pypi/simple") == []  # expected, absent
    labelled = builds_of(files("torch-2.3.1+cu118-cp311-cp311-linux_x86_64.whl",
                               "torch-2.2.0+cu118-cp311-cp311-linux_x86_64.whl"))
    assert locate_build(fw, release, cu118, labelled, "https://mirror.example/whl/cu118")
    assert locate_build(fw, release, cu121, labelled, "https://mirror.example/whl/cu118") is None
    only_older = builds_of(files("torch-2.2.0+cu118-cp311-cp311-linux_x86_64.whl"))
    assert locate_build(fw, release, cu118, only_older, "https://mirror.example/whl/cu118") == []
    assert locate_build(fw, release, cu118, {}, "https://download.pytorch.org/whl/cu118/") == []


# --- the command against local indexes -----------------------------------------------------------


@pytest.fixture
def verify(run_cli, use_matrix, test_matrix_dir, serve):
    """``verify(index_root, *args, matrix_dir=None, prefix="simple")``: run ``matrix verify --framework torch``
    against a server over ``index_root`` (the test matrix unless ``matrix_dir``)."""

    def run(root: Path, *args: str, matrix_dir: Path | None = None, prefix: str = "simple"):
        use_matrix(matrix_dir or test_matrix_dir)
        server = serve(root)
        return run_cli("matrix", "verify", "--framework", "torch", "--index", f"{server.url}/{prefix}", *args)

    return run


def table(out: str) -> list[list[str]]:
    return [line.split() for line in out.strip().splitlines()[1:]]


def test_agreeing_index_exit_0_with_json_and_junit(verify, make_index, recorded, tmp_path):
    root = make_index().add_recorded(recorded, torch=["2.3.0", "2.3.1"]).write()
    junit = tmp_path / "reports" / "verify.xml"  # the directory is created
    r = verify(root, "--json", "--junit", str(junit))
    assert r.code == 0, r.out + r.err
    report = json.loads(r.out)
    assert {(c["release"], c["variant"]) for c in report["checked"]} == {("2.3.1", "cu121"), ("2.3.0", "cu121")}
    assert report["differences"] == 0
    assert {f["kind"] for f in report["findings"]} <= {UNSTATED, UNVERIFIABLE}
    assert "2 builds checked" in r.err and "0 differences" in r.err
    suite = ET.parse(junit).getroot().find("testsuite")
    assert suite.get("tests") == "2" and suite.get("failures") == "0"
    assert {case.get("name") for case in suite.iter("testcase")} == {"torch 2.3.1 cu121", "torch 2.3.0 cu121"}


def test_an_unwritable_junit_file_is_one_line_exit_1(verify, make_index, recorded, tmp_path):
    root = make_index().add_recorded(recorded, torch=["2.3.0", "2.3.1"]).write()
    (tmp_path / "plain-file").write_text("")
    r = verify(root, "--junit", str(tmp_path / "plain-file" / "verify.xml"))
    assert r.code == 1 and len(r.err.strip().splitlines()) == 1 and "cannot write" in r.err


def test_a_wrong_pin_is_a_table_row_and_exit_1(verify, make_index, recorded, copy_matrix, tmp_path):
    matrix_dir = copy_matrix(tmp_path / "m")
    path = matrix_dir / "torch.toml"
    path.write_text(path.read_text().replace('"nvidia-nccl-cu12" = "2.20.5", "triton"',
                                             '"nvidia-nccl-cu12" = "2.21.5", "triton"'))
    root = make_index().add_recorded(recorded, torch=["2.3.0", "2.3.1"]).write()
    junit = tmp_path / "verify.xml"
    r = verify(root, "--junit", str(junit), matrix_dir=matrix_dir)
    assert r.code == 1
    assert r.out.splitlines()[0].split() == ["FRAMEWORK", "RELEASE", "VARIANT", "WHAT", "MATRIX", "INDEX"]
    assert table(r.out) == [
        ["torch", "2.3.1", "cu121", "pin", "nvidia-nccl-cu12", "2.21.5", "nvidia-nccl-cu12==2.20.5"]
    ]
    assert "1 differences" in r.err
    suite = ET.parse(junit).getroot().find("testsuite")
    assert suite.get("failures") == "1"
    failure = next(c for c in suite.iter("testcase") if c.get("name") == "torch 2.3.1 cu121").find("failure")
    assert "nvidia-nccl-cu12" in failure.get("message")


def test_notes_are_listed_on_request(verify, make_index, recorded):
    root = make_index().add_recorded(recorded, torch=["2.3.0", "2.3.1"]).write()
    r = verify(root, "--notes")
    assert r.code == 0 and r.out.splitlines()[0].split()[-1] == "KIND"
    assert any(row[-1] == UNSTATED and row[3:5] == ["pin", "nvidia-cublas-cu12"] for row in table(r.out))


def test_a_release_missing_from_the_index(verify, make_index, recorded):
    root = make_index().add_recorded(recorded, torch=["2.3.1"]).write()
    r = verify(root)
    assert r.code == 1
    assert table(r.out) == [
        ["torch", "2.3.0", "cu121", "build", "torch", "2.3.0", "(cu121)", "not", "on", "the", "index"]
    ]


def test_a_yanked_release(verify, make_index, recorded):
    index = make_index().add_recorded(recorded, torch=["2.3.1"])
    for entry in recorded["torch"]["2.3.0"]["cpython"]:
        name = recorded["torch"]["2.3.0"]["wheel"]["filename"].replace("cp311-cp311", f"{entry}-{entry}")
        requires_dist = recorded["torch"]["2.3.0"]["wheel"]["requires_dist"]
        index.add("torch", name, requires_dist, version="2.3.0", yanked="bad build")
    r = verify(index.write())
    assert r.code == 1 and table(r.out) == [
        ["torch", "2.3.0", "cu121", "yanked", "listed", "every", "file", "yanked:", "bad", "build"]
    ]


def test_a_pytorch_style_index_with_local_versions(verify, make_index):
    index = make_index()
    index.prefix = "whl/cu118"
    for abi in ABIS:
        index.add("torch", f"torch-2.3.1+cu118-{abi}-{abi}-linux_x86_64.whl", CU118_PINS + ["sympy"],
                  version="2.3.1+cu118")
    index.add("torch", "torch-2.2.0+cu118-cp311-cp311-linux_x86_64.whl", CU118_PINS, version="2.2.0+cu118")
    for abi in ABIS:  # the companions have a wheel for every Python of the release, as on the real index
        index.add("torchvision", f"torchvision-0.18.1+cu118-{abi}-{abi}-linux_x86_64.whl", ["torch==2.3.1+cu118"],
                  version="0.18.1+cu118")
        index.add("torchaudio", f"torchaudio-2.3.1+cu118-{abi}-{abi}-linux_x86_64.whl", ["torch==2.3.1"],
                  version="2.3.1+cu118")
    r = verify(index.write(), "--json", prefix="whl/cu118")
    assert r.code == 0, r.out + r.err
    report = json.loads(r.out)
    assert report["checked"] == [{"framework": "torch", "release": "2.3.1", "variant": "cu118"}]
    assert report["findings"] == []


def test_a_missing_metadata_file_falls_back_to_another_wheel(verify, make_index, recorded):
    index = make_index().add_recorded(recorded, torch=["2.3.0", "2.3.1"])
    entry = recorded["torch"]["2.3.1"]["wheel"]
    missing = index.root / "files" / f"{entry['filename']}.metadata"  # the cp311 wheel: no .metadata, no wheel
    root = index.write()
    missing.unlink()
    r = verify(root)
    assert r.code == 0, r.out + r.err


def test_malformed_metadata_is_a_difference(verify, make_index, recorded):
    index = make_index().add_recorded(recorded, torch=["2.3.1"])
    for abi in recorded["torch"]["2.3.0"]["cpython"]:
        name = recorded["torch"]["2.3.0"]["wheel"]["filename"].replace("cp311-cp311", f"{abi}-{abi}")
        index.add("torch", name, metadata="Metadata-Version: 2.1\nName: torch\n\n", version="2.3.0")
    r = verify(index.write())
    assert r.code == 1
    row = table(r.out)[0]
    assert row[:4] == ["torch", "2.3.0", "cu121", "metadata"]
    assert "unreadable:" in r.out and "malformed metadata" in r.out


def test_redirects_and_pagination(verify, make_index, recorded):
    index = make_index().add_recorded(recorded, torch=["2.2.0", "2.3.0", "2.3.1"])
    redirects = {f"/old/{p}/": f"/simple/{p}/" for p in ("torch", "torchvision", "torchaudio")}
    root = index.write(redirects=redirects, paginate=("torch",))
    r = verify(root, "--json", prefix="old")
    assert r.code == 0, r.out + r.err
    assert len(json.loads(r.out)["checked"]) == 2


def test_companion_not_on_the_index(verify, make_index, recorded):
    root = make_index().add_recorded(recorded, torch=["2.3.0", "2.3.1"], companions=False).write()
    r = verify(root, "--json")
    assert r.code == 1
    missing = {(f["release"], f["what"]) for f in json.loads(r.out)["findings"] if f["kind"] == MISSING}
    assert missing == {(v, f"companion {c}") for v in ("2.3.0", "2.3.1") for c in ("torchvision", "torchaudio")}


def _closed_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def test_unreachable_index_is_one_line_exit_1(run_cli, use_matrix, test_matrix_dir):
    use_matrix(test_matrix_dir)
    r = run_cli("matrix", "verify", "--framework", "torch", "--index", f"http://127.0.0.1:{_closed_port()}/simple")
    assert r.code == 1 and r.out == ""
    assert len(r.err.strip().splitlines()) == 1 and "cannot reach the index" in r.err and "Traceback" not in r.err


def test_bad_arguments_exit_2(run_cli, use_matrix, test_matrix_dir):
    use_matrix(test_matrix_dir)
    r = run_cli("matrix", "verify", "--index", "ftp://example.com/simple")
    assert r.code == 2 and len(r.err.strip().splitlines()) == 1 and "--index" in r.err
    r = run_cli("matrix", "verify", "--framework", "caffe")
    assert r.code == 2 and "not in the matrix" in r.err


@pytest.mark.parametrize(("line", "exact"), [
    ("torch==2.3.1", "2.3.1"),
    ("torch===2.3.1+cu118", "2.3.1+cu118"),
    ("jaxlib<=0.12.0.1,>=0.12.0.1", "0.12.0.1"),
    ("torch==2.3.*", None),
    ("torch>=2.3,<=2.4", None),
    ("torch>=2.3", None),
    ("torch", None),
])
def test_exact_version(line, exact):
    from imagectl.upstream.index_builds import exact_version

    assert exact_version(Requirement(line)) == exact
