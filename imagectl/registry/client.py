"""A client for the OCI distribution API (``/v2/``) of one registry, over ``requests``.

Every call goes through :meth:`RegistryClient._request`, which attaches an ``Authorization`` header once the
registry's challenge is known, answers a 401 once (basic or bearer token, see :mod:`.auth`), retries
transient failures (the policy shared with the package-index reader, :mod:`imagectl.retry`), and turns any
other answer into a typed error (:mod:`.error_factory`).

TLS is verified by default.  A client created with ``insecure=True`` first tries https without verifying
the certificate and, if the registry does not speak TLS at all, falls back to plain http, as dockerd does for
its insecure registries; the scheme it settles on is kept for the client's life.
"""

from __future__ import annotations

import hashlib
import logging
import warnings
from dataclasses import dataclass
from typing import IO, Any, Iterator, Mapping, Protocol, Union, cast
from urllib.parse import urljoin, urlsplit

import requests
import urllib3

from ..errors import RegistryError, ValidationError
from ..retry import RetryPolicy, loggable_url, send_with_retries
from .auth import Authenticator, CredentialsLookup, TokenCache, repository_scope
from .credentials import Credentials, load_credentials
from .error_factory import error_from_response, oci_error_codes, unreachable_error
from .manifest import (
    MANIFEST_ACCEPT,
    MANIFEST_TYPES,
    ImageConfig,
    Manifest,
    parse_image_config,
    parse_manifest_json,
    pick_platform,
    sha256_digest,
)

log = logging.getLogger(__name__)

DOCKER_HUB_API = "registry-1.docker.io"
MAX_MANIFEST_BYTES = 4 * 1024 * 1024
MAX_CONFIG_BYTES = 8 * 1024 * 1024
_CHUNK = 1024 * 1024
_TLS_HINT = "if it serves plain http or a self-signed certificate, configure it as insecure"


class Readable(Protocol):
    """A binary file-like object to upload from: an open file, ``io.BytesIO``, a :class:`BlobReader`."""

    def read(self, size: int = -1, /) -> bytes: ...


Body = Union[bytes, Readable, None]


def api_host(host: str) -> str:
    """The host that serves the ``/v2/`` API for registry ``host`` (Docker Hub's is registry-1.docker.io)."""
    return DOCKER_HUB_API if host in ("docker.io", "index.docker.io") else host


def _no_auth(request: requests.PreparedRequest) -> requests.PreparedRequest:
    """Keep requests from replacing our Authorization header with ~/.netrc credentials."""
    return request


def _ref(repository: str, reference: str) -> str:
    return f"{repository}@{reference}" if ":" in reference else f"{repository}:{reference}"


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


def _seekable(data: Body) -> bool:
    """True for a file-like ``data`` that can go back to where it started."""
    seekable = getattr(data, "seekable", None)
    try:
        return bool(seekable and seekable()) and not isinstance(data, bytes)
    except (OSError, ValueError):
        return False


class BlobReader:
    """A blob being downloaded: a read-only, non-seekable file-like object over the HTTP response.

    Its ``len()`` is the blob's size, so ``requests`` can stream it straight into an upload with a
    Content-Length.  Close it (or use it as a context manager) to release the connection.
    """

    def __init__(self, response: requests.Response, digest: str, registry: str) -> None:
        self.digest = digest
        self.size = int(response.headers.get("Content-Length") or 0)
        self._response = response
        self._registry = registry

    def read(self, size: int = -1) -> bytes:
        """Up to ``size`` bytes (all that is left if negative); b"" at the end.

        Raises RegistryError if the connection breaks off.
        """
        try:
            return self._response.raw.read(None if size < 0 else size, decode_content=False) or b""
        except (urllib3.exceptions.HTTPError, OSError) as exc:
            raise unreachable_error(self._registry, exc) from None

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


@dataclass(frozen=True)
class Timeouts:
    """Seconds to wait for a connection and for each read of an answer."""

    connect_s: float = 10.0
    read_s: float = 120.0


