"""Loading the GPU facts of the matrix: a build's `archs` (cubins and PTX) and `[gpus]` driver bounds."""

from __future__ import annotations

import pytest

from imagectl.matrix.model import Gpu
from imagectl.matrix.names import list_profiles
from imagectl.matrix.rules import build_archs_known, run_rules

VARIANT = '  cuda = "12.1"\n  pypi = true\n'  # the fixture's first PyPI cu121 variant


def with_archs(matrix_copy, archs: str):
    """``matrix_copy`` with ``archs`` on the fixture's first PyPI cu121 variant."""
    matrix_copy.edit("torch.toml", VARIANT, f'  cuda = "12.1"\n  archs = {archs}\n  pypi = true\n')
    return matrix_copy


def with_gpus(matrix_copy, gpus: str):
    """``matrix_copy`` with a file ``zz-gpus.toml`` whose ``[gpus]`` table holds ``gpus``."""
    matrix_copy.write("zz-gpus.toml", "[gpus]\n" + gpus + "\n")
    return matrix_copy


def test_archs_with_ptx_load(matrix_copy):
    m = with_archs(matrix_copy, '["sm_50", "sm_80", "sm_90", "compute_90"]').load()
    found = [v.archs for r in m.frameworks["torch"].releases for v in r.variants if v.archs]
    assert found == [("sm_50", "sm_80", "sm_90", "compute_90")]


@pytest.mark.parametrize("archs, message", [
    ('["sm_80", "9.0+PTX"]', r"'9.0\+PTX' is neither sm_XY \(a cubin\) nor compute_XY \(PTX\)"),
    ('["compute_90"]', "no sm_XY cubin"),
    ('["sm_90", "sm_80"]', "ascending order"),
    ('["sm_80", "sm_80"]', "given twice"),
])
def test_bad_archs_name_the_file(matrix_copy, archs, message):
    assert "torch.toml:" in str(with_archs(matrix_copy, archs).refused(message))


@pytest.mark.parametrize("archs", ['["sm_80", "sm_100"]', '["sm_80", "compute_100"]'])
def test_archs_its_nvcc_cannot_build_are_a_violation(matrix_copy, archs):
    m = with_archs(matrix_copy, archs).load()   # CUDA 12.1 cannot build Blackwell
    violations = [v for v in run_rules(list_profiles(m), [build_archs_known])]
    assert violations and "not targets of CUDA 12.1's nvcc" in violations[0].message


def test_the_shipped_builds_only_name_targets_of_their_nvcc(shipped_matrix):
    assert run_rules(list_profiles(shipped_matrix), [build_archs_known]) == []


def test_gpus_take_a_driver_floor_and_a_last_branch(matrix_copy):
    m = with_gpus(matrix_copy, '"X1" = { arch = "sm_120", min_driver = "570.86.16" }\n'
                               '"X2" = { arch = "sm_70", last_branch = 580 }\n"X3" = "sm_80"').load()
    assert m.gpus["X1"] == Gpu("X1", "sm_120", min_driver="570.86.16")
    assert m.gpus["X2"] == Gpu("X2", "sm_70", last_branch=580)
    assert m.gpus["X3"] == Gpu("X3", "sm_80")


@pytest.mark.parametrize("gpus, message", [
    ('"X" = { arch = "90" }', r"'90' is not sm_XY"),
    ('"X" = { min_driver = "570.86.16" }', "None is not sm_XY"),
    ('"X" = { arch = "sm_90", min_drivr = "570.86.16" }', "did you mean 'min_driver'"),
    ('"X" = { arch = "sm_90", min_driver = "latest" }', "min_driver"),
    ('"X" = { arch = "sm_90", last_branch = "580" }', "is not a driver branch number"),
    ('"X" = { arch = "sm_90", min_driver = "590.44.01", last_branch = 580 }', "past its last_branch R580"),
])
def test_bad_gpus_name_the_file(matrix_copy, gpus, message):
    assert "zz-gpus.toml:" in str(with_gpus(matrix_copy, gpus).refused(message))


def test_every_shipped_pypi_torch_build_records_its_archs(shipped_matrix):
    missing = [r.version for r in shipped_matrix.frameworks["torch"].releases for v in r.variants
               if v.pypi and not v.archs]
    assert missing == []


# --- issue 21: segments, PCI IDs, generated driver lists, forward-compatible branches, lock floors --------------


