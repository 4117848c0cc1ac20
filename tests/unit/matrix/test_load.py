import shutil

import pytest

from imagectl.errors import MatrixError
from imagectl.matrix.load import load_matrix


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