class RegistryClient:
    """The OCI distribution API of one registry ``host`` (as users write it: ``ghcr.io``, ``127.0.0.1:5000``).

    Repositories are paths without the host (``team/torch``); references are a tag or a digest.
    ``credentials`` are used as given; else ``lookup(host)`` is asked once, when the registry first
    challenges (pass :func:`.credentials.load_credentials`, or use :func:`connect`).
    """

    def __init__(
        self,
        host: str,
        *,
        credentials: Credentials | None = None,
        lookup: CredentialsLookup | None = None,
        insecure: bool = False,
        retry: RetryPolicy = RetryPolicy(),
        timeouts: Timeouts = Timeouts(),
        session: requests.Session | None = None,
        token_cache: TokenCache | None = None,
    ) -> None:
        self.host = host
        self.insecure = insecure
        self._api_host = api_host(host)
        self._retry = retry
        self._timeouts = timeouts
        self._session = session or requests.Session()
        self._scheme: str | None = None if insecure else "https"
        self._auth = Authenticator(host, self._send, credentials, lookup, insecure, token_cache)

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
        the bytes do not match a digest ``reference``).
        """
        what = f"GET manifest {_ref(repository, reference)}"
        response = self._request(
            "GET", f"/v2/{repository}/manifests/{reference}", _pull(repository), what,
            headers={"Accept": MANIFEST_ACCEPT},
        )
        raw = response.content
        if len(raw) > MAX_MANIFEST_BYTES:
            raise RegistryError(f"registry {self.host}: {what}: manifest larger than {MAX_MANIFEST_BYTES} bytes")
        manifest = Manifest(_media_type(response, raw), _answered_digest(response, raw), raw)
        if reference.startswith("sha256:") and sha256_digest(raw) != reference:
            raise RegistryError(f"registry {self.host}: {what}: answered bytes with digest {sha256_digest(raw)}")
        return manifest

    def head_manifest(self, repository: str, reference: str) -> str | None:
        """The digest of the manifest at ``reference``, or None if there is none (404).

        Raises AuthError if refused, RegistryError for any other failure.
        """
        what = f"HEAD manifest {_ref(repository, reference)}"
        response = self._request(
            "HEAD", f"/v2/{repository}/manifests/{reference}", _pull(repository), what,
            headers={"Accept": MANIFEST_ACCEPT}, ok=(200, 404),
        )
        if response.status_code == 404:
            return None
        digest = response.headers.get("Docker-Content-Digest")
        return digest or self.get_manifest(repository, reference).digest

    def put_manifest(self, repository: str, reference: str, manifest: Manifest) -> str:
        """Store ``manifest``'s raw bytes under tag or digest ``reference``, as its own media type.

        Returns the digest the registry answered.  Raises AuthError if refused, NotFoundError if a blob
        or child manifest it refers to is missing (some registries say 400 instead: RegistryError).
        """
        response = self._request(
            "PUT", f"/v2/{repository}/manifests/{reference}", _push(repository),
            f"PUT manifest {_ref(repository, reference)}",
            headers={"Content-Type": manifest.media_type}, data=manifest.raw, ok=(200, 201),
        )
        return response.headers.get("Docker-Content-Digest") or manifest.digest

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

        Raises NotFoundError if the repository does not exist, AuthError if refused, RegistryError otherwise.
        """
        tags: list[str] = []
        url: str | None = f"/v2/{repository}/tags/list"
        params = {"n": str(page_size)} if page_size else None
        seen: set[str] = set()
        while url and url not in seen:
            seen.add(url)
            response = self._request("GET", url, _pull(repository), f"GET tags of {repository}", params=params)
            tags += _json_object(response, self.host, f"tags of {repository}").get("tags") or []
            url, params = _next_link(response), None
        return tags

    # -- blobs -------------------------------------------------------------------------------------------

    def blob_exists(self, repository: str, digest: str) -> bool:
        """True if ``repository`` holds blob ``digest``; raises AuthError if refused, RegistryError otherwise."""
        response = self._request(
            "HEAD", f"/v2/{repository}/blobs/{digest}", _pull(repository),
            f"HEAD blob {_ref(repository, digest)}", ok=(200, 404),
        )
        return response.status_code == 200

    def open_blob(self, repository: str, digest: str) -> BlobReader:
        """A streaming reader of blob ``digest``; close it when done.

        Raises NotFoundError if there is no such blob, AuthError if refused, RegistryError otherwise.
        """
        response = self._request(
            "GET", f"/v2/{repository}/blobs/{digest}", _pull(repository),
            f"GET blob {_ref(repository, digest)}", stream=True,
        )
        return BlobReader(response, digest, self.host)

    def read_blob(self, repository: str, digest: str, max_bytes: int = MAX_CONFIG_BYTES) -> bytes:
        """The whole (small) blob ``digest``, checked against its digest.

        Raises NotFoundError, AuthError, or RegistryError if it is larger than ``max_bytes`` or corrupt.
        """
        with self.open_blob(repository, digest) as reader:
            data = reader.read(max_bytes + 1)
        if len(data) > max_bytes:
            raise RegistryError(f"registry {self.host}: blob {_ref(repository, digest)} is over {max_bytes} bytes")
        if digest.startswith("sha256:") and sha256_digest(data) != digest:
            raise RegistryError(f"registry {self.host}: blob {_ref(repository, digest)} does not match its digest")
        return data

    def upload_blob(self, repository: str, data: bytes | Readable, digest: str | None = None) -> str:
        """Upload a blob monolithically (POST, then one PUT), streaming a file-like ``data``; returns its digest.

        ``digest`` may be left out for bytes or a seekable file (it is computed).  Raises ValidationError if
        it is missing for a stream, AuthError if refused, RegistryError otherwise (400 DIGEST_INVALID when
        the bytes do not match it).
        """
        digest = digest or _digest_of(data)
        what = f"upload blob {_ref(repository, digest)}"
        started = self._request("POST", f"/v2/{repository}/blobs/uploads/", _push(repository), what, ok=(202,))
        self._request(
            "PUT", self._location(started, what), _push(repository), what, params={"digest": digest},
            headers={"Content-Type": "application/octet-stream"}, data=data, ok=(201,),
        )
        return digest

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

        For an index, the linux/amd64 entry is read (else the first).  Raises NotFoundError, AuthError, or
        RegistryError if the manifest has no config or it is not JSON.
        """
        if manifest.is_index:
            child = pick_platform(manifest.children())
            manifest = self.get_manifest(repository, child.digest)
        config = manifest.config()
        if config is None:
            raise RegistryError(f"registry {self.host}: manifest {_ref(repository, manifest.digest)} has no config")
        return parse_image_config(self.read_blob(repository, config.digest), config.digest)

    # -- the one request path ----------------------------------------------------------------------------

    def _request(
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
    ) -> requests.Response:
        """Send one API request with auth and retries; the answer if its status is in ``ok``.

        Raises AuthError, NotFoundError or RegistryError (from :func:`error_from_response`) otherwise, and
        RegistryError if the registry cannot be reached.
        """
        url = path if "://" in path else self._base_url() + path
        response = self._authorized_send(
            method, url, scopes, _Payload(data), headers=headers, params=params, stream=stream
        )
        if response.status_code not in ok:
            error = error_from_response(response, self.host, what, self._hint(response))
            response.close()
            raise error
        return response

    def _authorized_send(
        self, method: str, url: str, scopes: tuple[str, ...], payload: _Payload,
        headers: Mapping[str, str] | None, **options: Any,
    ) -> requests.Response:
        """Send with the known Authorization (only to this registry's host); answer a 401 challenge once."""
        own = urlsplit(url).netloc == self._api_host
        sent = self._auth.header_for(scopes) if own else None
        response = self._send(method, url, headers=_with_auth(headers, sent), payload=payload, **options)
        if response.status_code != 401 or not own or not payload.resendable:
            return response
        retry_with = self._auth.answer(response, scopes)
        if not retry_with or retry_with == sent:
            return response
        response.close()
        return self._send(method, url, headers=_with_auth(headers, retry_with), payload=payload, **options)

    def _send(
        self,
        method: str,
        url: str,
        *,
        params: Any = None,
        headers: Mapping[str, str] | None = None,
        payload: _Payload | None = None,
        stream: bool = False,
    ) -> requests.Response:
        """One HTTP exchange, tried again (per the :class:`~imagectl.retry.RetryPolicy`) after transient failures.

        Raises RegistryError "registry HOST unreachable" when no try got an answer.
        """
        body = payload or _Payload(None)
        policy = self._retry if body.resendable else self._retry.once()

        def send_once() -> requests.Response:
            body.rewind()
            return self._send_once(method, url, params, headers, body.data, stream)

        try:
            return send_with_retries(send_once, policy, f"{method} {loggable_url(url)}")
        except requests.exceptions.SSLError as exc:
            raise unreachable_error(self._name_of(url), exc, _TLS_HINT) from None
        except requests.exceptions.RequestException as exc:
            raise unreachable_error(self._name_of(url), exc) from None

    def _send_once(
        self, method: str, url: str, params: Any, headers: Mapping[str, str] | None, data: Body, stream: bool
    ) -> requests.Response:
        with warnings.catch_warnings():
            if self.insecure:
                warnings.simplefilter("ignore", urllib3.exceptions.InsecureRequestWarning)
            response = self._session.request(
                method, url, params=params, headers=dict(headers or {}), data=data, stream=stream,
                timeout=(self._timeouts.connect_s, self._timeouts.read_s), verify=not self.insecure,
                auth=_no_auth, allow_redirects=method in ("GET", "HEAD"),
            )
        log.debug("%s %s -> %s", method, loggable_url(url), response.status_code)
        return response

    def _base_url(self) -> str:
        if self._scheme is None:
            self._scheme = self._probe_scheme()
        return f"{self._scheme}://{self._api_host}"

    def _probe_scheme(self) -> str:
        """For an insecure registry: "https" if it speaks TLS (certificate unchecked), else "http"."""
        try:
            self._send_once("GET", f"https://{self._api_host}/v2/", None, None, None, False).close()
        except (requests.exceptions.SSLError, requests.exceptions.ConnectionError, requests.exceptions.Timeout):
            log.info("registry %s does not answer https; using plain http (insecure)", self.host)
            return "http"
        return "https"

    def _hint(self, response: requests.Response) -> str:
        """What to tell a user refused for lack of credentials (none given, none in the Docker config)."""
        if response.status_code == 401 and self._auth.credentials() is None:
            return f"no credentials for {self.host} (docker login {self.host})"
        return ""

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


def connect(host: str, *, insecure: bool = False, retry: RetryPolicy = RetryPolicy()) -> RegistryClient:
    """A client for ``host`` that takes credentials from the Docker config when the registry asks for them."""
    return RegistryClient(host, lookup=load_credentials, insecure=insecure, retry=retry)


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


def _answered_digest(response: requests.Response, raw: bytes) -> str:
    return response.headers.get("Docker-Content-Digest") or sha256_digest(raw)


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
