import pytest

from imagectl.config import Config
from imagectl.errors import InputError, ValidationError
from imagectl.image_spec import ImageSpec
from imagectl.matrix.names import resolve_profile
from imagectl.reference import parse_reference
from imagectl.render.dockerfile import context_files
from imagectl.requirements import parse_requirements, read_requirements


def test_parse_requirements_skips_comments_and_validates():
    text = "# team\nEinops==0.8.0  # pinned\n\nrequests>=2\n"
    assert parse_requirements(text, "req.txt") == ("Einops==0.8.0", "requests>=2")


@pytest.mark.parametrize("line, fragment", [
    ("-r other.txt", "req.txt:1: options such as -r"),
    ("--index-url http://evil/simple", "options such as --index-url"),
    ("pkg @ https://evil.example.com/p.whl", "req.txt:1"),
    ("pkg; os.system('x')", "req.txt:1"),
])
def test_bad_requirement_lines(line, fragment):
    with pytest.raises(InputError, match=fragment.replace(".", "\\.")):
        parse_requirements(line, "req.txt")


def test_read_requirements_missing_file(tmp_path):
    with pytest.raises(InputError, match="cannot read"):
        read_requirements(str(tmp_path / "nope.txt"))


def test_extras_on_a_given_base(matrix):
    base = parse_reference("registry.example.com/team/torch:stable")
    spec = ImageSpec(resolve_profile("torch-2.3-cu121", matrix), extras=("einops==0.8.0",), user_base=base,
                     base_digest="sha256:" + "c" * 64)
    files = context_files(spec, Config())
    dockerfile = files["Dockerfile"].decode()
    assert dockerfile.splitlines()[1] == "FROM registry.example.com/team/torch:stable@sha256:" + "c" * 64
    assert "python -m venv" not in dockerfile and "extra-requirements.txt" in dockerfile
    assert 'org.opencontainers.image.base.name="registry.example.com/team/torch:stable"' in dockerfile
    with pytest.raises(ValidationError, match="--base needs extra packages"):
        context_files(ImageSpec(resolve_profile("torch-2.3-cu121", matrix), user_base=base), Config())


def test_a_bad_line_is_quoted_when_the_rest_of_the_file_is_requirements():
    with pytest.raises(InputError, match=r"req\.txt:3: 'torhc=2\.3' is not a PEP 508 requirement"):
        parse_requirements("# ours\neinops==0.8.0\ntorhc=2.3\n", "req.txt")


@pytest.mark.parametrize("text", [
    "root:$6$s4lt$SecretHash:19000:0:99999:7:::\ndaemon:*:19000:0:99999:7:::\n",  # /etc/shadow
    "ghp_Secret-Hash+0123456789/\n",  # a token file
    "Secret Hash\nSecretHash\n",  # lone words read as requirements, but nothing says this is a requirements file
    "einops==0.8.0\nSecret Hash one\nSecret Hash two\n",  # more than one bad line
    "-----BEGIN OPENSSH PRIVATE KEY-----\nSecretHash\n",  # not an option line, though it starts with '-'
])
def test_a_file_that_is_not_requirements_is_named_never_quoted(tmp_path, text):
    path = tmp_path / "secret"
    path.write_text(text)
    with pytest.raises(InputError) as caught:
        read_requirements(str(path))
    assert str(caught.value).startswith(f"{path}:") and "not shown" in str(caught.value)
    message = str(caught.value).replace(str(path), "FILE")
    assert "Secret" not in message and "root" not in message and "BEGIN" not in message
