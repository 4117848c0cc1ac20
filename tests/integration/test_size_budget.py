"""The expected size and the size budget end to end (issue 37 item 3): buildah, the stand-in torch profile, a real
registry 2.8 holding the stand-in base, and the stand-in index (PEP 691 JSON with PEP 700 sizes, Range reads).

- ``build --plan --json`` sizes every layer group: the base from its manifest, each lock layer from the index's
  wheel sizes and their central directories (read by Range requests), the ``.pyc`` estimate and the rendered files;
  ``show --json`` then prints the lock layers offline, from what that plan read;
- a budget smaller than the expected size stops the build before anything is built or pushed: exit 1, step
  ``size``, the five largest contributors named, and the registry holds no tag (no repository) for it;
- a budget the expected size fits but the built image does not (the system layers are known only once built) stops
  it before any tag names it: exit 1, the largest layer groups named, no tag;
- a generous budget builds, pushes and tags, and ``--json`` carries the sizes and the budget.
"""

from __future__ import annotations

import json
import re

import pytest

from imagectl.errors import NotFoundError
from imagectl.registry import RegistryClient
from tests.integration.conftest import NO_DAEMON, empty_storage, write_config
from tests.integration.support.skips import require_binary
from tests.integration.test_build import PROFILE

pytestmark = pytest.mark.integration

BASE = "nvidia/cuda:12.1.1-base-ubuntu22.04"  # torch-2.3-cu121's default flavour (its pins bring nvidia-* wheels)


def tags_of(registry, repo: str) -> list[str]:
    """The repository's tags; [] when the registry does not know it."""
    try:
        return RegistryClient(registry.host, insecure=True).list_tags(repo)
    except NotFoundError:
        return []


def with_budget(config, budget: str) -> None:
    text = config.read_text()
    text = re.sub(r'(?m)^size_budget = .*\n', "", text)
    config.write_text(text.replace("[build]\n", f"[build]\nsize_budget = {json.dumps(budget)}\n", 1))


@pytest.fixture
def setup(tmp_path, monkeypatch, mirror, wheel_index, registry):
    """A buildah runner with empty storage and no Docker daemon, and a team lock folder (empty: a build locks at
    build time); returns (config file, namespace)."""
    require_binary("buildah")
    monkeypatch.setenv("DOCKER_HOST", NO_DAEMON)
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))  # no wheel, lock or size an earlier test cached
    namespace = f"size-{tmp_path.name[-12:].lower().replace('_', '-')}".rstrip("-")
    (tmp_path / "locks").mkdir()
    config = write_config(tmp_path, mirror=mirror, index_url=wheel_index, registry=registry, namespace=namespace,
                          engine="buildah", locks=tmp_path / "locks")
    empty_storage(monkeypatch, tmp_path / "runner")
    return config, namespace


def test_plan_sizes_every_group_and_show_reads_them_offline(run_cli, setup, mirror, registry):
    config, _ = setup
    locked = run_cli("lock", PROFILE)  # a team lock: show has a lock to size (the stand-in base's Python is 3.11)
    assert locked.code == 0, locked.err
    unsized = json.loads(run_cli("show", PROFILE, "--json").out)["size"]
    assert unsized["compressed"] == 0 and not unsized["complete"]  # nothing fetched yet
    assert all(p["how"] == "unknown" for g in unsized["groups"] for p in g["parts"])
    planned = run_cli("build", PROFILE, "--plan", "--json")
    assert planned.code == 0, planned.err[-3000:]
    [entry] = json.loads(planned.out)["plan"]
    sizes = entry["sizes"]
    assert sizes["budget"] is None and sizes["over_budget"] is None
    expected = sizes["expected"]["linux/amd64"]
    groups = {g["group"]: g for g in expected["groups"]}
    assert list(groups) == ["system", "cuda", "libs", "framework", "rest", "imagectl"]

    # the base: its manifest's layers, as the mirror holds them (measured); the engine's layers: unknown
    client = RegistryClient(registry.host, insecure=True)
    manifest = client.get_manifest(f"{mirror.prefix}/nvidia/cuda", mirror.digests[BASE])
    base, engine_layers = groups["system"]["parts"]
    assert base["how"] == "manifest" and base["compressed"] == sum(layer.size for layer in manifest.layers())
    assert base["unpacked"] is None and engine_layers["how"] == "unknown" and engine_layers["compressed"] is None
    assert not groups["system"]["complete"] and not expected["complete"]

    # each lock layer: every wheel's size and members known (the stand-in index gives sizes and Range reads)
    for name in ("cuda", "libs", "framework", "rest"):
        group = groups[name]
        assert group["complete"] and group["unpacked_complete"], group
        assert all(p["how"] == "wheel" and p["compressed"] > 0 and p["unpacked"] > 0 for p in group["parts"])
        assert group["compressed"] == sum(p["compressed"] for p in group["parts"])
    torch = next(p for p in groups["framework"]["parts"] if p["name"].startswith("torch=="))
    assert torch["note"].startswith("torch-2.3.1-") and torch["note"].endswith(".whl")
    pyc, files = groups["imagectl"]["parts"]
    assert pyc["how"] == "estimate" and pyc["compressed"] > 0 and "bytes of .pyc a file" in pyc["note"]
    assert files["how"] == "rendered" and 0 < files["unpacked"] < files["compressed"]  # stored, with tar headers
    assert expected["compressed"] == sum(g["compressed"] for g in expected["groups"])

    text = run_cli("build", PROFILE, "--plan")
    assert text.code == 0, text.err[-3000:]
    assert re.search(r"(?m)^  cuda +[\d.]+ [kMG]?B +[\d.]+ [kMG]?B +\d+ wheels", text.out), text.out

    # show reads no index and no registry: the lock layers from the sizes the plan read, the base unknown
    shown = run_cli("show", PROFILE, "--json")
    assert shown.code == 0, shown.err
    offline = {g["group"]: g for g in json.loads(shown.out)["size"]["groups"]}
    for name in ("cuda", "libs", "framework", "rest"):
        assert offline[name]["compressed"] == groups[name]["compressed"], name
        assert offline[name]["unpacked"] == groups[name]["unpacked"], name
    assert offline["system"]["compressed"] == 0 and not offline["system"]["complete"]
    assert "not fetched: show reads no registry" in offline["system"]["parts"][0]["note"]


