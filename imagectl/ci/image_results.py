"""The image a CI step pushed, as the results ``IMAGE_URL`` and ``IMAGE_DIGEST`` that Tekton Chains reads to sign
and attest it (and an Argo template's output parameters): from the JSON document of ``imagectl build
--metadata-file`` (one profile, one platform) or of ``imagectl index --json``.

Run by the steps of ``imagectl matrix --format tekton|argo`` (``steps/build.sh``, ``steps/index.sh``) as
``python3 -m imagectl.ci.image_results DOCUMENT URL_FILE DIGEST_FILE``: it writes ``REPOSITORY:TAG`` to URL_FILE
and ``sha256:HEX`` to DIGEST_FILE, each without a line break (a result is the file's exact bytes), or prints one
``imagectl: ...`` line and exits 1 when the document names no pushed image.
"""

from __future__ import annotations

import json
import re
import sys
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from ..errors import ImagectlError, OperationError
from ..reference import parse_reference

DIGEST = re.compile(r"^sha256:[0-9a-f]{64}$")
PUSHED = ("built", "reused")  # the build statuses whose image is in the registry (with --push)


def image_result(document: Mapping[str, Any]) -> tuple[str, str]:
    """``(IMAGE_URL, IMAGE_DIGEST)`` of ``document``: ``REPOSITORY:TAG`` and the manifest digest of the one image
    a ``build --metadata-file`` document names, or of the index an ``index --json`` document names.

    Raises:
        OperationError: not one result, a failed build, no repository or tag, a reference that does not parse,
            a digest that is not ``sha256:`` and 64 lowercase hex digits (an image that was not pushed).
    """
    if "results" in document:
        results = document["results"]
        if not isinstance(results, Sequence) or len(results) != 1 or not isinstance(results[0], Mapping):
            raise OperationError("image results: the build document should hold exactly one result "
                                 "(one profile, one platform)")
        document = results[0]
        if document.get("status") not in PUSHED:
            raise OperationError(f"image results: {document.get('profile')!r}: build status "
                                 f"{document.get('status')!r}, not one of {', '.join(PUSHED)}")
    repository, tag, digest = (document.get(key) for key in ("repository", "tag", "digest"))
    if not isinstance(repository, str) or not isinstance(tag, str) or not repository or not tag:
        raise OperationError("image results: the document names no repository and tag (was the image pushed?)")
    url = f"{repository}:{tag}"
    try:
        parse_reference(url)
    except ImagectlError as exc:
        raise OperationError(f"image results: {exc}") from None
    if not isinstance(digest, str) or not DIGEST.fullmatch(digest):
        raise OperationError(f"image results: {url}: {digest!r} is not a registry digest (sha256:<64 hex>): "
                             "was the image pushed (--push, a registry configured)?")
    return url, digest


def write_results(document_path: Path, url_file: Path, digest_file: Path) -> tuple[str, str]:
    """Read the document at ``document_path`` and write its :func:`image_result` to the two files.

    Raises:
        OperationError: the document cannot be read or is not JSON; as :func:`image_result`; a file cannot be
            written.
    """
    try:
        document = json.loads(document_path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, ValueError) as exc:
        raise OperationError(f"image results: cannot read {document_path}: {exc}") from None
    if not isinstance(document, Mapping):
        raise OperationError(f"image results: {document_path} is not a JSON object")
    url, digest = image_result(document)
    try:
        url_file.write_text(url, encoding="utf-8")
        digest_file.write_text(digest, encoding="utf-8")
    except OSError as exc:
        raise OperationError(f"image results: cannot write a result: {exc}") from None
    return url, digest


def main(argv: Sequence[str]) -> int:
    """``image_results DOCUMENT URL_FILE DIGEST_FILE``: 0 with the results written, else one line and 1 (2 for
    a wrong argument count)."""
    if len(argv) != 3:
        print("usage: python3 -m imagectl.ci.image_results DOCUMENT URL_FILE DIGEST_FILE", file=sys.stderr)
        return 2
    try:
        url, digest = write_results(*(Path(arg) for arg in argv))
    except ImagectlError as exc:
        print(f"imagectl: {exc}", file=sys.stderr)
        return exc.exit_code
    print(f"IMAGE_URL={url} IMAGE_DIGEST={digest}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
