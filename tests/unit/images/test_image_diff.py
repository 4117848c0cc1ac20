"""``imagectl diff``'s pure parts: the facts read from a config, an SBOM and a check report, the comparison of two
images, the resolution of its arguments, and its text and JSON views (the registry end: tests/integration/
test_diff.py)."""

from __future__ import annotations

import json

import pytest

from imagectl.advisories.match import Finding
from imagectl.cli.diff_views import diff_json, format_diff
from imagectl.config import Config
from imagectl.errors import ConfigError, InputError, UnknownProfileError, ValidationError
from imagectl.images.image_diff import compare_images, package_changes, version_change
from imagectl.images.image_facts import (
    CheckSummary,
    GroupSize,
    ImageFacts,
    Layer,
    check_summary,
    config_history,
    deb_packages,
    image_packages,
    layer_groups,
)
from imagectl.images.read_facts import diff_target
from imagectl.reference import Reference

D1, D2, D3 = (f"sha256:{c * 64}" for c in "123")

# The history of a Docker-engine build of torch-2.3-cu121-py3.11 (created_by shortened), bottom first; the ones
# that made no layer say so.  The stand-in base: two layers.
DOCKER_HISTORY = [
    {"created_by": "/bin/sh -c #(nop) ADD file:abc in / "},
    {"created_by": "/bin/sh -c apt-get update && apt-get install -y g++ gcc python3.11-dev"},
    {"created_by": "/bin/sh -c #(nop)  ENV CUDA_VERSION=12.1.1", "empty_layer": True},
    {"created_by": "/bin/sh -c #(nop)  ARG SOURCE_DATE_EPOCH", "empty_layer": True},
    {"created_by": "|1 SOURCE_DATE_EPOCH=0 /bin/sh -c set -eu; if ! python3.11 -c 'import ensurepip, venv'"},
    {"created_by": "/bin/sh -c #(nop) COPY file:0fb8 in /opt/imagectl/lock-1-cuda.txt "},
    {"created_by": "|1 SOURCE_DATE_EPOCH=0 /bin/sh -c pip install --no-deps -r /opt/imagectl/lock-1-cuda.txt"},
    {"created_by": "/bin/sh -c #(nop) COPY file:578f in /opt/imagectl/lock-2-libs.txt "},
    {"created_by": "|1 SOURCE_DATE_EPOCH=0 /bin/sh -c pip install --no-deps -r /opt/imagectl/lock-2-libs.txt"},
    {"created_by": "/bin/sh -c #(nop) COPY file:c6a0 in /opt/imagectl/lock-3-framework.txt "},
    {"created_by": "|1 SOURCE_DATE_EPOCH=0 /bin/sh -c pip install --no-deps -r /opt/imagectl/lock-3-framework.txt"},
    {"created_by": "/bin/sh -c #(nop) COPY file:16e0 in /opt/imagectl/lock-4-rest.txt "},
    {"created_by": "|1 SOURCE_DATE_EPOCH=0 /bin/sh -c pip install --no-deps -r /opt/imagectl/lock-4-rest.txt"},
    {"created_by": "/bin/sh -c #(nop) COPY multi:f2e1 in /opt/imagectl/ "},
    {"created_by": "/bin/sh -c #(nop) COPY file:7424 in /opt/imagectl/check.py "},
    {"created_by": "/bin/sh -c #(nop)  LABEL imagectl.cuda=12.1", "empty_layer": True},
]
DOCKER_SIZES = [100, 200, 30, 1, 11, 2, 4, 3, 16, 1, 7, 4, 12]

# An assembled build (buildah): the system image's history, then the entries imagectl writes of its layers, two of
# torch's big files in layers of their own right before the framework's layer, and the extras.
ASSEMBLED_HISTORY = [
    {"created_by": "/bin/sh -c #(nop) ADD file:abc in / "},
    {"created_by": "/bin/sh -c #(nop) ARG ", "empty_layer": True},
    {"created_by": "/bin/sh -c set -eu; apt-get install python3.11"},
    {"created": "1970-01-01T00:00:00Z", "created_by": "imagectl: install /opt/imagectl/lock-1-cuda.txt (nvidia-x)"},
    {"created_by": "imagectl: install /opt/venv/lib/python3.11/site-packages/torch/lib/libtorch_cuda.so "
                   "(a file of torch==2.3.1)"},
    {"created_by": "imagectl: install /opt/venv/lib/python3.11/site-packages/torch/lib/libtorch_cpu.so "
                   "(a file of torch==2.3.1)"},
    {"created_by": "imagectl: install /opt/imagectl/lock-2-framework.txt (torch==2.3.1, triton==2.3.1)"},
    {"created_by": "imagectl: install /opt/imagectl/extras-lock.txt (team-extra==1.0)"},
    {"created_by": "imagectl: compile 812 .py files (hash-checked .pyc, PEP 552)"},
    {"created_by": "imagectl: copy /opt/imagectl (lock, constraints, check)"},
]
ASSEMBLED_SIZES = [50, 20, 300, 500, 100, 40, 5, 9, 1]


