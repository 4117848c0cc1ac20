"""Tekton's and Argo's upstream schemas as validators (tests/fixtures/schemas; SOURCE names repositories, paths and
commits), and the checks their controllers make that a schema cannot.

- ``tekton_schema_problems(documents)``: each Task and Pipeline against the ``openAPIV3Schema`` of the ``v1``
  version of Tekton's CRD (config/300-crds/300-task.yaml, 300-pipeline.yaml), read as the Kubernetes API server
  reads a structural schema: a field an object's ``properties`` do not name is refused (the server prunes it, and
  ``kubectl apply``'s strict field validation refuses it), except under ``x-kubernetes-preserve-unknown-fields``.
  The CRDs are full schemas generated from Tekton's Go types, not thin ones; they leave open a param's ``value``
  and ``default`` (ParamValue: a string, list or object), a PipelineTask's embedded ``taskSpec`` and a Task's
  ``volumes`` (Kubernetes Volumes).  Those are checked here by hand: values are strings, an embedded taskSpec is
  checked against the Task schema's ``spec``, and each volume against Kubernetes' ``io.k8s.api.core.v1.Volume``
  as Argo's schema carries it.
- ``tekton_problems(documents, limit)``: what Tekton's admission webhook checks beyond the schema
  (pkg/apis/pipeline/v1/pipeline_validation.go, matrix_types.go, task_validation.go; docs/matrix.md,
  docs/variables.md): names, references, the task graph, matrix combinations per PipelineTask.
- ``argo_schema_problems(document, strict)``: the Workflow against ``io.argoproj.workflow.v1alpha1.Workflow`` of
  Argo's api/jsonschema/schema.json, as published (its objects allow any extra field) and ``strict`` (every object
  with ``properties`` refuses the others: a misspelt field fails).
- ``argo_problems(document)``: what Argo's validator checks beyond the schema (workflow/validate/validate.go):
  templates, arguments, ``{{...}}`` references, ``withParam`` rows.

Each returns a list of one-line problems, empty when there is none.
"""

from __future__ import annotations

import functools
import json
import re
from collections.abc import Iterable
from typing import Any

import jsonschema
import yaml

from tests.conftest import FIXTURES

SCHEMAS = FIXTURES / "schemas"
WORKFLOW = "io.argoproj.workflow.v1alpha1.Workflow"
VOLUME = "io.k8s.api.core.v1.Volume"
DNS1123_LABEL = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$")  # and at most 63 characters
DNS1123_SUBDOMAIN = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$")
TEKTON_VARIABLE = re.compile(r"\$\(([^)]*)\)")
ARGO_VARIABLE = re.compile(r"\{\{([^}]*)\}\}")


# --- the schemas ------------------------------------------------------------------------------------------


def structural(schema: Any) -> Any:
    """``schema`` (OpenAPI v3 as Kubernetes reads it, or JSON Schema) with ``additionalProperties: false`` on every
    object that lists ``properties`` and neither allows other fields nor preserves unknown ones."""
    if isinstance(schema, list):
        return [structural(s) for s in schema]
    if not isinstance(schema, dict):
        return schema
    out = {}
    for key, value in schema.items():
        if key in ("properties", "definitions", "$defs", "patternProperties"):
            out[key] = {name: structural(s) for name, s in value.items()}
        elif key in ("items", "additionalProperties", "not", "allOf", "anyOf", "oneOf"):
            out[key] = structural(value)
        else:
            out[key] = value
    preserved = out.get("x-kubernetes-preserve-unknown-fields")
    if "properties" in out and "additionalProperties" not in out and not preserved:
        out["additionalProperties"] = False
    return out


