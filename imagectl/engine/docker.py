"""The Docker implementation of :class:`imagectl.engine.Engine`, over the Docker SDK.

Only this module imports ``docker``, and only when a :class:`DockerEngine` is made; commands that need no engine
never load it.  :func:`inspect_over_socket` asks the Engine API one question without the SDK, for commands that
must stay light when there is nothing for the engine to do (rollback's local-tag follow-up).
"""

from __future__ import annotations

import http.client
import json
import os
import shutil
import socket
from collections import deque
from pathlib import Path
from typing import Any, Callable, Mapping
from urllib.parse import quote

from ..progress.push import PushProgress
from ..redact import redact
from ..errors import BuildError, EngineError, NotFoundError
from . import TAIL_LINES, Engine, EngineBuild, EngineName, ImageInfo, KnownLayers, LineSink, Pushed


def _info(attrs: Mapping[str, Any]) -> ImageInfo:
    config = attrs.get("Config") or {}
    return ImageInfo(
        id=attrs["Id"],
        tags=tuple(attrs.get("RepoTags") or ()),
        repo_digests=tuple(attrs.get("RepoDigests") or ()),
        labels=dict(config.get("Labels") or {}),
        size=int(attrs.get("Size") or 0),
        created=str(attrs.get("Created") or ""),
    )


def ssh_options(host: str, which: Callable[[str], str | None] = shutil.which) -> dict[str, Any]:
    """How the SDK reaches a ``DOCKER_HOST=ssh://user@host`` engine.  The Docker SDK's ssh transport imports
    paramiko whatever it connects with (docker 7.1, transport/sshconn.py), so without paramiko this raises
    EngineError saying what to install (``pip install 'imagectl[ssh]'``); with it, the ``ssh`` client is used
    where there is one (its config, keys and agent, as the docker CLI does).  Other hosts need nothing."""
    if not host.startswith("ssh://"):
        return {}
    try:
        import paramiko  # noqa: F401
    except ImportError:
        raise EngineError(f"DOCKER_HOST={redact(host)}: an engine over ssh needs paramiko, which the Docker SDK "
                          "uses for ssh:// (pip install 'imagectl[ssh]')") from None
    return {"use_ssh_client": True} if which("ssh") else {}


