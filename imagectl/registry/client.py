"""A client for the OCI distribution API (``/v2/``) of one registry, over ``requests``.

Every call goes through :meth:`RegistryClient._request`, which attaches an ``Authorization`` header once the
registry's challenge is known, answers a 401 once (basic or bearer token, see :mod:`.auth`), retries
transient failures (the policy shared with the package-index reader, :mod:`imagectl.retry`), follows
redirects of GET and HEAD itself (at most ``MAX_REDIRECTS``, never carrying the Authorization to another
host), and turns any other answer into a typed error (:mod:`.error_factory`).

Nothing a registry sends can hold the client without bound:

- every body is read with a cap that stops the read as soon as it is exceeded (:mod:`.body`): manifests
  ``MAX_MANIFEST_BYTES``, configs ``MAX_CONFIG_BYTES``, tag pages ``MAX_TAG_PAGE_BYTES``, token answers
  ``auth.MAX_TOKEN_BYTES``, error answers ``body.ERROR_BODY_BYTES`` (cut there, quoted in part), any other
  answer ``MAX_OTHER_BYTES``;
- every request has a deadline, ``Timeouts.request_s`` (the ``[registry] timeout``), covering its 401 and token
  request, all retries and waits, redirects and the body (:mod:`.deadline`); a blob upload gets that much more
  per MiB it sends, and a blob download must bring each MiB within that time (:class:`BlobReader`);
- a tag listing stops, with an error, at a next-page link that repeats a page or cursor, after
  ``MAX_TAG_PAGES`` pages or ``MAX_TAGS`` tags, and at an entry that is not a tag.

TLS is verified by default.  A client created with ``insecure=True`` first tries https without verifying
the certificate and, if the registry does not speak TLS at all, falls back to plain http, as dockerd does for
its insecure registries; the scheme it settles on is kept for the client's life.  ``insecure`` covers the
registry's own host only (any port): a token realm or a redirect on another host is verified like any other.
"""

from __future__ import annotations

import hashlib
import logging
import random
import time
import warnings
from dataclasses import dataclass, field, replace
from typing import IO, Any, Iterator, Mapping, Protocol, Union, cast
from urllib.parse import parse_qs, urljoin, urlsplit

import requests
import urllib3

from ..errors import InputError, NotFoundError, OperationError, RegistryError, ValidationError
from ..reference import check_tag
from ..retry import RetryPolicy, loggable_url, send_with_retries
from .auth import MAX_TOKEN_BYTES, Authenticator, CredentialsLookup, TokenCache, credentials_given, repository_scope
from .body import ERROR_BODY_BYTES, is_read, read_body, read_some
from .credentials import Credentials, load_credentials
from .deadline import PROGRESS_BYTES, Clock, Deadline, transfer_seconds
from .error_factory import error_from_response, oci_error_codes, oci_error_detail, unreachable_error
from .index_walk import walk_index
from .loopback import hostname
from .manifest import (
    Descriptor,
    MANIFEST_ACCEPT,
    MANIFEST_TYPES,
    OCI_INDEX,
    DigestMismatchError,
    ImageConfig,
    Manifest,
    parse_image_config,
    parse_manifest_json,
    pick_platform,
    sha256_digest,
    verified_digest,
)

log = logging.getLogger(__name__)

DOCKER_HUB_API = "registry-1.docker.io"
MAX_MANIFEST_BYTES = 4 * 1024 * 1024
MAX_CONFIG_BYTES = 8 * 1024 * 1024
MAX_TAG_PAGE_BYTES = 16 * 1024 * 1024
MAX_OTHER_BYTES = 64 * 1024
MAX_TAG_PAGES = 1000
MAX_TAGS = 100_000
MAX_REDIRECTS = 10
DEFAULT_TIMEOUT_S = 45.0  # a registry that never answers fails a command well within a minute
DEFAULT_RETRY = RetryPolicy()  # frozen: one value serves every client
PUT_TRIES = 4  # a manifest PUT refused while another writer links its blobs: sent at most this many times
_LINK_RACE_CODES = frozenset({"MANIFEST_BLOB_UNKNOWN", "BLOB_UNKNOWN", "MANIFEST_UNKNOWN", "DIGEST_INVALID"})
_REDIRECTS = (301, 302, 303, 307, 308)
_CHUNK = 1024 * 1024
_TLS_HINT = "if it serves plain http or a self-signed certificate, configure it as insecure"


class Readable(Protocol):
    """A binary file-like object to upload from: an open file, ``io.BytesIO``, a :class:`BlobReader`."""

    def read(self, size: int = -1, /) -> bytes: ...


Body = Union[bytes, Readable, None]


def api_host(host: str) -> str:
    """The host that serves the ``/v2/`` API for registry ``host`` (Docker Hub's is registry-1.docker.io)."""
    return DOCKER_HUB_API if host in ("docker.io", "index.docker.io") else host


class NoRedirectSession(requests.Session):
    """A session that leaves redirects to the client: requests would read a redirect's whole body (to prepare
    ``Response.next``) even when told not to follow it, so an endless redirect body would fill memory."""

    def get_redirect_target(self, resp: requests.Response) -> None:
        """No redirect is ever followed (or read) by the session itself."""
        return None


def _no_redirects(session: requests.Session | None) -> requests.Session:
    """``session`` (a new one if None) with requests' own redirect handling switched off."""
    if session is None:
        return NoRedirectSession()
    if not isinstance(session, NoRedirectSession):
        session.get_redirect_target = _never  # type: ignore[method-assign]
    return session