def test_a_tiny_budget_stops_the_build_before_anything_is_built(run_cli, setup, registry):
    config, namespace = setup
    with_budget(config, "1MB")
    refused = run_cli("build", PROFILE, "--json")
    assert refused.code == 1, refused.err[-3000:]
    [result] = json.loads(refused.out)["results"]
    assert result["status"] == "failed" and result["step"] == "size"
    assert result["error"].startswith("size: expected size at least ")
    assert "over the size budget 1.0 MB ([build] size_budget), before anything is built or pushed" in result["error"]
    largest = result["error"].split("the largest: ", 1)[1].split(", ")
    assert len(largest) == 5 and all(re.search(r"\S [\d.]+ [kMG]?B$", item) for item in largest), largest
    assert largest[0].startswith(f"base {registry.host}/hub/{BASE}@")  # the stand-in wheels weigh kB, the base MB
    assert any(item.startswith("torch==2.3.1 ") for item in largest), largest
    assert result["sizes"]["budget"] == {"bytes": 1_000_000, "source": "[build] size_budget"}
    assert result["sizes"]["over_budget"] == result["error"].removeprefix("size: ")
    assert "building " not in refused.err  # nothing was built
    assert tags_of(registry, f"{namespace}/{PROFILE}") == []  # no tag moved, none made


def test_the_built_image_is_judged_before_any_tag_and_a_generous_budget_builds(run_cli, setup, registry):
    config, namespace = setup
    planned = run_cli("build", PROFILE, "--plan", "--json")
    assert planned.code == 0, planned.err[-3000:]
    floor = json.loads(planned.out)["plan"][0]["sizes"]["expected"]["linux/amd64"]["compressed"]

    # the expected floor fits (the system layers are unknown before the build); the built image does not
    with_budget(config, str(floor + 1))
    over = run_cli("build", PROFILE, "--json")
    assert over.code == 1, over.err[-3000:]
    [result] = json.loads(over.out)["results"]
    assert result["status"] == "failed" and result["step"] == "size", result
    assert re.match(r"size: built image is [\d.]+ [kMG]?B compressed, over the size budget", result["error"])
    assert "no tag names it; the largest: system " in result["error"]
    assert result["error"].count(" layer") == 5  # five groups named: system, cuda, framework, ...
    assert "check: ok" in over.err  # built and checked, then judged
    assert tags_of(registry, f"{namespace}/{PROFILE}") == []

    with_budget(config, "100GB")
    built = run_cli("build", PROFILE, "--json")
    assert built.code == 0, built.err[-3000:]
    [result] = json.loads(built.out)["results"]
    assert result["status"] == "built"
    assert result["sizes"]["budget"]["bytes"] == 100 * 10**9 and result["sizes"]["over_budget"] is None
    assert result["sizes"]["expected"]["linux/amd64"]["compressed"] == floor
    tags = tags_of(registry, f"{namespace}/{PROFILE}")
    assert "latest" in tags and sum(t.startswith("2.3.1-cu121-py3.11-") for t in tags) == 1, tags
    client = RegistryClient(registry.host, insecure=True)
    assert client.head_manifest(f"{namespace}/{PROFILE}", "latest") == result["digest"]


def test_an_engine_built_image_is_judged_from_its_untagged_push(run_cli, tmp_path, mirror, wheel_index, registry,
                                                                docker_client, docker_config):
    """The Docker engine builds the whole image (pip installs the lock, the .pyc files in its layers): its compressed
    size exists once pushed, so it is judged from the manifest its push by digest left, before attestations and
    tags."""
    namespace = "size-docker"
    config = write_config(tmp_path, mirror=mirror, index_url=wheel_index, registry=registry, namespace=namespace,
                          engine="docker")
    planned = run_cli("build", PROFILE, "--plan", "--json")
    assert planned.code == 0, planned.err[-3000:]
    expected = json.loads(planned.out)["plan"][0]["sizes"]["expected"]["linux/amd64"]
    groups = {g["group"]: g for g in expected["groups"]}
    assert [p["name"] for p in groups["imagectl"]["parts"]] == ["/opt/imagectl files"]  # no .pyc layer of its own
    assert groups["framework"]["parts"][-1]["name"] == ".pyc of the framework layer"  # pip compiles in its layer

    with_budget(config, str(expected["compressed"] + 1))
    over = run_cli("build", PROFILE, "--json")
    assert over.code == 1, over.err[-3000:]
    [result] = json.loads(over.out)["results"]
    assert result["step"] == "size" and "built image is " in result["error"], result
    assert "by its digest" in over.err  # pushed untagged, then judged
    assert tags_of(registry, f"{namespace}/{PROFILE}") == []
