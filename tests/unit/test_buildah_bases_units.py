"""The base of a buildah build is named by its digest alone (imagectl/engine/buildah.py: canonical_base), so the
image's history, which records the FROM reference, is the same whichever mirror, team copy or port served it."""

from __future__ import annotations

from imagectl.engine.buildah import BuildahEngine, canonical_base

DIGEST = "sha256:" + "ab" * 32


def test_the_canonical_name_depends_on_the_digest_and_platform_only():
    assert canonical_base(f"127.0.0.1:5000/hub/nvidia/cuda@{DIGEST}") == f"localhost/imagectl-base:sha256-{'ab' * 32}"
    assert canonical_base(f"registry.team.example/bases/cuda@{DIGEST}") == canonical_base(f"docker.io/x/y@{DIGEST}")
    assert canonical_base(f"h/cuda@{DIGEST}", "linux/arm64").endswith("-linux-arm64")


def test_only_from_lines_pinned_by_digest_are_renamed(tmp_path):
    mirror = f"127.0.0.1:5000/hub/nvidia/cuda@{DIGEST}"
    dockerfile = tmp_path / "Dockerfile"
    dockerfile.write_text(f"FROM {mirror} AS imagectl-install\nRUN echo {mirror}\n"
                          f"FROM --platform=linux/arm64 {mirror}\nLABEL base={mirror}\nFROM imagectl-install\n")
    engine = BuildahEngine.__new__(BuildahEngine)
    asked: list[tuple[str, str | None]] = []

    def named(ref, platform, on_line):
        asked.append((ref, platform))
        return canonical_base(ref, platform)

    engine._canonical_base = named  # the pull and tag are buildah's (tests/integration/test_rebuild.py runs them)
    (tmp_path / "out").mkdir()
    out = engine._with_canonical_bases(dockerfile, tmp_path / "out", "linux/arm64", print)
    name = canonical_base(mirror, "linux/arm64")
    assert out.read_text().splitlines() == [f"FROM {name} AS imagectl-install", f"RUN echo {mirror}",
                                            f"FROM --platform=linux/arm64 {name}", f"LABEL base={mirror}",
                                            "FROM imagectl-install"]
    assert asked == [(mirror, "linux/arm64")]  # pulled and named once

    plain = tmp_path / "Plain"
    plain.write_text("FROM docker.io/library/debian:bookworm\n")
    assert engine._with_canonical_bases(plain, tmp_path / "out", None, print) == plain  # not pinned: as it is
