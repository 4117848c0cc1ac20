"""Registry requests of ``prune``: linear in the number of tags now, against the two listings per image before.

    python bench/prune_requests.py [--images 100,323] [--keep 5] [--pages all,50]

Starts a CNCF distribution registry on loopback (``tests/integration/support/registry.py``) behind the counting
proxy of the integration tests (:class:`FaultInjectingProxy`, which never faults here: it counts every request
and pages tag lists as the distribution spec says when the client asks for ``n`` tags a page, which
distribution 2.8 itself ignores).  For each number of images N and each page size it seeds a repository with N
small images, each under one immutable tag a day apart, ``latest`` on the newest and ``stable`` on the second
newest, then prunes it to the newest ``--keep`` (no minimum age) through the proxy:

- ``now``: :func:`imagectl.tags.prune.plan_for_store` + :func:`execute_prune`;
- ``before``: the same plan, then the execution as it was before issue 9 (re-listing every tag and reading
  every pointer before and after each delete), kept below for comparison.

Seeding goes straight to the registry and is not counted.  It prints, per run, the requests of the plan and of
the execution (by method), the total and the requests per deleted image, and checks that exactly the newest
``--keep`` immutable tags, ``latest`` and ``stable`` are left.  Nothing else is asserted.  Needs
docker-registry; a few seconds and a few MB of temporary disk.
"""

from __future__ import annotations

import argparse
import json
import shutil
import sys
import tempfile
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta, timezone
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO_ROOT))
# The imports below resolve only after the sys.path tweak above (this file runs as a script).

from imagectl.reference import parse_reference  # noqa: E402
from imagectl.registry import Manifest, RegistryClient  # noqa: E402
from imagectl.tags.naming import is_immutable  # noqa: E402
from imagectl.tags.prune import Deletion, PruneReport, execute_prune, plan_for_store  # noqa: E402
from imagectl.tags.store import RegistryTagStore, TagStore  # noqa: E402
from tests.integration.support.registry import (  # noqa: E402
    FaultInjectingProxy,
    make_sample_image,
    start_registry,
)

OCI_MANIFEST = "application/vnd.oci.image.manifest.v1+json"
FIRST_DAY = datetime(2023, 1, 1, 12, 0, 0, tzinfo=timezone.utc)
METHODS = ("GET", "HEAD", "DELETE", "PUT")


class PagedClient(RegistryClient):
    """A client that asks for ``page`` tags a page (None: the registry's own, one page here)."""

    page: int | None = None

    def list_tags(self, repository: str, page_size: int | None = None) -> list[str]:
        return super().list_tags(repository, page_size or self.page)


# --------------------------------------------------------------------------------------------- the old execution


def execute_before(store: TagStore, plan: Sequence[Deletion]) -> PruneReport:
    """``execute_prune`` as it was before issue 9: before each image's delete, one listing and a read of every
    tag not in the plan; after it, another listing and a read of every pointer."""
    report = PruneReport()
    groups: dict[str, list[str]] = {}
    for d in plan:
        if d.delete:
            groups.setdefault(d.digest, []).append(d.tag)
    planned = {d.tag for d in plan}
    for digest, tags in groups.items():
        before, holders = _holders_before(store, digest, planned)
        if holders:
            report.skipped += [(t, "held") for t in tags]
            continue
        for tag in tags:
            store.delete(tag)
            report.deleted.append(tag)
        for pointer in sorted(set(before) - set(_pointers_before(store))):
            store.point(pointer, digest)
            report.restored.append(pointer)
    return report


def _holders_before(store: TagStore, digest: str, planned: set[str]) -> tuple[dict[str, str], list[str]]:
    pointers, holders = {}, []
    for tag in store.tags():
        if is_immutable(tag) and tag in planned:
            continue
        found = store.digest(tag)
        if found is None:
            continue
        if not is_immutable(tag):
            pointers[tag] = found
        if found == digest:
            holders.append(tag)
    return pointers, holders


def _pointers_before(store: TagStore) -> dict[str, str]:
    """The old execution's pointer read (a listing and a HEAD per pointer), kept here as it was."""
    found = {}
    for tag in store.tags():
        if not is_immutable(tag):
            digest = store.digest(tag)
            if digest is not None:
                found[tag] = digest
    return found


# --------------------------------------------------------------------------------------------- seeding and runs


def immutable(n: int) -> str:
    """The immutable tag of image ``n``, built ``n`` days after FIRST_DAY."""
    return f"2.3.1-cu121-py3.11-{(FIRST_DAY + timedelta(days=n)).strftime('%Y%m%dT%H%M%S')}-{n:010d}"


def seed(client: RegistryClient, repo: str, images: int) -> None:
    """``images`` distinct small images (one manifest each, sharing their blobs), ``latest`` and ``stable``."""
    sample = make_sample_image()
    for blob in sample.blobs:
        client.upload_blob(repo, blob)
    body = json.loads(sample.manifest)
    for n in range(images):
        body["annotations"] = {"bench.image": str(n)}
        raw = json.dumps(body).encode()
        manifest = Manifest.from_bytes(raw, OCI_MANIFEST)
        client.put_manifest(repo, immutable(n), manifest)
        for pointer, at in (("latest", images - 1), ("stable", images - 2)):
            if n == at:
                client.put_manifest(repo, pointer, manifest)