class DockerEngine(Engine):
    """:class:`Engine` over the Docker SDK, against ``DOCKER_HOST`` or the default socket.

    Not reproducible: the legacy builder writes each file's mtime and each layer's creation time into the layer
    tars, so two builds of one context differ (``build`` says ``"reproducible": false``)."""

    name: EngineName = "docker"
    reproducible = False

    def __init__(self, client: Any = None) -> None:
        import docker
        import docker.errors

        self._errors = docker.errors
        host = os.environ.get("DOCKER_HOST", "")
        try:
            self._client = client or docker.from_env(timeout=600, **ssh_options(host))
            self._client.ping()
        except EngineError:
            raise
        except Exception as exc:  # the SDK raises several unrelated types here
            where = redact(host) if host else "the default socket"
            raise EngineError(f"cannot reach the Docker engine at {where}: {_short(exc)}") from None
        self.api = self._client.api

    def version(self) -> str:
        """The engine's version, e.g. ``20.10.24``."""
        return str(self._call(self.api.version).get("Version", "unknown"))

    def list_tags(self, repository: str) -> list[str]:
        """The local tags of ``repository`` (familiar name), without the repository part."""
        prefix = f"{repository}:"
        images = self._call(self._client.images.list, name=repository)
        return sorted({
            t[len(prefix):] for i in images for t in (i.attrs.get("RepoTags") or ()) if t.startswith(prefix)
        })

    def inspect(self, ref: str) -> ImageInfo | None:
        """The local image ``ref`` (name or id), or None."""
        try:
            return _info(self.api.inspect_image(ref))
        except self._errors.ImageNotFound:
            return None
        except self._errors.APIError as exc:
            if exc.status_code == 404:
                return None
            raise EngineError(f"engine: inspect {ref}: {_short(exc)}") from None

    def build(self, context: Path, spec: EngineBuild, on_line: LineSink) -> str:
        """Build ``context`` as ``spec`` says; streams each output line to ``on_line``; returns the image id.

        Raises BuildError carrying the last lines of the log.
        """
        tail: deque[str] = deque(maxlen=TAIL_LINES)
        image_id = None
        build_args = dict(spec.build_args)
        if spec.source_date_epoch is not None:  # pip's .pyc files; the layers' mtimes stay the builder's own
            build_args.setdefault("SOURCE_DATE_EPOCH", str(spec.source_date_epoch))
        try:
            stream = self.api.build(path=str(context), labels=dict(spec.labels), network_mode=spec.network or None,
                                    buildargs=build_args, nocache=spec.no_cache, rm=True, forcerm=True,
                                    platform=spec.platform, decode=True)
            for chunk in stream:
                image_id = self._consume(chunk, tail, on_line) or image_id
        except self._errors.APIError as exc:
            raise BuildError(f"build failed: {_short(exc)}", "build", "\n".join(tail)) from None
        if not image_id:
            raise BuildError("build finished without an image id", "build", "\n".join(tail))
        return image_id

    def _consume(self, chunk: Mapping[str, Any], tail: deque[str], on_line: LineSink) -> str | None:
        if "error" in chunk:
            message = str(chunk.get("error", "")).strip()
            last = message.splitlines()[-1] if message else "unknown error"
            raise BuildError(f"build failed: {last}", "build", "\n".join([*tail, message]))
        for line in str(chunk.get("stream") or chunk.get("status") or "").splitlines():
            if line.strip():
                tail.append(line)
                on_line(line)
        aux = chunk.get("aux") or {}
        return aux.get("ID") if isinstance(aux, dict) else None

    def tag(self, image: str, repository: str, tag: str) -> None:
        """Point local ``repository:tag`` at ``image``."""
        self._call(self.api.tag, image, repository, tag, force=True)

    def untag(self, ref: str) -> None:
        """Remove local tag ``ref`` (never the image while other tags use it)."""
        try:
            self.api.remove_image(ref, noprune=True)
        except self._errors.ImageNotFound:
            pass
        except self._errors.APIError as exc:
            raise EngineError(f"engine: untag {ref}: {_short(exc)}") from None

    def push(self, repository: str, tag: str, on_line: LineSink) -> Pushed:
        """Push ``repository:tag``; progress as bytes uploaded of the layers' total (every few seconds, from the
        engine's events) and a last line of what was uploaded; returns the pushed digest and the layer bytes the
        engine uploaded (``total`` is 0: the engine does not report the sizes of layers the registry had)."""
        digest = ""
        progress = PushProgress(on_line)
        try:
            for chunk in self.api.push(repository, tag=tag, stream=True, decode=True):
                if "error" in chunk:
                    raise BuildError(push_failure(repository, tag, str(chunk["error"])), "push",
                                     str(chunk.get("error")))
                digest = (chunk.get("aux") or {}).get("Digest", digest)
                progress.event(chunk)
                if chunk.get("status") and not chunk.get("id"):
                    on_line(str(chunk["status"]))
        except self._errors.APIError as exc:
            raise BuildError(push_failure(repository, tag, _short(exc)), "push") from None
        if not digest:
            raise BuildError(f"push of {repository}:{tag} reported no digest", "push")
        progress.finish()
        return Pushed(digest, progress.uploaded)

    def pull(self, ref: str, on_line: LineSink) -> ImageInfo:
        """Pull ``ref``; raises NotFoundError if the registry has no such image, EngineError otherwise."""
        repository, _, tag = ref.rpartition(":") if "@" not in ref else (ref, "", "")
        try:
            for chunk in self.api.pull(repository or ref, tag=tag or None, stream=True, decode=True):
                if "error" in chunk:
                    raise EngineError(f"pull {ref}: {chunk['error']}")
                _progress(chunk, on_line)
        except self._errors.NotFound:
            raise NotFoundError(f"pull {ref}: no such image") from None
        except self._errors.APIError as exc:
            raise EngineError(f"pull {ref}: {_short(exc)}") from None
        info = self.inspect(ref)
        if info is None:
            raise EngineError(f"pull {ref}: the engine has no image after pulling")
        return info

    def run(self, image: str, command: list[str], network: str | None = None, *,
            gpus: bool = False) -> tuple[int, str]:
        """Run ``command`` in a throw-away container; returns (exit status, stdout+stderr)."""
        device_requests = None
        if gpus:
            import docker.types

            device_requests = [docker.types.DeviceRequest(count=-1, capabilities=[["gpu"]])]
        container = self._call(self._client.containers.create, image, command, network_mode=network or None,
                               device_requests=device_requests, detach=True)
        try:
            container.start()
            status = container.wait(timeout=600)
            return int(status.get("StatusCode", 1)), container.logs().decode("utf-8", "replace")
        except self._errors.APIError as exc:
            raise EngineError(f"engine: run {image}: {_short(exc)}") from None
        finally:
            container.remove(force=True)

    def export_layout(self, image: str, dest: Path, *, known: KnownLayers | None = None) -> None:
        """Write ``image`` as an OCI image layout in ``dest`` from the daemon's ``docker save`` stream
        (:mod:`.docker_save`: the Engine API has no OCI export): a Docker manifest, the config as the daemon holds it
        (its digest is the image id), each layer compressed by imagectl's own gzip writer, except those ``known``
        says the destination holds.  ``build`` pushes this layout by its digest (the daemon's push always names a
        tag).  Raises EngineError when the image is not there or its save stream cannot be read whole,
        RegistryError when ``known`` cannot ask the registry."""
        from .docker_save import layout_from_save

        info = self.inspect(image)
        if info is None:
            raise EngineError(f"engine: export {image}: no such image")
        try:
            layout_from_save(self.api.get_image(info.id), info.id, dest, known)
        except (self._errors.DockerException, OSError) as exc:  # requests' errors are OSErrors
            raise EngineError(f"engine: export {image}: {_short(exc)}") from None

    def share_with_docker(self, image: str, repository: str, tags: tuple[str, ...]) -> bool:
        """Nothing to do: the image is in the daemon already."""
        return False

    def _call(self, func: Callable[..., Any], *args: Any, **kwargs: Any) -> Any:
        try:
            return func(*args, **kwargs)
        except self._errors.DockerException as exc:
            raise EngineError(f"engine: {_short(exc)}") from None