@functools.lru_cache(maxsize=None)
def crd_schema(kind: str) -> dict[str, Any]:
    """The structural ``openAPIV3Schema`` of Tekton's ``v1`` ``kind`` (Task, Pipeline)."""
    text = (SCHEMAS / "tekton" / f"300-{kind.lower()}.yaml").read_text(encoding="utf-8")
    crd = yaml.load(text, getattr(yaml, "CSafeLoader", yaml.SafeLoader))  # libyaml where PyYAML has it: 440 KB
    assert crd["spec"]["names"]["kind"] == kind
    (version,) = [v for v in crd["spec"]["versions"] if v["name"] == "v1"]
    return structural(version["schema"]["openAPIV3Schema"])


@functools.lru_cache(maxsize=None)
def argo_schema() -> dict[str, Any]:
    return json.loads((SCHEMAS / "argo" / "schema.json").read_text(encoding="utf-8"))


@functools.lru_cache(maxsize=None)
def _argo_validator(definition: str, strict: bool) -> jsonschema.protocols.Validator:
    root = argo_schema()
    schema = {key: value for key, value in root.items() if key != "oneOf"}
    if strict:
        schema = structural(schema)
    schema["$ref"] = f"#/definitions/{definition}"
    return jsonschema.validators.validator_for(schema)(schema)


def _errors(validator: jsonschema.protocols.Validator, instance: Any, where: str) -> list[str]:
    return [f"{where}: /{'/'.join(map(str, e.absolute_path))}: {e.message[:200]}"
            for e in sorted(validator.iter_errors(instance), key=lambda e: list(map(str, e.absolute_path)))]


@functools.lru_cache(maxsize=None)
def _crd_validator(kind: str, part: str | None = None) -> jsonschema.protocols.Validator:
    schema = crd_schema(kind)
    return jsonschema.Draft7Validator(schema["properties"][part] if part else schema)


def schema_errors() -> list[str]:
    """What the JSON Schema meta-schemas find wrong with the schemas as used here (a few seconds: once)."""
    found = []
    for kind in ("Task", "Pipeline"):
        found += [f"{kind}: {e.message[:200]}" for e in jsonschema.Draft7Validator(
            jsonschema.Draft7Validator.META_SCHEMA).iter_errors(crd_schema(kind))]
    for strict in (False, True):
        validator = _argo_validator(WORKFLOW, strict)
        found += [f"argo: {e.message[:200]}" for e in type(validator)(type(validator).META_SCHEMA).iter_errors(
            validator.schema)]
    return found


def tekton_schema_problems(documents: Iterable[dict[str, Any]]) -> list[str]:
    """Each document against its kind's CRD schema, and the parts the CRDs leave open (module docstring)."""
    problems = []
    for doc in documents:
        kind, name = doc.get("kind"), doc.get("metadata", {}).get("name")
        if doc.get("apiVersion") != "tekton.dev/v1" or kind not in ("Task", "Pipeline"):
            problems.append(f"{kind} {name}: not a tekton.dev/v1 Task or Pipeline")
            continue
        problems += _errors(_crd_validator(kind), doc, f"{kind} {name}")
        problems += _open_parts(doc, f"{kind} {name}")
    return problems


def _open_parts(doc: dict[str, Any], where: str) -> list[str]:
    """The parts the CRDs preserve unknown: params' values and defaults strings, an embedded taskSpec against the
    Task schema's spec, volumes against Kubernetes' Volume."""
    problems = []
    spec = doc.get("spec", {})
    for param in _walk_params(doc):
        for key in ("value", "default"):
            if key in param and not isinstance(param[key], str):
                problems.append(f"{where}: param {param.get('name')}: {key} is not a string")
    tasks = [t for part in ("tasks", "finally") if isinstance(spec.get(part), list) for t in spec[part]]
    for task in tasks:
        if isinstance(task, dict) and "taskSpec" in task:
            problems += _errors(_crd_validator("Task", "spec"), task["taskSpec"], f"{where}: {task.get('name')}")
    volume = _argo_validator(VOLUME, True)
    for n, item in enumerate(spec.get("volumes") if isinstance(spec.get("volumes"), list) else []):
        problems += _errors(volume, item, f"{where}: volumes[{n}]")
    return problems