def _never(resp: requests.Response) -> None:
    return None


def _no_auth(request: requests.PreparedRequest) -> requests.PreparedRequest:
    """Keep requests from replacing our Authorization header with ~/.netrc credentials."""
    return request


def _ref(repository: str, reference: str) -> str:
    return f"{repository}@{reference}" if ":" in reference else f"{repository}:{reference}"


def _platform_entry(manifest: Manifest) -> list[Descriptor]:
    """The one entry of an index an image's config is read through (linux/amd64, else the first); none of an image."""
    return [pick_platform(manifest.children())] if manifest.is_index else []


class _Payload:
    """A request body that knows whether (and how) it can be sent again."""

    def __init__(self, data: Body) -> None:
        self.data = data
        self._start = cast(IO[bytes], data).tell() if _seekable(data) else None

    @property
    def resendable(self) -> bool:
        return self.data is None or isinstance(self.data, bytes) or self._start is not None

    def rewind(self) -> None:
        if self._start is not None:
            cast(IO[bytes], self.data).seek(self._start)


@dataclass(frozen=True)
class _Exchange:
    """One HTTP request as the request path passes it down: what is sent, and how much of a 2xx answer's body is
    read (none when ``stream``: the caller reads it)."""

    method: str
    url: str
    headers: Mapping[str, str] | None = None
    params: Any = None
    payload: _Payload = field(default_factory=lambda: _Payload(None))
    stream: bool = False
    max_bytes: int = MAX_OTHER_BYTES


def _seekable(data: Body) -> bool:
    """True for a file-like ``data`` that can go back to where it started."""
    seekable = getattr(data, "seekable", None)
    try:
        return bool(seekable and seekable()) and not isinstance(data, bytes)
    except (OSError, ValueError):
        return False


@dataclass(frozen=True)
class Timeouts:
    """Seconds to wait for a connection, for each socket read, and for a whole request (``request_s``).

    ``request_s`` is the ``[registry] timeout``: see :mod:`.deadline` for what it covers.  Raises InputError
    if a time is not a positive number.
    """

    connect_s: float = 10.0
    read_s: float = 120.0
    request_s: float = DEFAULT_TIMEOUT_S

    def __post_init__(self) -> None:
        for name in ("connect_s", "read_s", "request_s"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, (int, float)) or not value > 0:
                raise InputError(f"registry timeouts: {name} must be a number of seconds > 0, not {value!r}")


class BlobReader:
    """A blob being downloaded: a read-only, non-seekable file-like object over the HTTP response.

    Its ``len()`` is the blob's size, so ``requests`` can stream it straight into an upload with a
    Content-Length.  However large the blob, it must keep coming: each MiB must arrive within
    ``timeouts.request_s`` of the previous one (the first, of the answer), and no socket read may wait longer
    than ``timeouts.read_s``.  Its bytes are hashed as they are read: the read that reaches the end raises
    DigestMismatchError, naming this registry and repository as the source, instead of handing out the last bytes
    of a blob that does not have its digest (so a copy streamed on into another registry is never committed there,
    and the error blames the registry the bytes came from).  Close it (or use it as a context manager) to release
    the connection.
    """

    def __init__(  # noqa: PLR0913 - the answer, what it is (for messages), and the limits and clock it is read with
        self, response: requests.Response, digest: str, registry: str, what: str = "",
        timeouts: Timeouts = Timeouts(), clock: Clock = time.monotonic,
    ) -> None:
        self.digest = digest
        self.size = int(response.headers.get("Content-Length") or 0)
        self._response = response
        self._registry = registry
        self._what = what or f"GET blob {digest}"
        self._timeouts = timeouts
        self._clock = clock
        self._deadline = self._next_deadline()
        self._since_mark = 0
        algorithm = digest.partition(":")[0]
        self._hasher = hashlib.new(algorithm) if algorithm in ("sha256", "sha512") else None
        self._got = 0

    def read(self, size: int = -1) -> bytes:
        """Up to ``size`` bytes (all that is left if negative); b"" at the end.

        Raises RegistryError if the connection breaks off or the blob stops coming (see the class).
        """
        chunks: list[bytes] = []
        got = 0
        while size < 0 or got < size:
            chunk = self._read1(_CHUNK if size < 0 else min(_CHUNK, size - got))
            if not chunk:
                break
            chunks.append(chunk)
            got += len(chunk)
        return b"".join(chunks)

    def _read1(self, size: int) -> bytes:
        """At most ``size`` bytes from one socket read; b"" at the end."""
        try:
            chunk = read_some(self._response.raw, size, self._deadline, decode=False, stall_s=self._timeouts.read_s,
                              late="less than 1 MiB of the blob came in that time")
        except requests.exceptions.RequestException as exc:
            raise unreachable_error(self._registry, exc) from None
        self._since_mark += len(chunk)
        if self._since_mark >= PROGRESS_BYTES:
            self._since_mark %= PROGRESS_BYTES
            self._deadline = self._next_deadline()
        self._check(chunk)
        return chunk

    def _check(self, chunk: bytes) -> None:
        """Hash ``chunk``; at the end (nothing more, or the declared size reached: an upload streaming this reader
        stops at its Content-Length) raise DigestMismatchError unless the bytes had the blob's digest."""
        if self._hasher is None:
            return
        self._hasher.update(chunk)
        self._got += len(chunk)
        if chunk and not 0 < self.size <= self._got:
            return
        found = f"{self._hasher.name}:{self._hasher.hexdigest()}"
        self._hasher = None
        if found != self.digest:
            raise DigestMismatchError(
                f"registry {self._registry}: {self._what}: the {self._got} bytes it sent have digest {found}, not the "
                f"one asked for; the blob is corrupt at this source (or on the way from it); refusing it")

    def _next_deadline(self) -> Deadline:
        return Deadline.after(self._timeouts.request_s, self._registry, self._what, self._clock)

    def __iter__(self) -> Iterator[bytes]:
        return self.iter_chunks()

    def iter_chunks(self, chunk_size: int = _CHUNK) -> Iterator[bytes]:
        """The blob's bytes in chunks of at most ``chunk_size``."""
        while chunk := self.read(chunk_size):
            yield chunk

    def __len__(self) -> int:
        return self.size

    def close(self) -> None:
        """Release the connection."""
        self._response.close()

    def __enter__(self) -> "BlobReader":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


