"""Registry bytes stored when N profiles that share a base image are built and pushed, against the sum
of the images' sizes, in one run.

    python bench/registry_bytes.py [--profiles torch-2.1-cu121-py3.11,torch-2.2-cu121-py3.11,...] [-j 2]

Every profile here is on ``nvidia/cuda:12.1.1-runtime-ubuntu22.04`` (a stand-in of it) with Python 3.11, so
the base and the Python/venv layers are stored once.  "Sum of image sizes" is what N unrelated images would
store: for each pushed manifest, its config plus its compressed layers.  "Stored" is the size of the blob
store on the registry's disk after the pushes.
"""

from __future__ import annotations

import argparse
import subprocess
import sys
from contextlib import ExitStack
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import _fixture  # noqa: E402

DEFAULT = "torch-2.1-cu121-py3.11,torch-2.2-cu121-py3.11,torch-2.3-cu121-py3.11,torch-2.4-cu121-py3.11"


def blob_bytes(root: Path) -> int:
    blobs = root / "data" / "docker" / "registry" / "v2" / "blobs"
    return sum(p.stat().st_size for p in blobs.rglob("data") if p.is_file())


def image_bytes(host: str, repository: str) -> int:
    from imagectl.registry import RegistryClient

    client = RegistryClient(host, insecure=True)
    manifest = client.get_manifest(repository, "latest")
    return sum(d.size for d in manifest.blobs())


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--profiles", default=DEFAULT)
    parser.add_argument("-j", "--jobs", default="2")
    args = parser.parse_args()
    profiles = args.profiles.split(",")
    with ExitStack() as stack:
        setup = _fixture.start(stack, profiles)
        base_only = blob_bytes(setup.registry_root)  # the mirrored base image (not a build product)
        project = setup.workdir / "project"
        _fixture.write_config(setup, project, push=True, namespace="shared")
        proc = subprocess.run(_fixture.imagectl(project, "build", *profiles, "-j", args.jobs, "--force", "--quiet"),
                              cwd=project, env=_fixture.env(), capture_output=True, text=True)
        print(proc.stdout)
        if proc.returncode != 0:
            print(proc.stderr[-3000:])
            return 1
        sizes = {p: image_bytes(setup.registry_host, f"shared/{p}") for p in profiles}
        stored = blob_bytes(setup.registry_root)
    total = sum(sizes.values())
    for name, size in sizes.items():
        print(f"{name:32} {size / 1e6:8.1f} MB")
    print(f"{'sum of image sizes':32} {total / 1e6:8.1f} MB")
    print(f"{'registry blob store':32} {stored / 1e6:8.1f} MB (the mirrored base alone: {base_only / 1e6:.1f} MB)")
    print(f"stored / sum = {stored / total:.2f} for {len(profiles)} profiles sharing one base")
    return 0


if __name__ == "__main__":
    sys.exit(main())