def _walk_params(value: Any) -> Iterable[dict[str, Any]]:
    if isinstance(value, dict):
        for key, item in value.items():
            if key == "params" and isinstance(item, list):
                yield from (p for p in item if isinstance(p, dict))
            yield from _walk_params(item)
    elif isinstance(value, list):
        for item in value:
            yield from _walk_params(item)


def argo_schema_problems(document: dict[str, Any], *, strict: bool) -> list[str]:
    """The Workflow against Argo's published schema (``strict``: objects refuse fields they do not list)."""
    return _errors(_argo_validator(WORKFLOW, strict), document, "Workflow")


# --- what Tekton's webhook checks ---------------------------------------------------------------------------


def tekton_problems(documents: list[dict[str, Any]], limit: int = 256) -> list[str]:
    """The Pipelines' references to Tasks, params, workspaces and each other, their graph and matrix sizes, and the
    Tasks' variables (the module docstring names the sources)."""
    tasks = {d["metadata"]["name"]: d["spec"] for d in documents if d["kind"] == "Task"}
    problems = []
    for doc in documents:
        name = doc["metadata"]["name"]
        if len(name) > 253 or not DNS1123_SUBDOMAIN.fullmatch(name):
            problems.append(f"{doc['kind']} {name}: not a DNS-1123 subdomain")
        if doc["kind"] == "Task":
            problems += [f"Task {name}: {p}" for p in _task_variables(doc["spec"])]
        else:
            problems += [f"Pipeline {name}: {p}" for p in _pipeline(doc["spec"], tasks, limit)]
    return problems


def _task_variables(spec: dict[str, Any]) -> list[str]:
    """Every ``$(...)`` of a Task names a declared param, result path or workspace; a script has none."""
    declared = {"params": {p["name"] for p in spec.get("params", [])},
                "results": {r["name"] for r in spec.get("results", [])},
                "workspaces": {w["name"] for w in spec.get("workspaces", [])}}
    problems = []
    for step in spec.get("steps", []):
        if "$(" in step.get("script", ""):
            problems.append(f"step {step['name']}: a $( in its script (Tekton would substitute into the shell)")
        for variable in TEKTON_VARIABLE.findall(json.dumps({k: v for k, v in step.items() if k != "script"})):
            kind, _, rest = variable.partition(".")
            ref = rest.split(".")[0]
            suffix = rest[len(ref):]
            ok = (kind == "params" and ref in declared["params"] and not suffix) or (
                kind == "results" and ref in declared["results"] and suffix == ".path") or (
                kind == "workspaces" and ref in declared["workspaces"] and suffix in (".path", ".bound"))
            if not ok:
                problems.append(f"step {step['name']}: $({variable}) names nothing the Task declares")
    return problems


def _pipeline(spec: dict[str, Any], tasks: dict[str, dict[str, Any]], limit: int) -> list[str]:
    problems = []
    params = {p["name"] for p in spec.get("params", [])}
    workspaces = {w["name"] for w in spec.get("workspaces", [])}
    names = [t["name"] for t in spec["tasks"]]
    if len(set(names)) != len(names):
        problems.append("PipelineTask names repeat")
    for task in spec["tasks"]:
        where = f"task {task['name']}"
        if len(task["name"]) > 63 or not DNS1123_LABEL.fullmatch(task["name"]):
            problems.append(f"{where}: not a DNS-1123 label")
        for after in task.get("runAfter", []):
            if after not in names:
                problems.append(f"{where}: runAfter {after} names no task")
        for variable in TEKTON_VARIABLE.findall(json.dumps(task.get("params", []))):
            if not (variable.startswith("params.") and variable[len("params."):] in params):
                problems.append(f"{where}: $({variable}) is not a Pipeline param")
        matrix = {p["name"] for entry in task.get("matrix", {}).get("include", []) for p in entry["params"]}
        for variable in TEKTON_VARIABLE.findall(task.get("displayName", "")):  # docs/matrix.md#displayname
            if not (variable.startswith("params.") and variable[len("params."):] in params | matrix):
                problems.append(f"{where}: displayName's $({variable}) is neither a Pipeline nor a matrix param")
        for binding in task.get("workspaces", []):
            if binding["workspace"] not in workspaces:
                problems.append(f"{where}: workspace {binding['workspace']} is not the Pipeline's")
        task_spec = tasks.get(task["taskRef"]["name"]) if "taskRef" in task else task.get("taskSpec")
        if task_spec is None:
            problems.append(f"{where}: taskRef {task['taskRef']['name']} names no Task")
            continue
        problems += [f"{where}: {p}" for p in _pipeline_task(task, task_spec, limit)]
    return problems + _graph(spec["tasks"])


