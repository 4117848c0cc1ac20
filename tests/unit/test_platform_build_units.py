"""The pure parts of multi-platform builds (issue 20, items 3 and 5): which platforms a build makes, how each is
checked here, what a host and engine refuse, the index's key and bytes, and which builds move the moving tag."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from imagectl.cli.building import _requests
from imagectl.cli.workspace import Workspace
from imagectl.config import Config
from imagectl.errors import InputError, OperationError
from imagectl.images.plan import BuildOptions
from imagectl.images.platforms import (
    CHECK_ANNOTATION,
    OCI_INDEX,
    CheckMode,
    IndexEntry,
    check_mode,
    chosen_platforms,
    index_key,
    index_manifest,
    parse_platforms,
    refuse_unbuildable,
    this_host,
)

AMD, ARM = "linux/amd64", "linux/arm64"


@pytest.fixture(scope="module")
def shipped():
    ws = Workspace()
    return ws.profile("torch-2.15-cu132", None), ws.profile("torch-2.3-cu121", None)


def binfmt(tmp_path: Path, state: str | None) -> Path:
    """A stand-in /proc/sys/fs/binfmt_misc with a qemu-aarch64 handler in ``state`` (None: no handler)."""
    folder = tmp_path / "binfmt_misc"
    folder.mkdir()
    if state is not None:
        (folder / "qemu-aarch64").write_text(f"{state}\ninterpreter /usr/libexec/qemu-binfmt/aarch64-binfmt-P\n"
                                             "flags: POCF\n")
    return folder


def test_platform_lists_accept_aliases_keep_order_and_drop_repeats():
    assert parse_platforms("arm64, linux/amd64,aarch64") == (ARM, AMD)
    assert parse_platforms("x86_64") == (AMD,)


@pytest.mark.parametrize("text", ["", ",", " , "])
def test_an_empty_platform_list_is_refused(text):
    with pytest.raises(InputError, match="name at least one platform"):
        parse_platforms(text)


def test_an_unknown_platform_is_refused_naming_the_option():
    with pytest.raises(InputError, match=r"--platforms 'linux/s390x': not a platform imagectl builds"):
        parse_platforms("linux/amd64,linux/s390x", "--platforms")


def test_the_platforms_come_from_the_flag_then_the_configuration_then_the_host(shipped):
    arm_capable, _ = shipped
    assert chosen_platforms(arm_capable, (ARM,), (AMD, ARM), AMD) == (ARM,)
    assert chosen_platforms(arm_capable, (), (AMD, ARM), AMD) == (AMD, ARM)
    assert chosen_platforms(arm_capable, (), (), ARM) == (ARM,)  # a Grace host builds arm64 by default


def test_a_platform_the_profile_has_no_wheels_for_is_refused_with_its_source(shipped):
    _, amd_only = shipped
    with pytest.raises(InputError) as flag:
        chosen_platforms(amd_only, (AMD, ARM), (), AMD)
    assert str(flag.value).startswith("--platform: torch-2.3-cu121 has no CUDA wheels for linux/arm64 (its "
                                      "platforms: linux/amd64, matrices/platforms.toml)")
    with pytest.raises(InputError, match=r"^\[build\] platforms: torch-2.3-cu121 has no CUDA wheels"):
        chosen_platforms(amd_only, (), (AMD, ARM), AMD)
    with pytest.raises(InputError, match=r"^this host's platform \(linux/arm64; --platform chooses another\)"):
        chosen_platforms(amd_only, (), (), ARM)


def test_build_all_cuts_the_configured_platforms_to_each_profile(shipped):
    arm_capable, amd_only = shipped
    assert chosen_platforms(amd_only, (), (AMD, ARM), AMD, every=True) == (AMD,)
    assert chosen_platforms(arm_capable, (), (AMD, ARM), AMD, every=True) == (AMD, ARM)


def test_native_emulated_and_not_checked(tmp_path):
    enabled = binfmt(tmp_path, "enabled")
    assert check_mode(AMD, AMD, enabled) == CheckMode(AMD, "native")
    assert check_mode(ARM, ARM, enabled).describe() == "native"
    emulated = check_mode(ARM, AMD, enabled)
    assert (emulated.how, emulated.emulator, emulated.describe()) == ("emulated", "qemu-aarch64",
                                                                     "emulated by qemu-aarch64")


@pytest.mark.parametrize("state", [None, "disabled"])
def test_without_an_enabled_handler_a_foreign_platform_is_not_checked(tmp_path, state):
    mode = check_mode(ARM, AMD, binfmt(tmp_path, state))
    assert mode.how == "not checked" and mode.describe() == "not checked on linux/arm64"


def test_docker_refuses_a_foreign_platform_naming_buildah(tmp_path):
    with pytest.raises(InputError) as refused:
        refuse_unbuildable((AMD, ARM), AMD, "docker", binfmt(tmp_path, "enabled"))
    assert "Docker engine builds this host's platform (linux/amd64) only" in str(refused.value)
    assert '[build] engine = "buildah"' in str(refused.value)
    refuse_unbuildable((AMD,), AMD, "docker", tmp_path / "none")  # this host's platform: nothing to emulate


def test_buildah_needs_a_qemu_handler_for_a_foreign_platform(tmp_path):
    refuse_unbuildable((AMD, ARM), AMD, "buildah", binfmt(tmp_path, "enabled"))
    with pytest.raises(OperationError) as refused:
        refuse_unbuildable((AMD, ARM), AMD, "buildah", tmp_path / "none")
    assert "cannot run linux/arm64 programs" in str(refused.value) and "qemu-user-static" in str(refused.value)


def test_this_host_is_a_platform():
    assert this_host("aarch64") == ARM and this_host("x86_64") == AMD
    assert this_host("riscv64") == AMD  # nothing imagectl builds is native there


def test_the_index_key_depends_on_every_platform_key_and_their_order():
    one = index_key({AMD: "a" * 64, ARM: "b" * 64})
    assert len(one) == 64 and one not in ("a" * 64, "b" * 64)
    assert one == index_key({AMD: "a" * 64, ARM: "b" * 64})
    assert one != index_key({ARM: "b" * 64, AMD: "a" * 64})
    assert one != index_key({AMD: "a" * 64, ARM: "c" * 64})
    assert one != index_key({AMD: "a" * 64})


def test_the_index_names_each_platform_and_how_it_was_checked():
    entries = [IndexEntry(AMD, "application/vnd.oci.image.manifest.v1+json", "sha256:" + "1" * 64, 1234, "native"),
               IndexEntry(ARM, "application/vnd.oci.image.manifest.v1+json", "sha256:" + "2" * 64, 987,
                          "emulated by qemu-aarch64")]
    data = index_manifest(entries)
    assert data == index_manifest(list(entries))  # the same entries, the same bytes
    index = json.loads(data)
    assert index["schemaVersion"] == 2 and index["mediaType"] == OCI_INDEX
    assert [(m["platform"], m["digest"], m["size"], m["annotations"]) for m in index["manifests"]] == [
        ({"architecture": "amd64", "os": "linux"}, "sha256:" + "1" * 64, 1234, {CHECK_ANNOTATION: "native"}),
        ({"architecture": "arm64", "os": "linux"}, "sha256:" + "2" * 64, 987,
         {CHECK_ANNOTATION: "emulated by qemu-aarch64"})]


class _Named:
    name = "buildah"


def test_one_platform_of_several_asked_for_leaves_the_moving_tag_to_index(shipped, monkeypatch):
    import imagectl.cli.building as building

    monkeypatch.setattr(building, "refuse_unbuildable", lambda *args: None)  # this host's binfmt_misc aside
    monkeypatch.setattr(building, "this_host", lambda: AMD)
    arm_capable, amd_only = shipped
    config = Config(registry_url="registry.example.com")
    one, = _requests([arm_capable], BuildOptions(), "linux/arm64", config, _Named(), every=False)
    assert one.platforms == (ARM,) and not one.moves_latest  # the CI fan-out's job: `imagectl index` moves it
    both, = _requests([arm_capable], BuildOptions(), "linux/amd64,linux/arm64", config, _Named(), every=False)
    assert both.platforms == (AMD, ARM) and both.moves_latest
    default, = _requests([arm_capable], BuildOptions(), None, config, _Named(), every=False)
    assert default.platforms == (AMD,) and default.moves_latest  # the host's platform, as before
    whole, = _requests([amd_only], BuildOptions(), "linux/amd64", config, _Named(), every=False)
    assert whole.moves_latest  # its only platform: the image is the profile's whole


def test_several_platforms_need_a_registry(shipped, monkeypatch):
    import imagectl.cli.building as building

    monkeypatch.setattr(building, "this_host", lambda: AMD)
    with pytest.raises(InputError, match=r"an image index needs a registry"):
        _requests([shipped[0]], BuildOptions(), "linux/amd64,linux/arm64", Config(), _Named(), every=False)