class RegistryClient:
    """The OCI distribution API of one registry ``host`` (as users write it: ``ghcr.io``, ``127.0.0.1:5000``).

    Repositories are paths without the host (``team/torch``); references are a tag or a digest.
    ``credentials`` are used as given; else ``lookup(host)`` is asked once, when the registry first
    challenges (pass :func:`.credentials.load_credentials`, or use :func:`connect`).  A ``session`` passed in
    has its own redirect handling switched off (see :class:`NoRedirectSession`): the client follows them.
    """

    def __init__(  # noqa: PLR0913 - keyword-only options with defaults: each caller sets the few it needs
        self,
        host: str,
        *,
        credentials: Credentials | None = None,
        lookup: CredentialsLookup | None = None,
        insecure: bool = False,
        retry: RetryPolicy = DEFAULT_RETRY,
        timeouts: Timeouts = Timeouts(),
        session: requests.Session | None = None,
        token_cache: TokenCache | None = None,
    ) -> None:
        self.host = host
        self.insecure = insecure
        self._api_host = api_host(host)
        self._retry = retry
        self._timeouts = timeouts
        self._session = _no_redirects(session)
        self._scheme: str | None = None if insecure else "https"
        given = credentials_given(credentials) if credentials is not None else lookup
        self._auth = Authenticator(host, self._get_token, given, insecure=insecure, cache=token_cache)

    def __repr__(self) -> str:
        return f"RegistryClient(host={self.host!r}, insecure={self.insecure})"

    def close(self) -> None:
        """Close the HTTP connections."""
        self._session.close()

    def __enter__(self) -> "RegistryClient":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # -- manifests ---------------------------------------------------------------------------------------

    def get_manifest(self, repository: str, reference: str) -> Manifest:
        """The manifest (OCI or Docker; image or index) at tag or digest ``reference``.

        Raises NotFoundError if there is none, AuthError if refused, RegistryError otherwise (also when
        the bytes do not match a digest ``reference``, or are over ``MAX_MANIFEST_BYTES``).
        """
        what = f"GET manifest {_ref(repository, reference)}"
        response = self._request(
            "GET", f"/v2/{repository}/manifests/{reference}", _pull(repository), what,
            headers={"Accept": MANIFEST_ACCEPT}, max_bytes=MAX_MANIFEST_BYTES,
        )
        raw = response.content
        digest = verified_digest(raw, response.headers.get("Docker-Content-Digest"), self.host, what)
        if reference.startswith("sha256:") and digest != reference:
            raise DigestMismatchError(f"registry {self.host}: {what}: answered bytes with digest {digest}")
        return Manifest(_media_type(response, raw), digest, raw)

    def head_manifest(self, repository: str, reference: str) -> str | None:
        """The digest of the manifest at ``reference``, or None if there is none (404).

        For a digest, one HEAD: whether the registry has it.  For a tag, the manifest itself (one GET) and the
        digest of its bytes: what a tag points to is never taken from a ``Docker-Content-Digest`` header, which
        a registry or a proxy could misreport.  Raises AuthError if refused, DigestMismatchError when the header
        and the bytes disagree, RegistryError for any other failure.
        """
        if not reference.startswith("sha256:"):
            try:
                return self.get_manifest(repository, reference).digest
            except NotFoundError:
                return None
        what = f"HEAD manifest {_ref(repository, reference)}"
        response = self._request(
            "HEAD", f"/v2/{repository}/manifests/{reference}", _pull(repository), what,
            headers={"Accept": MANIFEST_ACCEPT}, ok=(200, 404),
        )
        return None if response.status_code == 404 else reference

    def put_manifest(self, repository: str, reference: str, manifest: Manifest) -> str:
        """Store ``manifest``'s raw bytes under tag or digest ``reference``, as its own media type.

        A refusal naming a blob or child manifest the registry does not know (400 ``MANIFEST_BLOB_UNKNOWN``,
        ``BLOB_UNKNOWN``, ``MANIFEST_UNKNOWN``, ``DIGEST_INVALID``) while each of them answers a HEAD right after
        is a write racing this one, not a missing blob: CNCF distribution's filesystem storage (before v3)
        rewrites a repository's link file in place, so a manifest PUT that reads it while another push of the
        same blob (an identical build, a sync, a copy) links it finds it empty.  The PUT is sent again after a
        short random wait, at most ``PUT_TRIES`` times in all; a blob or child manifest that answers no HEAD
        after two refusals a wait apart is missing.

        Returns the digest of the bytes stored.  Raises AuthError if refused, NotFoundError naming the blob or
        child manifest that is missing, DigestMismatchError if the registry answers another digest than the bytes
        have, RegistryError otherwise (the last refusal when every try was one).
        """
        what = f"PUT manifest {_ref(repository, reference)}"
        missing_before = ""
        for attempt in range(PUT_TRIES):
            response = self._request(
                "PUT", f"/v2/{repository}/manifests/{reference}", _push(repository), what,
                headers={"Content-Type": manifest.media_type}, data=manifest.raw, ok=(200, 201, 400),
            )
            if response.status_code != 400:
                return verified_digest(manifest.raw, response.headers.get("Docker-Content-Digest"), self.host, what)
            refused = error_from_response(response, self.host, what, self._hint(response))
            if not oci_error_codes(response) & _LINK_RACE_CODES or attempt + 1 == PUT_TRIES:
                raise refused
            missing = self._first_missing(repository, manifest)
            if missing and missing == missing_before:  # missing at two looks a wait apart: gone, not being linked
                raise NotFoundError(f"registry {self.host}: {what}: {missing} is not in {repository} "
                                    f"({response.status_code} {oci_error_detail(response)})")
            missing_before = missing
            self._retry.sleep(random.uniform(0.1, 0.3) * 2 ** attempt)
        raise AssertionError("unreachable")  # the last try returns or raises

    def _first_missing(self, repository: str, manifest: Manifest) -> str:
        """The first blob or child manifest of ``manifest`` that ``repository`` lacks now ("" if none), as
        ``blob sha256:...`` or ``manifest sha256:...``."""
        for blob in manifest.blobs():
            if not self.blob_exists(repository, blob.digest):
                return f"blob {blob.digest}"
        for child in manifest.children():
            if self.head_manifest(repository, child.digest) is None:
                return f"manifest {child.digest}"
        return ""

    def delete_manifest(self, repository: str, digest: str) -> None:
        """Delete the manifest ``digest`` (and so every tag pointing to it).

        Raises NotFoundError if there is none, AuthError if refused, RegistryError if the registry does not
        allow deletes (405 UNSUPPORTED).
        """
        self._request(
            "DELETE", f"/v2/{repository}/manifests/{digest}", _delete(repository),
            f"DELETE manifest {_ref(repository, digest)}", ok=(200, 202),
        )

    def delete_tag(self, repository: str, tag: str) -> bool:
        """Delete only ``tag``; True if done, False if the registry does not support deleting tags.

        Raises NotFoundError if there is no such tag, AuthError if refused, RegistryError otherwise.
        """
        what = f"DELETE tag {_ref(repository, tag)}"
        response = self._request(
            "DELETE", f"/v2/{repository}/manifests/{tag}", _delete(repository), what, ok=(200, 202, 400, 405)
        )
        if response.status_code in (200, 202):
            return True
        # distribution 2.x answers 400 DIGEST_INVALID to a tag here; others say 405 or UNSUPPORTED
        if response.status_code == 405 or oci_error_codes(response) & {"UNSUPPORTED", "DIGEST_INVALID"}:
            return False
        raise error_from_response(response, self.host, what)

    def list_tags(self, repository: str, page_size: int | None = None) -> list[str]:
        """Every tag of ``repository``, following ``Link: <...>; rel="next"`` pages of ``page_size`` tags.

        Raises NotFoundError if the repository does not exist, AuthError if refused, RegistryError otherwise:
        also when a next-page link repeats a page or cursor, after ``MAX_TAG_PAGES`` pages or ``MAX_TAGS``
        tags, and when an entry is not a tag.
        """
        what = f"GET tags of {repository}"
        tags: list[str] = []
        url = f"/v2/{repository}/tags/list"
        params = {"n": str(page_size)} if page_size else None
        seen: set[str] = set()
        for _ in range(MAX_TAG_PAGES):
            response = self._request("GET", url, _pull(repository), what, params=params, max_bytes=MAX_TAG_PAGE_BYTES)
            tags += _page_tags(response, self.host, what)
            if len(tags) > MAX_TAGS:
                raise RegistryError(f"registry {self.host}: {what}: more than {MAX_TAGS} tags; stopped listing")
            following = _next_page(response, seen, self.host, what)
            if following is None:
                return tags
            url, params = following, None
        raise RegistryError(f"registry {self.host}: {what}: more than {MAX_TAG_PAGES} pages; stopped listing")

    def get_referrers(self, repository: str, digest: str) -> Manifest | None:
        """The OCI 1.1 referrers index of manifest ``digest`` (``GET /v2/<name>/referrers/<digest>``), or None when
        the registry has no referrers API (it answers 404, as distribution 2.8 does; a registry with the API
        answers an index, empty when nothing refers to ``digest``).

        Raises AuthError if refused, RegistryError for another failure or an answer that is not an OCI index.
        """
        what = f"GET referrers of {_ref(repository, digest)}"
        response = self._request(
            "GET", f"/v2/{repository}/referrers/{digest}", _pull(repository), what,
            headers={"Accept": OCI_INDEX}, ok=(200, 404), max_bytes=MAX_MANIFEST_BYTES,
        )
        if response.status_code == 404:
            return None
        index = Manifest.from_bytes(response.content, OCI_INDEX)
        if not isinstance(index.json().get("manifests", []), list):
            raise RegistryError(f"registry {self.host}: {what}: answered something that is not an OCI index")
        return index

    # -- blobs -------------------------------------------------------------------------------------------

    def blob_exists(self, repository: str, digest: str) -> bool:
        """True if ``repository`` holds blob ``digest``; raises AuthError if refused, RegistryError otherwise."""
        return self.blob_size(repository, digest) is not None

    def blob_size(self, repository: str, digest: str) -> int | None:
        """The size ``repository``'s blob ``digest`` has by the registry's ``HEAD`` (its Content-Length), None when it
        holds no such blob; raises AuthError if refused, RegistryError otherwise."""
        response = self._request(
            "HEAD", f"/v2/{repository}/blobs/{digest}", _pull(repository),
            f"HEAD blob {_ref(repository, digest)}", ok=(200, 404),
        )
        if response.status_code != 200:
            return None
        length = response.headers.get("Content-Length", "")
        return int(length) if length.isdigit() else -1

    def open_blob(self, repository: str, digest: str) -> BlobReader:
        """A streaming reader of blob ``digest``; close it when done.

        Raises NotFoundError if there is no such blob, AuthError if refused, RegistryError otherwise.
        """
        what = f"GET blob {_ref(repository, digest)}"
        response = self._request("GET", f"/v2/{repository}/blobs/{digest}", _pull(repository), what, stream=True)
        return BlobReader(response, digest, self.host, what, self._timeouts)

    def read_blob(self, repository: str, digest: str, max_bytes: int = MAX_CONFIG_BYTES) -> bytes:
        """The whole (small) blob ``digest``, checked against its digest, read within one request's deadline.

        Raises NotFoundError, AuthError, or RegistryError if it is larger than ``max_bytes`` or corrupt.
        """
        data = self._request(
            "GET", f"/v2/{repository}/blobs/{digest}", _pull(repository), f"GET blob {_ref(repository, digest)}",
            max_bytes=max_bytes,
        ).content
        if digest.startswith("sha256:") and sha256_digest(data) != digest:
            raise DigestMismatchError(
                f"registry {self.host}: blob {_ref(repository, digest)} does not match its digest")
        return data

    def upload_blob(self, repository: str, data: bytes | Readable, digest: str | None = None) -> str:
        """Upload a blob monolithically (POST, then one PUT), streaming a file-like ``data``; returns its digest.

        ``digest`` may be left out for bytes or a seekable file (it is computed).  The PUT gets the request
        timeout plus as much again per MiB (:func:`.deadline.transfer_seconds`; no overall limit for a stream
        of unknown size).  Raises ValidationError if the digest is missing for a stream, AuthError if refused,
        RegistryError otherwise (400 DIGEST_INVALID when the bytes do not match it).
        """
        digest = digest or _digest_of(data)
        what = f"upload blob {_ref(repository, digest)}"
        started = self._request("POST", f"/v2/{repository}/blobs/uploads/", _push(repository), what, ok=(202,))
        self.finish_upload(repository, self._location(started, what), data, digest)
        return digest

    def start_upload(self, repository: str, digest: str, from_repository: str | None = None) -> str | None:
        """Open an upload of blob ``digest`` into ``repository``, asking first to mount it from ``from_repository``.

        None when the registry mounted it (201: nothing to send); else the URL of the upload session it opened
        (202), which the caller must either :meth:`finish_upload` or :meth:`cancel_upload`.  Raises AuthError if
        refused, RegistryError otherwise.
        """
        what = f"upload blob {_ref(repository, digest)}"
        scopes = _push(repository)
        params = None
        if from_repository:
            what = f"mount blob {digest} from {from_repository} into {repository}"
            scopes += (repository_scope(from_repository, "pull"),)
            params = {"mount": digest, "from": from_repository}
        response = self._request("POST", f"/v2/{repository}/blobs/uploads/", scopes, what, params=params,
                                 ok=(201, 202) if from_repository else (202,))
        return None if response.status_code == 201 else self._location(response, what)

    def finish_upload(self, repository: str, location: str, data: bytes | Readable, digest: str) -> None:
        """Send all of blob ``digest`` (bytes, or streamed from a file-like ``data``) into the upload session at
        ``location`` (from :meth:`start_upload`) with one PUT, which the registry checks against ``digest``.

        The PUT gets the request timeout plus as much again per MiB (:func:`.deadline.transfer_seconds`).  Raises
        AuthError if refused, RegistryError otherwise (400 DIGEST_INVALID when the bytes do not match).
        """
        self._request(
            "PUT", location, _push(repository), f"upload blob {_ref(repository, digest)}", params={"digest": digest},
            headers={"Content-Type": "application/octet-stream"}, data=data, ok=(201,),
            seconds=transfer_seconds(self._timeouts.request_s, _body_size(data)),
        )

    def cancel_upload(self, repository: str, location: str) -> None:
        """Cancel the upload session at ``location``; a failure is only logged (the registry expires it)."""
        what = f"cancel upload into {repository}"
        try:
            self._request("DELETE", location, _push(repository), what, ok=(200, 204, 404))
        except RegistryError as exc:
            log.info("could not cancel an upload into %s: %s", repository, exc)

    def list_repositories(self, after: str = "", page_size: int = 1000, max_pages: int = 10) -> Iterator[str]:
        """The repositories of the registry's catalog (``/v2/_catalog``) in its (lexical) order, starting after
        ``after``, ``page_size`` a page, at most ``max_pages`` pages; the caller stops reading when it has enough.

        Raises AuthError if refused (token registries grant ``registry:catalog:*`` to few), NotFoundError or
        RegistryError (UNSUPPORTED) where there is no catalog, RegistryError when a next-page link loops.
        """
        what = "GET catalog"
        url, seen = "/v2/_catalog", set[str]()
        params: dict[str, str] | None = {"n": str(page_size), **({"last": after} if after else {})}
        for _ in range(max_pages):
            response = self._request("GET", url, ("registry:catalog:*",), what, params=params,
                                     max_bytes=MAX_TAG_PAGE_BYTES)
            names = _json_object(response, self.host, what).get("repositories") or []
            if not isinstance(names, list) or not all(isinstance(name, str) for name in names):
                raise RegistryError(f"registry {self.host}: {what}: answered a list whose entries are not names")
            yield from names
            following = _next_page(response, seen, self.host, what)
            if following is None or not names:
                return
            url, params = following, None

    def mount_blob(self, repository: str, digest: str, from_repository: str) -> bool:
        """Mount blob ``digest`` from ``from_repository`` of this registry; True if mounted (201).

        False if the registry answered 202 (it did not mount; the upload it opened instead is cancelled).
        Raises AuthError if refused, RegistryError otherwise.
        """
        what = f"mount blob {digest} from {from_repository} into {repository}"
        scopes = _push(repository) + (repository_scope(from_repository, "pull"),)
        response = self._request(
            "POST", f"/v2/{repository}/blobs/uploads/", scopes, what,
            params={"mount": digest, "from": from_repository}, ok=(201, 202),
        )
        if response.status_code == 202:
            self._cancel_upload(response, repository, what)
            return False
        return True

    def get_image_config(self, repository: str, manifest: Manifest) -> ImageConfig:
        """The config (labels, created, platform) of the image ``manifest`` describes.

        For an index, the linux/amd64 entry is read (else the first), and so on down an index of indexes.  Raises
        NotFoundError, AuthError, IndexDepthError for indexes nested too deep (:mod:`.index_walk`), or
        RegistryError if the manifest has no config or it is not JSON.
        """
        if manifest.is_index:
            where = f"registry {self.host}: {_ref(repository, manifest.digest)}"
            path = walk_index(manifest, lambda child: self.get_manifest(repository, child.digest), where,
                              follow=_platform_entry)
            manifest = next(path)  # the deepest first: the image at the end of the path
        config = manifest.config()
        if config is None:
            raise RegistryError(f"registry {self.host}: manifest {_ref(repository, manifest.digest)} has no config")
        return parse_image_config(self.read_blob(repository, config.digest), config.digest)

    # -- the one request path ----------------------------------------------------------------------------

    def _request(  # noqa: PLR0913 - keyword-only request options with defaults: each call names the few it needs
        self,
        method: str,
        path: str,
        scopes: tuple[str, ...],
        what: str,
        *,
        ok: tuple[int, ...] = (200,),
        headers: Mapping[str, str] | None = None,
        params: Any = None,
        data: Body = None,
        stream: bool = False,
        max_bytes: int = MAX_OTHER_BYTES,
        seconds: float | None = None,
    ) -> requests.Response:
        """Send one API request with auth, retries and redirects; the answer if its status is in ``ok``.

        All of it must be done within ``seconds`` (by default ``Timeouts.request_s``).  The body of a 2xx
        answer is read, at most ``max_bytes`` of it, unless ``stream``.  Raises AuthError, NotFoundError or
        RegistryError (from :func:`error_from_response`) for another status, and RegistryError if the registry
        cannot be reached, the deadline passes or the body is too large.
        """
        deadline = Deadline.after(seconds or self._timeouts.request_s, self.host, what)
        url = path if "://" in path else self._base_url(deadline) + path
        exchange = _Exchange(method, url, headers, params, _Payload(data), stream, max_bytes)
        response = self._authorized_send(exchange, scopes, deadline)
        if response.status_code not in ok:
            error = error_from_response(response, self.host, what, self._hint(response))
            response.close()
            raise error
        return response

    def _authorized_send(self, exchange: _Exchange, scopes: tuple[str, ...], deadline: Deadline) -> requests.Response:
        """Send with the known Authorization (only to this registry's host); answer a 401 challenge once."""
        own = urlsplit(exchange.url).netloc == self._api_host
        sent = self._auth.header_for(scopes, deadline) if own else None
        response = self._send(replace(exchange, headers=_with_auth(exchange.headers, sent)), deadline)
        if response.status_code != 401 or not own or not exchange.payload.resendable:
            return response
        retry_with = self._auth.answer(response, scopes, deadline)
        if not retry_with or retry_with == sent:
            return response
        response.close()
        return self._send(replace(exchange, headers=_with_auth(exchange.headers, retry_with)), deadline)

    def _get_token(self, url: str, deadline: Deadline, *, params: object = None,
                   headers: Mapping[str, str] | None = None) -> requests.Response:
        """The token server's answer (see :class:`.auth.TokenGet`): a GET of ``url``, its body read (at most
        ``MAX_TOKEN_BYTES``) before ``deadline``.  Raises RegistryError as :meth:`_send` does."""
        return self._send(_Exchange("GET", url, headers, params, max_bytes=MAX_TOKEN_BYTES), deadline)

    def _send(self, exchange: _Exchange, deadline: Deadline) -> requests.Response:
        """One HTTP exchange and the redirects of a GET or HEAD, each tried again after transient failures.

        The body is read as :meth:`_settle` says.  Raises RegistryError "registry HOST unreachable" when no try
        got an answer, and RegistryError when ``deadline`` passes, the body is over ``max_bytes`` or there are
        more than ``MAX_REDIRECTS`` redirects.
        """
        for _ in range(MAX_REDIRECTS + 1):
            response = self._exchange(exchange, deadline)
            target = _redirect_target(response, exchange.method)
            if target is None:
                return response
            response.close()
            headers = _redirected_headers(exchange.headers, exchange.url, target)
            exchange = replace(exchange, url=target, headers=headers, params=None)
        raise RegistryError(f"registry {self.host}: {deadline.what}: more than {MAX_REDIRECTS} redirects")

    def _exchange(self, exchange: _Exchange, deadline: Deadline) -> requests.Response:
        """One request, tried again (per the :class:`~imagectl.retry.RetryPolicy`) while ``deadline`` allows.

        Raises RegistryError (unreachable, out of time, body too large).
        """
        last = ["no answer"]
        body = exchange.payload
        policy = self._retry if body.resendable else self._retry.once()
        policy = replace(policy, sleep=deadline.sleeper(policy.sleep, lambda: last[0]))

        def send_once() -> requests.Response:
            body.rewind()
            try:
                response = self._send_once(exchange, deadline)
                last[0] = f"last answer: {response.status_code} {response.reason or ''}".rstrip()
                if not policy.should_retry(response.status_code):
                    self._settle(response, exchange, deadline)
            except requests.exceptions.RequestException as exc:
                last[0] = f"last try: {type(exc).__name__}"
                raise
            return response

        try:
            response = send_with_retries(send_once, policy, f"{exchange.method} {loggable_url(exchange.url)}")
            self._settle(response, exchange, deadline)
        except requests.exceptions.RequestException as exc:
            raise self._failure(exchange.url, exc, deadline, last[0]) from None
        return response

    def _settle(self, response: requests.Response, exchange: _Exchange, deadline: Deadline) -> None:
        """Read the body of an answer that is not followed as a redirect: all of a 2xx answer (unless
        ``exchange.stream``), which must not be over ``exchange.max_bytes``, and up to ``ERROR_BODY_BYTES`` of
        any other.

        Raises RegistryError (too large, out of time), requests' ConnectionError when the connection breaks.
        """
        if is_read(response) or _redirect_target(response, exchange.method) is not None:
            return
        stall_s = self._timeouts.read_s
        if 200 <= response.status_code < 300:
            if not exchange.stream:
                read_body(response, exchange.max_bytes, deadline, stall_s=stall_s)
            return
        read_body(response, ERROR_BODY_BYTES, deadline, truncate=True, stall_s=stall_s)

    def _failure(self, url: str, exc: requests.exceptions.RequestException, deadline: Deadline,
                 last: str) -> OperationError:
        """The error for a request no try of which got a usable answer."""
        if deadline.remaining() <= 0:
            return deadline.error(last)
        if isinstance(exc, requests.exceptions.SSLError):
            hint = _TLS_HINT if self._is_own_host(url) else (
                f"its certificate must verify: [registry] insecure covers only {self.host}")
            return unreachable_error(self._name_of(url), exc, hint)
        return unreachable_error(self._name_of(url), exc)

    def _send_once(self, exchange: _Exchange, deadline: Deadline) -> requests.Response:
        """One try: the answer's status and headers (its body is left to read), each wait cut to the deadline."""
        left = deadline.left("no time left for another try")
        timeout = (min(self._timeouts.connect_s, left), min(self._timeouts.read_s, left))
        with warnings.catch_warnings():
            if self.insecure:
                warnings.simplefilter("ignore", urllib3.exceptions.InsecureRequestWarning)
            response = self._session.request(
                exchange.method, exchange.url, params=exchange.params, headers=dict(exchange.headers or {}),
                data=exchange.payload.data, stream=True, timeout=timeout, auth=_no_auth, allow_redirects=False,
                verify=not (self.insecure and self._is_own_host(exchange.url)),
            )
        log.debug("%s %s -> %s", exchange.method, loggable_url(exchange.url), response.status_code)
        return response

    def _base_url(self, deadline: Deadline) -> str:
        if self._scheme is None:
            self._scheme = self._probe_scheme(deadline)
        return f"{self._scheme}://{self._api_host}"

    def _probe_scheme(self, deadline: Deadline) -> str:
        """For an insecure registry: "https" if it speaks TLS (certificate unchecked), else "http".

        Raises RegistryError if ``deadline`` passes before it can tell.
        """
        try:
            self._send_once(_Exchange("GET", f"https://{self._api_host}/v2/"), deadline).close()
        except (requests.exceptions.SSLError, requests.exceptions.ConnectionError, requests.exceptions.Timeout) as exc:
            if deadline.remaining() <= 0:
                raise deadline.error(f"asking whether it speaks https: {type(exc).__name__}") from None
            log.info("registry %s does not answer https; using plain http (insecure)", self.host)
            return "http"
        return "https"

    def _hint(self, response: requests.Response) -> str:
        """What to tell a user refused for lack of credentials (none given, none in the Docker config)."""
        if response.status_code == 401 and self._auth.credentials() is None:
            return f"no credentials for {self.host} (docker login {self.host})"
        return ""

    def _is_own_host(self, url: str) -> bool:
        """True if ``url`` goes to this registry's host (any port), read as urllib3 reads it to connect."""
        try:
            host = urllib3.util.parse_url(url).host or ""
        except (urllib3.exceptions.HTTPError, ValueError):
            return False
        return host.lower().strip("[]") == hostname(self._api_host)

    def _name_of(self, url: str) -> str:
        netloc = urlsplit(url).netloc
        return self.host if netloc == self._api_host else netloc

    def _location(self, response: requests.Response, what: str) -> str:
        location = response.headers.get("Location")
        if not location:
            raise RegistryError(f"registry {self.host}: {what}: answered {response.status_code} without a Location")
        return urljoin(response.url, location)

    def _cancel_upload(self, response: requests.Response, repository: str, what: str) -> None:
        """Cancel the upload a 202 opened; a failure to cancel is only logged (the registry expires it)."""
        try:
            self._request("DELETE", self._location(response, what), _push(repository), what, ok=(200, 204, 404))
        except RegistryError as exc:
            log.info("could not cancel the upload opened by %s: %s", what, exc)