def _pipeline_task(task: dict[str, Any], spec: dict[str, Any], limit: int) -> list[str]:
    """The params a PipelineTask gives (``params`` and each matrix combination) against the Task's, and its
    matrix's combinations against the limit (an include-only matrix: one combination per entry)."""
    problems = []
    declared = {p["name"]: p for p in spec.get("params", [])}
    given = {p["name"] for p in task.get("params", [])}
    matrix = task.get("matrix")
    combinations = [set()] if not matrix else [{p["name"] for p in entry["params"]} for entry in matrix["include"]]
    if matrix:
        if set(matrix) != {"include"}:
            problems.append("a matrix of params as well as include (the checks here read include-only matrices)")
        if len(matrix["include"]) > limit:
            problems.append(f"matrix: {len(matrix['include'])} combinations, above the limit {limit}")
        for entry in matrix["include"]:
            names = [p["name"] for p in entry["params"]]
            if len(set(names)) != len(names) or given & set(names):
                problems.append(f"matrix include {entry.get('name')}: a param twice, or in params too")
            if any(declared.get(n, {}).get("type", "string") != "string" or n not in declared for n in names):
                problems.append(f"matrix include {entry.get('name')}: a param the Task has no string param for")
    for name in given - set(declared):
        problems.append(f"param {name}: the Task declares none")
    required = {n for n, p in declared.items() if "default" not in p}
    for combination in combinations:
        if required - given - combination:
            problems.append(f"required params not given: {sorted(required - given - combination)}")
    for workspace in spec.get("workspaces", []):
        bound = {b["name"] for b in task.get("workspaces", [])}
        if not workspace.get("optional") and workspace["name"] not in bound:
            problems.append(f"workspace {workspace['name']}: required by the Task, not bound")
    return problems


def _graph(tasks: list[dict[str, Any]]) -> list[str]:
    after = {t["name"]: set(t.get("runAfter", [])) for t in tasks}
    done: set[str] = set()
    while len(done) < len(after):
        ready = {n for n, deps in after.items() if n not in done and deps <= done}
        if not ready:
            return [f"a cycle among {sorted(set(after) - done)}"]
        done |= ready
    return []


def tekton_before(tasks: list[dict[str, Any]], name: str) -> set[str]:
    """Every PipelineTask that ``name`` runs after, directly or not."""
    after = {t["name"]: set(t.get("runAfter", [])) for t in tasks}
    seen: set[str] = set()
    todo = list(after[name])
    while todo:
        current = todo.pop()
        if current not in seen:
            seen.add(current)
            todo += after[current]
    return seen


# --- what Argo's validator checks ---------------------------------------------------------------------------


