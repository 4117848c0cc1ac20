"""The CI systems' published schemas, as check-jsonschema vendors them (GitHub's workflow schema and GitLab's
CI schema from SchemaStore and GitLab), run offline; and the job counts those schemas do not check.

``schema_problems(kind, paths)`` runs ``python -m check_jsonschema --builtin-schema vendor.<schema>`` over the
files (the proxy variables point at a closed port, so a check that tried the network would fail, not pass) and
returns its complaints, shortened, or ``""`` when every file is valid.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

SCHEMAS = {"github": "vendor.github-workflows", "gitlab": "vendor.gitlab-ci"}
OFFLINE = {name: "http://127.0.0.1:9" for name in ("http_proxy", "https_proxy", "HTTP_PROXY", "HTTPS_PROXY")}


def schema_problems(kind: str, paths: list[Path]) -> str:
    """What check-jsonschema finds wrong with ``paths`` under the ``kind`` (github, gitlab) schema; "" if nothing."""
    env = {**os.environ, **OFFLINE, "no_proxy": "", "NO_PROXY": ""}
    done = subprocess.run([sys.executable, "-m", "check_jsonschema", "--builtin-schema", SCHEMAS[kind],
                           *map(str, paths)], capture_output=True, text=True, env=env, timeout=120)
    if done.returncode == 0 and "ok -- validation done" in done.stdout:
        return ""
    lines = (done.stdout + done.stderr).splitlines()
    return "\n".join(line[:300] for line in lines[:40]) or f"check-jsonschema exited {done.returncode}"


def inline(text: str, expression: str, value: Any) -> str:
    """``text`` (a workflow) with every ``${{ ... }}`` ``expression`` replaced by ``value`` as JSON (which is
    YAML): the workflow as GitHub sees it once the expression is evaluated.  Fails when the expression is not
    there (a renamed expression would otherwise validate the unchanged file)."""
    assert expression in text, f"{expression} is not in the workflow"
    return text.replace(expression, json.dumps(value))


def github_jobs(matrix: dict[str, Any]) -> int:
    """How many jobs a GitHub ``strategy.matrix`` of include entries only makes: one per entry."""
    assert set(matrix) == {"include"}, f"not an include-only matrix: {sorted(matrix)}"
    return len(matrix["include"])


def gitlab_jobs(job: dict[str, Any]) -> int:
    """How many jobs a GitLab job with ``parallel: matrix`` makes: per entry, the product of its variables'
    value counts (a scalar counts 1), summed; 1 for a job without it.  GitLab's limit (200) is on this number;
    the schema only caps the entries (``maxItems: 200``), not what one entry's lists multiply to."""
    parallel = job.get("parallel")
    if parallel is None:
        return 1
    total = 0
    for entry in parallel["matrix"]:
        count = 1
        for value in entry.values():
            count *= len(value) if isinstance(value, list) else 1
        total += count
    return total