def connect(
    host: str, *, insecure: bool = False, retry: RetryPolicy = DEFAULT_RETRY, timeout: float | None = None
) -> RegistryClient:
    """A client for ``host`` that takes credentials from the Docker config when the registry asks for them.

    ``timeout`` is the deadline of each request in seconds (``DEFAULT_TIMEOUT_S`` when None).  Raises
    InputError if it is not a positive number.
    """
    timeouts = Timeouts(request_s=timeout) if timeout is not None else Timeouts()
    return RegistryClient(host, lookup=load_credentials, insecure=insecure, retry=retry, timeouts=timeouts)


def _pull(repository: str) -> tuple[str, ...]:
    return (repository_scope(repository, "pull"),)


def _push(repository: str) -> tuple[str, ...]:
    return (repository_scope(repository, "pull", "push"),)


def _delete(repository: str) -> tuple[str, ...]:
    return (repository_scope(repository, "delete"),)


def _with_auth(headers: Mapping[str, str] | None, authorization: str | None) -> dict[str, str]:
    merged = dict(headers or {})
    if authorization:
        merged["Authorization"] = authorization
    return merged


def _media_type(response: requests.Response, raw: bytes) -> str:
    answered = response.headers.get("Content-Type", "").split(";", 1)[0].strip()
    if answered in MANIFEST_TYPES:
        return answered
    return str(parse_manifest_json(raw).get("mediaType") or answered)