def argo_problems(document: dict[str, Any]) -> list[str]:
    """Templates and the steps' references to them, arguments against inputs, every ``{{...}}`` against what is in
    scope, ``withParam`` rows against the ``{{item.*}}`` keys used, volume mounts, parallelism."""
    spec = document["spec"]
    problems = []
    arguments = {p["name"]: p for p in spec.get("arguments", {}).get("parameters", [])}
    templates = {t["name"]: t for t in spec["templates"]}
    if len(templates) != len(spec["templates"]):
        problems.append("template names repeat")
    if spec.get("entrypoint") not in templates:
        problems.append(f"entrypoint {spec.get('entrypoint')} names no template")
    if not isinstance(spec.get("parallelism", 1), int) or spec.get("parallelism", 1) < 1:
        problems.append("parallelism is not a positive integer")
    volumes = {v["name"] for v in spec.get("volumes", [])}
    for template in spec["templates"]:
        where = f"template {template['name']}"
        inputs = {p["name"] for p in template.get("inputs", {}).get("parameters", [])}
        scope = {f"inputs.parameters.{n}" for n in inputs} | {f"workflow.parameters.{n}" for n in arguments}
        problems += [f"{where}: {p}" for p in _argo_steps(template, templates, arguments, scope)]
        container = template.get("container", {})
        for mount in container.get("volumeMounts", []):
            if mount["name"] not in volumes:
                problems.append(f"{where}: volumeMount {mount['name']} names no volume")
        if any("{{" in arg for arg in container.get("args", [])):
            problems.append(f"{where}: a {{{{ in its script (Argo would substitute into the shell)")
        for variable in ARGO_VARIABLE.findall(json.dumps(container)):
            if variable not in scope:
                problems.append(f"{where}: {{{{{variable}}}}} is not in scope")
    return problems


def _argo_steps(template: dict[str, Any], templates: dict[str, Any], arguments: dict[str, Any],
                scope: set[str]) -> list[str]:
    problems, earlier = [], set()
    for group in template.get("steps", []):
        for step in group:
            called = templates.get(step["template"])
            if called is None:
                problems.append(f"step {step['name']}: template {step['template']} does not exist")
                continue
            wanted = {p["name"] for p in called.get("inputs", {}).get("parameters", []) if "default" not in p}
            given = {p["name"] for p in step.get("arguments", {}).get("parameters", [])}
            if wanted != given:
                problems.append(f"step {step['name']}: gives {sorted(given)}, the template takes {sorted(wanted)}")
            problems += _with_param(step, arguments, scope)
        earlier |= {f"steps.{step['name']}.outputs.parameters" for step in group
                    if templates.get(step["template"], {}).get("outputs")}
    for output in template.get("outputs", {}).get("parameters", []):
        if "parameter" not in output["valueFrom"]:
            continue  # a file's content (valueFrom.path)
        reference = ARGO_VARIABLE.fullmatch(output["valueFrom"]["parameter"])
        if reference is None or reference.group(1) not in earlier:
            problems.append(f"output {output['name']}: refers to no earlier step's outputs")
    return problems


def _with_param(step: dict[str, Any], arguments: dict[str, Any], scope: set[str]) -> list[str]:
    """``withParam`` names a workflow argument whose value is a JSON list of objects that have every ``item`` key
    the step's arguments use."""
    source = ARGO_VARIABLE.fullmatch(step.get("withParam", ""))
    if source is None or source.group(1) not in scope or not source.group(1).startswith("workflow.parameters."):
        return [f"step {step['name']}: withParam is not a workflow parameter"]
    rows = json.loads(arguments[source.group(1).split(".", 2)[2]]["value"])
    if not isinstance(rows, list) or not all(isinstance(r, dict) for r in rows):
        return [f"step {step['name']}: withParam's value is not a JSON list of objects"]
    problems = []
    for variable in ARGO_VARIABLE.findall(json.dumps(step.get("arguments", {}))):
        key = variable[len("item."):] if variable.startswith("item.") else None
        if key is None and variable not in scope:
            problems.append(f"step {step['name']}: {{{{{variable}}}}} is not in scope")
        elif key is not None and not all(key in row for row in rows):
            problems.append(f"step {step['name']}: a row has no {key}")
    return problems
