import pytest

from imagectl.config import Config
from imagectl.errors import InputError, ValidationError
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
    files = context_files(resolve_profile("torch-2.3-cu121", matrix), Config(), extras=["einops==0.8.0"],
                          base_image=base, base_digest="sha256:" + "c" * 64)
    dockerfile = files["Dockerfile"].decode()
    assert dockerfile.splitlines()[1] == "FROM registry.example.com/team/torch:stable@sha256:" + "c" * 64
    assert "python -m venv" not in dockerfile and "extra-requirements.txt" in dockerfile
    assert 'org.opencontainers.image.base.name="registry.example.com/team/torch:stable"' in dockerfile
    with pytest.raises(ValidationError, match="--base needs extra packages"):
        context_files(resolve_profile("torch-2.3-cu121", matrix), Config(), base_image=base)