def _digest_of(data: bytes | Readable) -> str:
    """The digest of bytes or of a seekable file (read to the end, then put back where it was)."""
    if isinstance(data, bytes):
        return sha256_digest(data)
    if not _seekable(data):
        raise ValidationError("uploading a blob from a stream needs its digest")
    stream = cast(IO[bytes], data)
    start, hasher = stream.tell(), hashlib.sha256()
    while chunk := stream.read(_CHUNK):
        hasher.update(chunk)
    stream.seek(start)
    return "sha256:" + hasher.hexdigest()


def _json_object(response: requests.Response, host: str, what: str) -> dict[str, Any]:
    try:
        data = response.json()
    except ValueError:
        data = None
    if not isinstance(data, dict):
        raise RegistryError(f"registry {host}: {what}: answered something that is not a JSON object")
    return data


def _next_link(response: requests.Response) -> str | None:
    link = response.links.get("next", {}).get("url")
    return urljoin(response.url, link) if link else None


def _page_tags(response: requests.Response, host: str, what: str) -> list[str]:
    """The tags of one page of a tag listing; raises RegistryError if an entry is not a tag."""
    tags = _json_object(response, host, what).get("tags") or []
    if not isinstance(tags, list) or not all(_is_tag(tag) for tag in tags):
        raise RegistryError(f"registry {host}: {what}: answered a list whose entries are not all tags")
    return tags