def test_a_docker_builds_layers_fall_in_the_system_group_each_lock_layer_and_imagectls_files():
    groups = layer_groups(DOCKER_HISTORY, DOCKER_SIZES)
    assert groups == (GroupSize("system", 3, 330), GroupSize("cuda", 2, 12), GroupSize("libs", 2, 6),
                      GroupSize("framework", 2, 19), GroupSize("rest", 2, 8), GroupSize("imagectl", 2, 16))
    assert sum(g.size for g in groups) == sum(DOCKER_SIZES)


def test_an_assembled_builds_big_files_belong_to_the_group_after_them_and_extras_have_their_own():
    assert layer_groups(ASSEMBLED_HISTORY, ASSEMBLED_SIZES) == (
        GroupSize("system", 2, 70), GroupSize("cuda", 1, 300), GroupSize("framework", 3, 640),
        GroupSize("extras", 1, 5), GroupSize("imagectl", 2, 10))


def test_a_history_that_does_not_pair_with_the_layers_gives_no_groups():
    assert layer_groups(DOCKER_HISTORY, DOCKER_SIZES[:-1]) == ()
    assert layer_groups([], []) == ()
    assert config_history(b"not json") == [] and config_history(b"[1]") == []
    assert config_history(json.dumps({"history": [{"created_by": "x"}, 3]}).encode()) == [{"created_by": "x"}]


def test_package_changes_say_up_down_added_removed_with_the_cuda_parts_first():
    a = {"torch": "2.3.0", "numpy": "1.26.4", "nvidia-nccl-cu12": "2.20.5", "filelock": "3.15.1", "gone": "1.0",
         "weird": "abc"}
    b = {"torch": "2.3.1", "numpy": "1.26.4", "nvidia-nccl-cu12": "2.19.3", "filelock": "3.14.0", "new": "0.1",
         "weird": "abd", "cuda-toolkit": "12.1"}
    changes, same = package_changes(a, b)
    assert same == 1
    assert [(c.name, c.kind) for c in changes] == [
        ("cuda-toolkit", "added"), ("nvidia-nccl-cu12", "down"), ("filelock", "down"), ("gone", "removed"),
        ("new", "added"), ("torch", "up"), ("weird", "changed")]
    assert [c.cuda_part for c in changes] == [True, True, False, False, False, False, False]
    assert package_changes(a, b, cuda_first=False)[0][0].name == "cuda-toolkit"  # by name alone: c < f
    assert version_change("1.0", "1.0.0") == "changed" and version_change("2.0", "10.0") == "up"


def test_deb_packages_and_the_check_summary_are_read_from_their_documents():
    sbom = {"bomFormat": "CycloneDX", "components": [
        {"purl": "pkg:deb/ubuntu/libc6@2.35-0ubuntu3.8?arch=amd64&distro=ubuntu-22.04"},
        {"purl": "pkg:deb/ubuntu/g%2B%2B@4%3A11.2.0-1ubuntu1?arch=amd64"},
        {"purl": "pkg:pypi/torch@2.3.1"}, "junk", {"purl": 3}]}
    assert deb_packages(sbom) == {"libc6": "2.35-0ubuntu3.8", "g++": "4:11.2.0-1ubuntu1"}
    predicate = {"result": "pass", "ran": {"gpuRan": False}, "where": {"platform": "linux/amd64"},
                 "found": {"python": "3.11.2", "framework": {"name": "torch", "version": "2.3.1", "cuda": "12.1",
                                                             "cudnn": "8.9.2", "nccl": None}}}
    assert check_summary(predicate) == CheckSummary("pass", {
        "python": "3.11.2", "framework": "2.3.1", "cuda": "12.1", "cudnn": "8.9.2", "gpu": "not run",
        "platform": "linux/amd64"})
    assert check_summary({"found": "nonsense"}) == CheckSummary("unknown", {"gpu": "not run"})


def test_an_images_packages_are_its_lock_and_extras_else_its_pins_and_no_labels_is_bad_input():
    labels = {"imagectl.framework": "torch", "imagectl.packages": "torch==2.3.1",
              "imagectl.lock.packages": "torch==2.3.1,Typing_Extensions==4.12.2", "imagectl.extras": "team-extra==1.0"}
    assert image_packages(labels, "A") == {"torch": "2.3.1", "typing-extensions": "4.12.2", "team-extra": "1.0"}
    del labels["imagectl.lock.packages"]
    assert image_packages(labels, "A") == {"torch": "2.3.1", "team-extra": "1.0"}
    with pytest.raises(InputError, match=r"^diff x: the image has no imagectl labels"):
        image_packages({"maintainer": "someone"}, "diff x")


