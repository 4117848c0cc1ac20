"""JUnit XML for CI systems: one suite per command run, one case per checked thing."""

from __future__ import annotations

import xml.etree.ElementTree as ET
from pathlib import Path
from typing import Iterable

from .errors import OperationError


def junit_xml(suite: str, cases: Iterable[tuple[str, str, str | None]]) -> bytes:
    """A JUnit document; each case is ``(classname, name, failure message or None)``."""
    cases = list(cases)
    failures = sum(1 for _, _, failure in cases if failure)
    root = ET.Element("testsuites")
    node = ET.SubElement(root, "testsuite", name=suite, tests=str(len(cases)), failures=str(failures), errors="0")
    for classname, name, failure in cases:
        case = ET.SubElement(node, "testcase", classname=classname, name=name)
        if failure:
            ET.SubElement(case, "failure", message=failure.splitlines()[0][:500]).text = failure
    ET.indent(root)
    return ET.tostring(root, encoding="utf-8", xml_declaration=True) + b"\n"


def write_junit(path: Path, suite: str, cases: Iterable[tuple[str, str, str | None]]) -> None:
    """Write a JUnit document to ``path`` (its directory is created if missing); raises OperationError when
    the file cannot be written."""
    write_report(path, junit_xml(suite, cases))


def write_report(path: Path, data: bytes) -> None:
    """Write a report file (JUnit XML, proposals) to ``path``, creating its directory; raises OperationError
    naming the path when that fails."""
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(data)
    except FileExistsError as exc:  # a file where a directory of the path should be
        raise OperationError(f"{path}: cannot write: {exc.filename} is not a directory") from None
    except OSError as exc:
        raise OperationError(f"{path}: cannot write: {exc.strerror or exc}") from None
