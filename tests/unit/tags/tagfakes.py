"""An in-memory tag store with a registry's semantics, for hermetic tests of history, moves and prune.

Like CNCF distribution 2.x it cannot delete a tag alone: deleting a tag deletes its manifest and every tag
pointing to it.  Like :class:`imagectl.tags.store.RegistryTagStore` it keeps the manifests it read or deleted,
so ``point`` can put one back.  ``hooks[name]`` runs before operation ``name`` (to stage races).
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import datetime, timezone

from imagectl.errors import NotFoundError
from imagectl.reference import parse_reference
from imagectl.tags.naming import tags_with_key
from imagectl.tags.store import ChildManifest, Move, PlatformImage, last_real_move, with_from_tags


class FakeStore:
    def __init__(self, repository: str = "registry.example.com/ml/torch-2.3-cu121") -> None:
        self.repository = parse_reference(repository)
        self.tag_map: dict[str, str] = {}
        self.manifests: set[str] = set()
        self.kept: set[str] = set()
        self.log: list[Move] = []
        self.label_map: dict[str, dict[str, str]] = {}
        self.calls: list[tuple[str, ...]] = []
        self.hooks: dict[str, Callable[..., None]] = {}
        self.problems: list[str] = []  # what reading the log skipped, as the real stores report it
        self.written: set[int] = set()  # the log entries this store recorded itself
        self.contents: dict[str, tuple[ChildManifest, ...]] = {}  # index digest -> its children
        self.marks: list[str] = []  # the digests prune has marked for deletion right now
        self.image_ids: dict[str, str] = {}  # manifest digest -> its config digest, where not the digest itself

    def add_index(self, tag: str | None, digest: str, children: dict[str, str]) -> None:
        """An index ``digest`` (under ``tag``, if given) naming ``children`` (digest -> platform), each an untagged
        manifest of the repository."""
        self.manifests.update(children)
        self.contents[digest] = tuple(ChildManifest(d, p) for d, p in children.items())
        if tag is None:
            self.manifests.add(digest)
        else:
            self.add(tag, digest)

    # -- setup helpers
    def add(self, tag: str, digest: str) -> None:
        self.manifests.add(digest)
        self.tag_map[tag] = digest

    def remove_manifest(self, digest: str) -> None:
        """A manifest delete as distribution does it: every tag pointing to it goes too."""
        self.manifests.discard(digest)
        for tag in [t for t, d in self.tag_map.items() if d == digest]:
            del self.tag_map[tag]

    def _hook(self, name: str, *args: str) -> None:
        self.calls.append((name, *args))
        hook = self.hooks.pop(name, None)
        if hook is not None:
            hook(*args)

    # -- the TagStore protocol
    def tags(self) -> list[str]:
        self._hook("tags")
        return sorted(self.tag_map)

    def tag_with_key(self, key: str) -> str | None:
        self._hook("tag_with_key", key)
        return next(iter(tags_with_key(self.tag_map, key)), None)

    def digest(self, tag: str) -> str | None:
        self._hook("digest", tag)
        if tag.startswith("sha256:"):  # as the registry store: a HEAD by digest
            return tag if tag in self.manifests else None
        return self.tag_map.get(tag)

    def point(self, tag: str, target: str) -> None:
        self._hook("point", tag, target)
        if target not in self.manifests:
            if target not in self.kept:
                raise NotFoundError(f"no manifest {target}")
            self.manifests.add(target)
        self.kept.add(target)
        self.tag_map[tag] = target

    def delete(self, tag: str) -> None:
        self._hook("delete", tag)
        digest = self.tag_map.get(tag)
        if digest is not None:
            self.kept.add(digest)
            self.remove_manifest(digest)

    def labels(self, target: str) -> dict[str, str]:
        if target not in self.manifests:
            raise NotFoundError(target)
        return self.label_map.get(target, {})

    def created(self, target: str) -> str:
        if target not in self.manifests:
            raise NotFoundError(target)
        return "2024-05-01T12:00:00+00:00"

    def children(self, target: str) -> tuple[ChildManifest, ...]:
        self._hook("children", target)
        if target not in self.manifests:
            raise NotFoundError(target)
        return self.contents.get(target, ())

    def platforms(self, target: str) -> tuple[PlatformImage, ...]:
        if target not in self.manifests:
            raise NotFoundError(target)
        if target not in self.contents:
            return (PlatformImage("linux/amd64", target, self.created(target), self.labels(target)),)
        return tuple(PlatformImage(c.platform, c.digest, self.created(c.digest), self.label_map.get(c.digest, {}))
                     for c in self.contents[target] if not c.attachment)

    def delete_untagged(self, digest: str) -> None:
        self._hook("delete_untagged", digest)
        self.kept.add(digest)
        self.remove_manifest(digest)

    def moves(self, newest: int | None = None) -> list[Move]:
        self._hook("moves")
        return list(self.log[-newest:] if newest else self.log)

    def last_move(self, tag: str) -> Move | None:
        """As the real stores: the newest logged move that took ``tag`` elsewhere, ``from_tag`` filled in."""
        self._hook("last_move", tag)
        return last_real_move(with_from_tags(self.log), tag)

    def log_position(self, tag: str) -> frozenset[str]:
        self._hook("log_position", tag)
        return frozenset(str(i) for i, m in enumerate(self.log) if m.tag == tag)

    def moves_since(self, tag: str, position: frozenset[str]) -> list[Move]:
        """As the real stores: moves of ``tag`` logged after ``position`` by others (not by this store)."""
        self._hook("moves_since", tag)
        return [m for i, m in enumerate(self.log)
                if m.tag == tag and str(i) not in position and i not in self.written]

    def record(self, move: Move) -> None:
        self._hook("record", move.tag)
        self.written.add(len(self.log))
        self.log.append(move)

    def image_id(self, target: str) -> str | None:
        """The config digest ``image_ids`` gives ``target``, else ``target`` itself (as a local engine's)."""
        self._hook("image_id", target)
        if target not in self.manifests:
            raise NotFoundError(target)
        return self.image_ids.get(target, target)

    def begin_delete(self, digest: str) -> str | None:
        """A deletion mark of ``digest`` (see imagectl.tags.store), held in ``marks``."""
        self._hook("begin_delete", digest)
        self.marks.append(digest)
        return f"mark-{len(self.marks)}-{digest}"

    def end_delete(self, mark: str | None) -> None:
        self._hook("end_delete", mark or "")
        if mark is not None:
            self.marks.remove(mark.split("-", 2)[2])

    def deleting(self, digest: str) -> bool:
        self._hook("deleting", digest)
        return digest in self.marks

    def stale_marks(self) -> list[str]:
        return []  # the marks' ages are RegistryTagStore's (tests/integration/test_races.py)

    def remove_stale_mark(self, mark: str) -> bool:
        return False


def digest_of(n: int) -> str:
    return "sha256:" + f"{n:x}".rjust(64, "0")


def tag_on(day: int, n: int | None = None) -> str:
    """An immutable tag dated 2024-01-DAY."""
    return f"2.3.1-cu121-py3.10-202401{day:02d}T120000-{(n if n is not None else day):010d}"


def move(tag: str, to: str, previous: str | None, action: str = "build", to_tag: str | None = None) -> Move:
    return Move(tag=tag, to=to, previous=previous, action=action, when="2024-01-31T00:00:00+00:00", by="test@host",
                to_tag=to_tag)


NOW = datetime(2024, 2, 1, tzinfo=timezone.utc)