def test_gpus_take_a_segment_and_pci_ids_and_a_generated_list_lands_on_them(matrix_copy):
    with_gpus(matrix_copy, '"X1" = { arch = "sm_90", segment = "datacenter", pci = ["2335", "25B6 10DE 14A9"] }')
    matrix_copy.write("zz-lists.toml", '[driver_lists]\nsource = "test"\n[driver_lists.listed]\n'
                                       '"X1" = ["550.40.65..550.40.85"]\n[driver_lists.missing]\n'
                                       '"X1" = ["550.54.14..550.78"]\n')
    gpu = matrix_copy.load().gpus["X1"]
    assert (gpu.segment, gpu.pci) == ("datacenter", ("2335", "25B6 10DE 14A9"))
    assert (gpu.listed, gpu.missing) == (("550.40.65..550.40.85",), ("550.54.14..550.78",))


@pytest.mark.parametrize("gpus, lists, message", [
    ('"X1" = { arch = "sm_90", segment = "server" }', "", "segment 'server' is not one of datacenter"),
    ('"X1" = { arch = "sm_90", pci = ["0x2335"] }', "", "pci '0x2335' is not a PCI ID"),
    ('"X1" = "sm_90"', '"X2" = ["550.40.65..550.40.85"]', "'X2' is not a GPU of any \\[gpus\\] table"),
    ('"X1" = "sm_90"', '"X1" = ["550.40.65..555.42.02"]', "not FIRST..LAST within one driver branch"),
    ('"X1" = "sm_90"', '"X1" = ["550.90.07..550.40.65"]', "not FIRST..LAST within one driver branch"),
    ('"X1" = "sm_90"', '"X1" = ["550.40.65"]', "not FIRST..LAST within one driver branch"),
])
def test_bad_gpu_facts_and_lists_name_the_file(matrix_copy, gpus, lists, message):
    with_gpus(matrix_copy, gpus)
    if lists:
        matrix_copy.write("zz-lists.toml", f"[driver_lists]\n[driver_lists.listed]\n{lists}\n")
    matrix_copy.refused(message)


@pytest.mark.parametrize("value, ok", [("[470, 525]", True), ("[525, 470]", False), ('["535"]', False),
                                       ("[535, 535]", False), ("[true]", False)])
def test_forward_compatible_branches_are_ascending_numbers(matrix_copy, value, ok):
    matrix_copy.edit("cuda.toml", 'release = "12.1.1"', f'release = "12.1.1"\nforward_compat = {value}')
    if ok:
        assert matrix_copy.load().cuda["12.1"].forward_compat == (470, 525)
    else:
        matrix_copy.refused(r"\[cuda.12.1\] forward_compat must list driver branches")


def test_the_brands_reach_every_toolkit_and_the_requirement(matrix_copy):
    from imagectl.matrix.admission import require_cuda

    matrix_copy.edit("cuda.toml", 'tag = "{cuda_release}-{flavor}-{os}"',
                     'tag = "{cuda_release}-{flavor}-{os}"\nforward_compat_brands = ["tesla", "nvidia"]')
    matrix_copy.edit("cuda.toml", 'release = "12.1.1"', 'release = "12.1.1"\nforward_compat = [470]')
    m = matrix_copy.load()
    assert require_cuda(m.cuda["12.1"]) == ("cuda>=12.1 brand=tesla,driver>=470,driver<471 "
                                            "brand=nvidia,driver>=470,driver<471")
    assert require_cuda(m.cuda["11.8"]) == "cuda>=11.8"


def test_lock_floors_load_with_their_advisory(matrix_copy):
    matrix_copy.write("zz-floors.toml", '[lock]\nfloors = [{ package = "Setuptools", version = "65.5.1", '
                                        'uploaded = "2022-11-04", source = "CVE-2022-40897" }]\n')
    m = matrix_copy.load()
    floor = m.lock_floors[0]
    assert (floor.package, floor.version, floor.uploaded, floor.source) == (
        "setuptools", "65.5.1", "2022-11-04", "CVE-2022-40897")
    assert m.frameworks["torch"].lock_floors == (floor,)  # every framework's locks get them
    matrix_copy.write("zz-floors.toml", '[lock]\nfloors = [{ package = "wheel", version = "0.38.1" }]\n')
    matrix_copy.refused("is missing 'source'")
    matrix_copy.write("zz-floors.toml", '[lock]\nfloors = [{ package = "wheel", version = "0.38.1", source = " " }]\n')
    matrix_copy.refused("source must name the advisory")
    matrix_copy.write("zz-floors.toml", '[lock]\nfloors = [{ package = "wheel", version = "0.38.1", source = "CVE", '
                                        'uploaded = "2022-13-04" }]\n')
    matrix_copy.refused("uploaded must be the day 0.38.1 was uploaded")