def _is_tag(value: object) -> bool:
    if not isinstance(value, str):
        return False
    try:
        check_tag(value)
    except ValidationError:
        return False
    return True


def _next_page(response: requests.Response, seen: set[str], host: str, what: str) -> str | None:
    """The URL of the next page of a tag listing, or None after the last one.

    ``seen`` holds the pages (URLs and ``last`` cursors) read so far; this page is added.  Raises
    RegistryError when the next-page link leads back to a page or cursor already read.
    """
    seen.update(_page_keys(response.url))
    url = _next_link(response)
    if url is not None and seen & set(_page_keys(url)):
        raise RegistryError(
            f"registry {host}: {what}: the next-page link leads back to a page already read "
            f"({loggable_url(url)}); the registry's pagination loops"
        )
    return url


def _page_keys(url: str) -> list[str]:
    """What identifies a page of a listing: its URL, and its ``last`` cursor when it has one."""
    cursors = parse_qs(urlsplit(url).query).get("last", [])
    return [url] + [f"last={cursor}" for cursor in cursors]


def _redirect_target(response: requests.Response, method: str) -> str | None:
    """Where a redirect answer to a GET or HEAD leads (absolute); None for any other answer."""
    location = response.headers.get("Location")
    if method not in ("GET", "HEAD") or response.status_code not in _REDIRECTS or not location:
        return None
    return urljoin(response.url, location)


def _redirected_headers(headers: Mapping[str, str] | None, url: str, target: str) -> dict[str, str]:
    """``headers`` for following a redirect from ``url`` to ``target``: no Authorization to another origin."""
    kept = dict(headers or {})
    if urlsplit(url)[:2] != urlsplit(target)[:2]:
        kept = {k: v for k, v in kept.items() if k.lower() != "authorization"}
    return kept


def _body_size(data: Body) -> int | None:
    """How many bytes an upload ``data`` has left to send; None when it cannot be told."""
    if data is None or isinstance(data, bytes):
        return len(data or b"")
    if hasattr(data, "__len__"):
        return len(cast(Any, data))
    if not _seekable(data):
        return None
    stream = cast(IO[bytes], data)
    start = stream.tell()
    end = stream.seek(0, 2)
    stream.seek(start)
    return end - start