LABELS = {"imagectl.framework": "torch", "imagectl.framework.version": "2.3.0", "imagectl.cuda": "12.1",
          "imagectl.cudnn": "8.9.2.26", "imagectl.nccl": "2.20.5", "imagectl.python": "3.11",
          "imagectl.build-key": "a" * 64, "org.opencontainers.image.base.digest": D3, "team.owner": "ml"}
CVE = Finding("torch", "2.3.0", ("CVE-2024-1", "GHSA-x"), "2.3.1", "high", "bad")


def facts(digest: str, **changes) -> ImageFacts:
    base = {"reference": "reg:5000/ml/torch-2.3-cu121:latest", "digest": digest, "image_digest": digest,
            "labels": LABELS, "packages": {"torch": "2.3.0", "nvidia-nccl-cu12": "2.20.5"},
            "layers": (Layer(D1, 100), Layer(D2, 50)),
            "groups": (GroupSize("system", 1, 100), GroupSize("rest", 1, 50)),
            "os_packages": {"libc6": "2.35"}, "check": CheckSummary("pass", {"framework": "2.3.0"}),
            "attestations": "ok, signatures unsigned", "advisories": (CVE,)}
    return ImageFacts(**{**base, **changes})


def test_two_images_compare_fact_by_fact_and_the_same_digest_is_the_same_image():
    a = facts(D1)
    assert compare_images(a, a).same
    b = facts(D2, labels={**LABELS, "imagectl.framework.version": "2.3.1", "imagectl.nccl": "2.21.5",
                          "team.owner": "infra"},
              packages={"torch": "2.3.1", "nvidia-nccl-cu12": "2.21.5", "team-extra": "1.0"},
              layers=(Layer(D1, 100), Layer(D3, 70), Layer("sha256:" + "4" * 64, 5)),
              groups=(GroupSize("system", 1, 100), GroupSize("rest", 1, 70), GroupSize("extras", 1, 5)),
              os_packages={"libc6": "2.35", "curl": "8.0"}, check=CheckSummary("pass", {"framework": "2.3.1"}),
              advisories=())
    diff = compare_images(a, b)
    assert not diff.same
    changed = {c.name: (c.a, c.b) for c in diff.facts if not c.same}
    assert changed == {"digest": (D1, D2), "version": ("2.3.0", "2.3.1"), "nccl": ("2.20.5", "2.21.5")}
    assert [c.name for c in diff.facts][:8] == ["digest", "platforms", "profile", "framework", "version", "cuda",
                                                "cudnn", "nccl"]
    assert [(c.name, c.kind) for c in diff.packages] == [("nvidia-nccl-cu12", "up"), ("team-extra", "added"),
                                                         ("torch", "up")]
    assert diff.os_packages is not None and [(c.name, c.kind) for c in diff.os_packages] == [("curl", "added")]
    assert [(s.group, s.a, s.b) for s in diff.sizes] == [("system", 100, 100), ("rest", 50, 70),
                                                         ("extras", None, 5), ("total", 150, 175)]
    assert (diff.new_layers, diff.new_bytes) == (2, 75)
    assert [(c.name, c.a, c.b) for c in diff.labels] == [("imagectl.framework.version", "2.3.0", "2.3.1"),
                                                         ("imagectl.nccl", "2.20.5", "2.21.5"),
                                                         ("team.owner", "ml", "infra")]
    assert diff.advisories_fixed == (CVE,) and diff.advisories_gained == ()
    assert [(c.name, c.a, c.b) for c in diff.check if not c.same] == [("framework", "2.3.0", "2.3.1")]


def test_an_image_without_sbom_or_groups_leaves_those_parts_unknown():
    diff = compare_images(facts(D1), facts(D2, os_packages=None, groups=(), check=None))
    assert diff.os_packages is None
    assert [s.group for s in diff.sizes] == ["total"]
    assert [(c.name, c.b) for c in diff.check] == [("result", ""), ("framework", "")]