_REFUSED = ("unauthorized", "authentication required", "denied", "forbidden", "401", "403")


def push_failure(repository: str, tag: str, message: str) -> str:
    """The one line of a failed push; a refusal of the credentials says so and where they were read from."""
    line = " ".join(message.split())
    if not any(word in line.lower() for word in _REFUSED):
        return f"push of {repository}:{tag} failed: {line}"
    from ..registry.credentials import docker_config_path  # here: the registry package loads requests

    host = repository.split("/", 1)[0]
    return (f"push of {repository}:{tag} failed: the registry {host} refused the credentials ({line}); the engine "
            f"sends those of {docker_config_path()} for {host} (docker login {host}, or a credential helper there)")


def _progress(chunk: Mapping[str, Any], on_line: LineSink) -> None:
    status = chunk.get("status")
    if status and chunk.get("id") and status not in ("Pushing", "Downloading", "Extracting", "Waiting"):
        on_line(f"{chunk['id']}: {status}")
    elif status and not chunk.get("id"):
        on_line(str(status))


def _short(exc: Exception) -> str:
    explanation = getattr(exc, "explanation", None)
    text = str(explanation or exc).strip()
    return text.splitlines()[-1] if text else type(exc).__name__


# ---------------------------------------------------------------------------- one question without the SDK

DEFAULT_SOCKET = "/var/run/docker.sock"
_PROBE_TIMEOUT_S = 3.0
_MAX_ANSWER = 4 * 1024 * 1024


def engine_socket(docker_host: str) -> str | None:
    """The unix socket of the engine ``DOCKER_HOST`` names (the default socket when it is empty), or None for
    another kind of endpoint (tcp, ssh)."""
    if not docker_host:
        return DEFAULT_SOCKET
    return docker_host.removeprefix("unix://") if docker_host.startswith("unix://") else None


def daemon_answers(timeout: float = _PROBE_TIMEOUT_S) -> bool:
    """Whether a Docker daemon answers ``/_ping`` on the unix socket ``DOCKER_HOST`` names (never raises)."""
    path = engine_socket(os.environ.get("DOCKER_HOST", ""))
    if path is None:
        return False
    connection = _UnixConnection(path, timeout)
    try:
        connection.request("GET", "/_ping", headers={"Host": "docker"})
        return connection.getresponse().status == 200
    except (OSError, http.client.HTTPException):
        return False
    finally:
        connection.close()


def tag_over_socket(source: str, repository: str, tag: str, timeout: float = _PROBE_TIMEOUT_S) -> None:
    """``docker tag SOURCE REPOSITORY:TAG`` through the Engine API on the default unix socket; raises EngineError
    when the engine refuses or does not answer."""
    path = engine_socket(os.environ.get("DOCKER_HOST", "")) or DEFAULT_SOCKET
    connection = _UnixConnection(path, timeout)
    query = f"repo={quote(repository, safe='')}&tag={quote(tag, safe='')}"
    try:
        connection.request("POST", f"/images/{quote(source, safe='/:@')}/tag?{query}", headers={"Host": "docker"})
        status = connection.getresponse().status
    except (OSError, http.client.HTTPException) as exc:
        raise EngineError(f"engine: tag {repository}:{tag}: {exc}") from None
    finally:
        connection.close()
    if status != 201:
        raise EngineError(f"engine: tag {repository}:{tag}: the engine answered {status}")


def inspect_over_socket(path: str, ref: str, timeout: float = _PROBE_TIMEOUT_S) -> Mapping[str, Any] | None:
    """``docker image inspect REF`` through the Engine API on unix socket ``path``: the answer, or None (404).

    Raises OSError when nothing answers there (no socket, no permission, another status), ValueError for an
    answer that is not a JSON object.
    """
    connection = _UnixConnection(path, timeout)
    try:
        connection.request("GET", f"/images/{quote(ref, safe='/:@')}/json", headers={"Host": "docker"})
        answer = connection.getresponse()
        body = answer.read(_MAX_ANSWER + 1)
    except http.client.HTTPException as exc:
        raise OSError(f"engine at {path}: {exc}") from None
    finally:
        connection.close()
    if answer.status == 404:
        return None
    if answer.status != 200 or len(body) > _MAX_ANSWER:
        raise OSError(f"engine at {path} answered {answer.status}")
    found = json.loads(body)
    if not isinstance(found, dict):
        raise ValueError(f"engine at {path}: inspect answered no JSON object")
    return found


class _UnixConnection(http.client.HTTPConnection):
    """An HTTP connection over a unix socket (the Engine API's usual transport)."""

    def __init__(self, path: str, timeout: float) -> None:
        super().__init__("localhost", timeout=timeout)
        self._socket_path = path

    def connect(self) -> None:
        sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        sock.settimeout(self.timeout)
        try:
            sock.connect(self._socket_path)
        except OSError:
            sock.close()
            raise
        self.sock = sock
