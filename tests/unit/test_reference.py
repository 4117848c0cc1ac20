import pytest

from imagectl.errors import ValidationError
from imagectl.reference import apply_mirror, check_digest, parse_reference


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


@pytest.mark.parametrize("digest", [
    "sha256:" + "a" * 63, "sha256:" + "a" * 65, "sha256:" + "A" * 64, "sha512:" + "a" * 64, "sha256:",
    "md5:" + "a" * 32, "sha256:" + "g" * 64,
])
def test_digests_must_have_the_exact_length_of_their_algorithm(digest):
    with pytest.raises(ValidationError, match="invalid image"):
        parse_reference(f"nvidia/cuda@{digest}")
    with pytest.raises(ValidationError, match="invalid image digest"):
        check_digest(digest)


@pytest.mark.parametrize("digest", ["sha256:" + "0a" * 32, "sha384:" + "b" * 96, "sha512:" + "c" * 128])
def test_digests_of_each_algorithm_parse(digest):
    assert parse_reference(f"nvidia/cuda:12@{digest}").digest == digest


def test_a_digest_of_the_wrong_length_says_the_length(run_cli):
    result = run_cli("build", "torch-2.3-cu121", "--base", "nvidia/cuda@sha256:" + "a" * 63, "--extra", "numpy")
    assert result.code == 2 and "bad digest" in result.err and len(result.err.splitlines()) == 1
    assert "sha256: and exactly 64 lower-case hex digits" in check_digest_message("sha256:" + "a" * 65)


def check_digest_message(digest):
    try:
        check_digest(digest)
    except ValidationError as exc:
        return str(exc)
    raise AssertionError(f"{digest} was accepted")