def test_the_text_view_shows_what_changed_and_names_what_stayed():
    b = facts(D2, labels={**LABELS, "imagectl.framework.version": "2.3.1", "team.owner": "infra"},
              packages={"torch": "2.3.1", "nvidia-nccl-cu12": "2.20.5"}, advisories=(),
              attestation_problems=("missing provenance: no attestation refers to the image",))
    text = format_diff(compare_images(facts(D1), b))
    lines = text.splitlines()
    assert lines[0] == f"A  reg:5000/ml/torch-2.3-cu121:latest  {D1[:19]}"
    assert "version  2.3.0  2.3.1" in text
    assert "same: framework torch, cuda 12.1, cudnn 8.9.2.26, nccl 2.20.5, python 3.11, base digest " \
           f"{D3[:19]}, build key aaaaaaaaaa, attestations ok, signatures unsigned" in text
    assert "packages: 1 up, 1 the same" in text and "up      torch    2.3.0  2.3.1" in text
    assert "os packages (SBOM): 1 the same" in text
    assert "advisories: B gains 0, fixes 1 (of 1 in A, 0 in B)" in text
    assert "  fixed   CVE-2024-1 (GHSA-x; high): torch 2.3.0, fixed in 2.3.1" in text
    assert "team.owner  ml  infra" in text and "imagectl.framework.version  2.3.0" not in text  # said above
    assert lines[-1] == "note: B: attestation: missing provenance: no attestation refers to the image"
    same = format_diff(compare_images(facts(D1), facts(D1)))
    assert same.splitlines()[-1] == f"A and B are the same image ({D1})"


def test_the_text_view_says_in_one_line_what_stayed_and_leaves_out_a_reproducible_builds_epoch():
    a = facts(D1, created="1970-01-01T00:00:00+00:00")
    text = format_diff(compare_images(a, facts(D2, created="2026-12-06T03:20:51+00:00")))
    assert text.splitlines()[:2] == [
        f"A  reg:5000/ml/torch-2.3-cu121:latest  {D1[:19]}",
        f"B  reg:5000/ml/torch-2.3-cu121:latest  {D2[:19]}  created 2026-12-06T03:20:51+00:00"]
    assert "check report: the same (result pass, framework 2.3.0)" in text
    assert text.endswith("other labels: the same")
    unchecked = compare_images(facts(D1, check=None), facts(D2, check=None))
    assert "check report: none in either image" in format_diff(unchecked)


def test_the_json_view_carries_both_images_whole_and_every_comparison():
    data = json.loads(json.dumps(diff_json(compare_images(facts(D1), facts(D2)))))
    assert data["same"] is False
    assert data["facts"]["digest"] == {"a": D1, "b": D2, "same": False}
    assert data["facts"]["cuda"] == {"a": "12.1", "b": "12.1", "same": True}
    assert data["a"]["packages"] == {"torch": "2.3.0", "nvidia-nccl-cu12": "2.20.5"} and data["a"]["size"] == 150
    assert data["a"]["advisories"][0]["id"] == "CVE-2024-1" and data["a"]["os_packages"] == {"libc6": "2.35"}
    assert data["packages"] == [] and data["packages_same"] == 2
    assert data["sizes"][-1] == {"group": "total", "a": 150, "b": 150, "a_layers": 2, "b_layers": 2}
    assert data["advisories"] == {"gained": [], "fixed": []}


PROFILE = "torch-2.3-cu121"


def test_arguments_resolve_as_the_other_commands_resolve_images(matrix):
    config = Config(registry_url="reg.example.com:5000", namespace="ml")
    target = diff_target(PROFILE, matrix, config)
    assert (str(target.reference), target.digest_prefix) == (f"reg.example.com:5000/ml/{PROFILE}:latest", "")
    assert str(diff_target(f"{PROFILE}:stable", matrix, config).reference).endswith(f"/{PROFILE}:stable")
    assert str(diff_target(f"{PROFILE}@{D1}", matrix, config).reference) == f"reg.example.com:5000/ml/{PROFILE}@{D1}"
    prefix = diff_target(f"{PROFILE}@{D1[:19]}", matrix, config)
    assert prefix.digest_prefix == D1[:19] and prefix.reference.tag == "latest"
    assert diff_target(f"{PROFILE}-team:v1", matrix, config).reference.path == f"ml/{PROFILE}-team"
    written = diff_target(f"other.io/team/img@{D2}", matrix, Config())
    assert written.reference == Reference("other.io", "team/img", None, D2)


@pytest.mark.parametrize(("text", "error", "message"), [
    ("nope-9.9-cu999", UnknownProfileError, "nope-9.9-cu999"),
    (f"{PROFILE}:bad tag", ValidationError, f"^diff {PROFILE}:bad tag: invalid image tag"),
    (f"{PROFILE}:imagectl-history", ValidationError, "imagectl's own records"),
    (f"{PROFILE}@sha256:abc", ValidationError, f"^diff {PROFILE}@sha256:abc: invalid image digest"),
    ("Reg.io:5000/UPPER/x", ValidationError, "invalid image reference"),
])
def test_bad_arguments_are_input_errors(matrix, text, error, message):
    with pytest.raises(error, match=message):
        diff_target(text, matrix, Config(registry_url="reg.example.com:5000"))


def test_a_profile_without_a_registry_is_a_config_error(matrix):
    with pytest.raises(ConfigError, match=f"^diff {PROFILE}: no \\[registry\\] url configured"):
        diff_target(PROFILE, matrix, Config())
