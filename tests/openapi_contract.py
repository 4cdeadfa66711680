"""Reading and comparing OpenAPI documents: the authored contract against what a side generates.

Used by the connector and emulator tests. The comparison looks at what breaks a client when it drifts:
paths and methods, parameters (where, name, required), request bodies and success responses (required
fields, recursively through objects and arrays) and the documented status codes.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

METHODS = ("get", "put", "post", "delete", "patch")


def operations(doc: dict[str, Any]) -> Iterator[tuple[str, str, dict[str, Any]]]:
    """(METHOD, path, operation) for every operation under ``paths``."""
    for path, item in doc.get("paths", {}).items():
        for method in METHODS:
            if method in item:
                yield method.upper(), path, item[method]


def resolve(doc: dict[str, Any], node: Any) -> Any:
    """Follow local ``$ref`` pointers until a node without one."""
    while isinstance(node, dict) and "$ref" in node:
        ref = node["$ref"]
        if not ref.startswith("#/"):
            raise ValueError(f"only local references are supported: {ref}")
        target: Any = doc
        for part in ref[2:].split("/"):
            target = target[part.replace("~1", "/").replace("~0", "~")]
        node = target
    return node


def _non_null(doc: dict[str, Any], schema: Any) -> Any:
    """``X`` from ``anyOf/oneOf [X, null]`` (how optional and nullable fields are written)."""
    schema = resolve(doc, schema)
    for key in ("anyOf", "oneOf"):
        options = [resolve(doc, s) for s in schema.get(key, [])] if isinstance(schema, dict) else []
        real = [s for s in options if s.get("type") != "null"]
        if options and len(real) == 1:
            return real[0]
    return schema


def flatten(doc: dict[str, Any], schema: Any) -> dict[str, Any]:
    """One object view of a schema: ``allOf`` parts merged; ``properties`` and ``required`` combined."""
    schema = _non_null(doc, schema)
    if not isinstance(schema, dict):
        return {}
    if "allOf" not in schema:
        return schema
    merged: dict[str, Any] = {k: v for k, v in schema.items() if k != "allOf"}
    properties: dict[str, Any] = dict(schema.get("properties", {}))
    required: set[str] = set(schema.get("required", []))
    for part in schema["allOf"]:
        flat = flatten(doc, part)
        for name, prop in flat.get("properties", {}).items():
            properties.setdefault(name, prop)
        required |= set(flat.get("required", []))
        for key in ("type", "items"):
            if key in flat:
                merged.setdefault(key, flat[key])
    merged["properties"] = properties
    merged["required"] = sorted(required)
    return merged


def _compare_schema(
    where: str, doc_a: dict[str, Any], a: Any, doc_b: dict[str, Any], b: Any, depth: int = 0
) -> list[str]:
    if depth > 8:
        return []
    fa, fb = flatten(doc_a, a), flatten(doc_b, b)
    problems: list[str] = []
    if "items" in fa or "items" in fb:
        if "items" in fa and "items" in fb:
            problems += _compare_schema(f"{where}[]", doc_a, fa["items"], doc_b, fb["items"], depth + 1)
        return problems
    req_a, req_b = set(fa.get("required", [])), set(fb.get("required", []))
    if req_a != req_b:
        problems.append(
            f"{where}: required fields differ: only in contract {sorted(req_a - req_b)}, "
            f"only in generated {sorted(req_b - req_a)}"
        )
    props_a, props_b = fa.get("properties", {}), fb.get("properties", {})
    for name in sorted(set(props_a) & set(props_b)):
        problems += _compare_schema(f"{where}.{name}", doc_a, props_a[name], doc_b, props_b[name], depth + 1)
    return problems


def _parameters(doc: dict[str, Any], op: dict[str, Any]) -> set[tuple[str, str, bool]]:
    found = set()
    for p in op.get("parameters", []):
        p = resolve(doc, p)
        found.add((p["in"], p["name"], bool(p.get("required", False))))
    return found


def _json_schema(doc: dict[str, Any], holder: dict[str, Any] | None) -> Any:
    content = (resolve(doc, holder) or {}).get("content", {})
    return content.get("application/json", {}).get("schema")


def compare(contract: dict[str, Any], generated: dict[str, Any], *, prefix: str = "/v1/") -> list[str]:
    """Every difference between the contract and a generated document, as readable lines (empty = none).

    Only paths starting with ``prefix`` of the generated document are compared (an emulator's admin or
    auth paths are not part of the API contract).
    """
    ours = {(m, p): op for m, p, op in operations(contract)}
    theirs = {(m, p): op for m, p, op in operations(generated) if p.startswith(prefix)}
    problems = [f"{m} {p}: in the contract, not generated" for m, p in sorted(set(ours) - set(theirs))]
    problems += [f"{m} {p}: generated, not in the contract" for m, p in sorted(set(theirs) - set(ours))]
    for key in sorted(set(ours) & set(theirs)):
        name = " ".join(key)
        a, b = ours[key], theirs[key]
        pa, pb = _parameters(contract, a), _parameters(generated, b)
        if pa != pb:
            problems.append(
                f"{name}: parameters differ: only in contract {sorted(pa - pb)}, "
                f"only in generated {sorted(pb - pa)}"
            )
        sa, sb = set(a.get("responses", {})), set(b.get("responses", {}))
        if sa != sb:
            problems.append(
                f"{name}: status codes differ: only in contract {sorted(sa - sb)}, "
                f"only in generated {sorted(sb - sa)}"
            )
        body_a, body_b = a.get("requestBody"), b.get("requestBody")
        if (body_a is None) != (body_b is None):
            problems.append(f"{name}: request body only in {'contract' if body_a else 'generated'}")
        elif body_a is not None and body_b is not None:
            ra = bool(resolve(contract, body_a).get("required", False))
            rb = bool(resolve(generated, body_b).get("required", False))
            if ra != rb:
                problems.append(f"{name}: request body required: contract {ra}, generated {rb}")
            problems += _compare_schema(
                f"{name} request",
                contract,
                _json_schema(contract, body_a),
                generated,
                _json_schema(generated, body_b),
            )
        for status in sorted(s for s in sa & sb if s.startswith("2")):
            schema_a = _json_schema(contract, a["responses"][status])
            schema_b = _json_schema(generated, b["responses"][status])
            if (schema_a is None) != (schema_b is None):
                problems.append(
                    f"{name} {status}: response body only in {'contract' if schema_a else 'generated'}"
                )
            elif schema_a is not None:
                problems += _compare_schema(f"{name} {status}", contract, schema_a, generated, schema_b)
    return problems
