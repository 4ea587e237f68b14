"""The management API's reference page: one self-contained HTML file (no CDN, no build step).

It holds no data: in the browser it asks for the API key once per tab, loads `openapi.json` with
it, and renders every operation (method, path, summary, parameters, request body, responses) and
every schema the operations use. Works offline and behind a private API Gateway alike.
"""

from __future__ import annotations

REFERENCE_PAGE = """<!doctype html>
<html lang="en"><head><meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>Waypoint management API</title>
<style>
body { font: 15px/1.45 system-ui, sans-serif; margin: 0 auto; max-width: 980px; padding: 1em;
       color: #1d232a; }
h1 { font-size: 1.4em; } h2 { font-size: 1.1em; margin-top: 2em; }
.op { border: 1px solid #d0d7de; border-radius: 6px; margin: .6em 0; }
.op summary { cursor: pointer; padding: .45em .7em; font-family: ui-monospace, monospace; }
.op .body { padding: 0 .9em .6em; }
.m { display: inline-block; min-width: 4.5em; font-weight: 600; }
.GET { color: #0969da; } .POST { color: #1a7f37; } .DELETE { color: #cf222e; }
.PUT, .PATCH { color: #9a6700; }
table { border-collapse: collapse; margin: .3em 0; } td, th { border-bottom: 1px solid #eee;
       padding: .2em .6em; text-align: left; vertical-align: top; }
code { font-family: ui-monospace, monospace; font-size: .92em; }
#error { color: #cf222e; }
</style></head>
<body>
<h1 id="title">Waypoint management API</h1>
<p>Every operation needs the <code>X-Api-Key</code> header. <a href="openapi.json">openapi.json</a>
(with the key) is the machine-readable schema.</p>
<p id="error"></p>
<div id="operations"></div>
<h2>Schemas</h2>
<div id="schemas"></div>
<script>
"use strict";
// The schema is behind the API key like every operation: ask for it once per browser tab.
const stored = sessionStorage.getItem("waypoint-api-key");
const key = stored || window.prompt("X-Api-Key of this management API") || "";
sessionStorage.setItem("waypoint-api-key", key);

function el(tag, attrs, ...children) {
  const node = document.createElement(tag);
  for (const [name, value] of Object.entries(attrs || {})) node.setAttribute(name, value);
  for (const child of children) {
    node.append(child instanceof Node ? child : document.createTextNode(String(child ?? "")));
  }
  return node;
}
function typeOf(schema) {
  if (!schema) return "";
  if (schema.$ref) return schema.$ref.split("/").pop();
  if (schema.anyOf) return schema.anyOf.map(typeOf).join(" | ");
  if (schema.type === "array") return typeOf(schema.items) + "[]";
  if (schema.enum) return schema.enum.map((v) => JSON.stringify(v)).join(" | ");
  return schema.type || "object";
}
function rows(headers, items) {
  return el("table", {}, el("tr", {}, ...headers.map((h) => el("th", {}, h))),
    ...items.map((cells) => el("tr", {}, ...cells.map((c) => el("td", {}, c)))));
}
function operation(path, method, op) {
  const body = el("div", { class: "body" });
  if (op.description) body.append(el("p", {}, op.description));
  const params = op.parameters || [];
  if (params.length) body.append(el("p", {}, "Parameters"), rows(["name", "in", "type", "required"],
    params.map((p) => [el("code", {}, p.name), p.in, typeOf(p.schema), p.required ? "yes" : ""])));
  const content = op.requestBody && op.requestBody.content;
  if (content) body.append(el("p", {}, "Request body: ",
    ...Object.entries(content).map(([mime, c]) => el("code", {}, mime + " " + typeOf(c.schema)))));
  const responses = Object.entries(op.responses || {});
  if (responses.length) body.append(el("p", {}, "Responses"), rows(["status", "meaning", "body"],
    responses.map(([status, r]) => [status, r.description || "",
      typeOf(((r.content || {})["application/json"] || {}).schema)])));
  const upper = method.toUpperCase();
  return el("details", { class: "op", "data-path": path, "data-method": upper },
    el("summary", {}, el("span", { class: "m " + upper }, upper), " " + path + "  ",
      el("span", {}, op.summary || "")), body);
}
function schemaTable(name, schema) {
  const props = Object.entries(schema.properties || {});
  const required = new Set(schema.required || []);
  return el("details", { class: "op", id: "schema-" + name },
    el("summary", {}, name), el("div", { class: "body" },
      el("p", {}, schema.description || ""),
      props.length ? rows(["field", "type", "required"],
        props.map(([p, s]) => [el("code", {}, p), typeOf(s), required.has(p) ? "yes" : ""])) : ""));
}
fetch("openapi.json", { headers: { "X-Api-Key": key } })
  .then((response) => {
    if (!response.ok) {
      sessionStorage.removeItem("waypoint-api-key");
      throw new Error("the schema answered " + response.status + ": reload to enter the key again");
    }
    return response.json();
  })
  .then((spec) => {
    document.getElementById("title").textContent = spec.info.title + " " + spec.info.version;
    const operations = document.getElementById("operations");
    for (const [path, methods] of Object.entries(spec.paths || {})) {
      for (const [method, op] of Object.entries(methods)) operations.append(operation(path, method, op));
    }
    const schemas = document.getElementById("schemas");
    for (const [name, s] of Object.entries((spec.components || {}).schemas || {})) {
      schemas.append(schemaTable(name, s));
    }
  })
  .catch((error) => { document.getElementById("error").textContent = error.message; });
</script></body></html>
"""