@dataclass
class Run:
    images: int
    page: int | None
    algorithm: str
    deleted: int
    plan: dict[str, int]
    execute: dict[str, int]
    seconds: float

    @property
    def total(self) -> int:
        return sum(self.plan.values()) + sum(self.execute.values())


def counts(proxy: FaultInjectingProxy) -> dict[str, int]:
    return {method: proxy.hits("/", method) for method in METHODS}


def since(proxy: FaultInjectingProxy, before: dict[str, int]) -> dict[str, int]:
    now = counts(proxy)
    return {method: now[method] - before[method] for method in METHODS}


def prune_once(server_host: str, proxy: FaultInjectingProxy, images: int, page: int | None, keep: int,
               algorithm: str, execute: Callable[[TagStore, Sequence[Deletion]], PruneReport]) -> Run:
    repo = f"bench/prune-{images}-{page or 'all'}-{algorithm}"
    seed(RegistryClient(server_host, insecure=True), repo, images)
    client = PagedClient(proxy.host, insecure=True)
    client.page = page
    store = RegistryTagStore(client, parse_reference(f"{proxy.host}/{repo}"))
    started = time.perf_counter()
    mark = counts(proxy)
    plan = plan_for_store(store, keep, timedelta(0), datetime.now(timezone.utc))
    planned = since(proxy, mark)
    mark = counts(proxy)
    report = execute(store, plan)
    executed = since(proxy, mark)
    seconds = time.perf_counter() - started
    left = sorted(RegistryClient(server_host, insecure=True).list_tags(repo))
    expected = sorted([immutable(n) for n in range(images - keep, images)] + ["latest", "stable"])
    if left != expected or report.failed:
        raise SystemExit(f"{repo}: unexpected result: left {left[:8]}..., failed {report.failed[:3]}")
    return Run(images, page, algorithm, len(report.deleted), planned, executed, seconds)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--images", default="100,323", help="comma-separated numbers of images")
    parser.add_argument("--keep", type=int, default=5)
    parser.add_argument("--pages", default="all,50", help="comma-separated tags per listing page ('all': one page)")
    args = parser.parse_args()
    if shutil.which("docker-registry") is None:
        raise SystemExit("docker-registry is not installed")
    sizes = [int(x) for x in args.images.split(",")]
    pages = [None if x == "all" else int(x) for x in args.pages.split(",")]
    root = Path(tempfile.mkdtemp(prefix="imagectl-bench-"))
    server = start_registry(root / "registry")
    proxy = FaultInjectingProxy(server.url)
    runs = []
    try:
        for images in sizes:
            for page in pages:
                for name, execute in (("before", execute_before), ("now", execute_prune)):
                    print(f"  {images} images, pages of {page or 'all'}, {name}", file=sys.stderr, flush=True)
                    runs.append(prune_once(server.host, proxy, images, page, args.keep, name, execute))
    finally:
        proxy.stop()
        server.stop()
        shutil.rmtree(root, ignore_errors=True)
    report(runs, args.keep)
    return 0


def report(runs: list[Run], keep: int) -> None:
    print(f"prune to the newest {keep} immutable tags (latest and stable on two of them), registry on loopback,"
          " every request counted by a proxy")
    print(f"{'images':>6} {'page':>4} {'execution':9} {'deleted':>7} {'plan':>5} {'execute':>7}"
          f" {'GET':>5} {'HEAD':>5} {'DELETE':>6} {'PUT':>4} {'total':>6} {'per image':>9} {'seconds':>7}")
    for r in runs:
        print(f"{r.images:>6} {r.page or 'all':>4} {r.algorithm:9} {r.deleted:>7} {sum(r.plan.values()):>5}"
              f" {sum(r.execute.values()):>7} {r.execute['GET']:>5} {r.execute['HEAD']:>5} {r.execute['DELETE']:>6}"
              f" {r.execute['PUT']:>4} {r.total:>6} {r.total / r.deleted:>9.1f} {r.seconds:>7.2f}")
    print("(GET/HEAD/DELETE/PUT: the execution's requests; plan: a listing and a HEAD per tag, the same for both)")
    by = {(r.images, r.page, r.algorithm): r for r in runs}
    for (images, page, algorithm), r in by.items():
        if algorithm == "now" and (images, page, "before") in by:
            old = by[(images, page, "before")]
            print(f"{images} images, pages of {page or 'all'}: {r.total} requests against {old.total} before"
                  f" ({old.total / r.total:.1f}x fewer); execution {sum(r.execute.values()) / r.deleted:.2f}"
                  f" per deleted image against {sum(old.execute.values()) / old.deleted:.2f}")


if __name__ == "__main__":
    sys.exit(main())
