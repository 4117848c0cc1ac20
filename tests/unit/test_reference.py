import pytest

from imagectl.errors import ValidationError
from imagectl.reference import apply_mirror, parse_reference


@pytest.mark.parametrize(
    "text, full",
    [
        ("ubuntu", "docker.io/library/ubuntu"),
        ("nvidia/cuda:12.1.1-runtime-ubuntu22.04", "docker.io/nvidia/cuda:12.1.1-runtime-ubuntu22.04"),
        ("localhost:5000/ml/torch:latest", "localhost:5000/ml/torch:latest"),
        ("127.0.0.1:5000/a/b@sha256:" + "a" * 64, "127.0.0.1:5000/a/b@sha256:" + "a" * 64),
        ("registry.example.com/x_y/z--w:v1.0", "registry.example.com/x_y/z--w:v1.0"),
    ],
)
def test_parse_normalises(text, full):
    assert str(parse_reference(text)) == full


@pytest.mark.parametrize(
    "text",
    ["", " ubuntu", "Ubuntu/Foo", "a;rm -rf /", "x:y:z", "nvidia/cuda:$(id)", "nvidia/cuda:tag`x`", "a/b@sha256:zz",
     "nvidia/cuda:" + "t" * 129, "a//b", "-a/b", "a/b\nFROM evil"],
)
def test_rejects_bad_references(text):
    with pytest.raises(ValidationError):
        parse_reference(text)


def test_familiar_form():
    assert parse_reference("ubuntu:22.04").familiar == "ubuntu:22.04"
    assert parse_reference("nvidia/cuda:1").familiar == "nvidia/cuda:1"
    assert parse_reference("localhost:5000/a:1").familiar == "localhost:5000/a:1"


def test_mirror_rewrites_only_its_domain():
    mirrors = {"docker.io": "mirror.internal:5000/hub"}
    mirrored = apply_mirror(parse_reference("nvidia/cuda:12.1.1"), mirrors)
    assert str(mirrored) == "mirror.internal:5000/hub/nvidia/cuda:12.1.1"
    assert str(apply_mirror(parse_reference("ghcr.io/a/b:1"), mirrors)) == "ghcr.io/a/b:1"
