// A small, offline API reference: renders /openapi.json (FastAPI's own /docs would load Swagger UI from a CDN).
"use strict";

(function () {
  const el = (tag, props, ...children) => {
    const node = document.createElement(tag);
    Object.assign(node, props || {});
    for (const child of children) node.append(child);
    return node;
  };
  const refName = (ref) => ref.split("/").pop();

  function typeOf(schema) {
    if (!schema) return "any";
    if (schema.$ref) return refName(schema.$ref);
    if (schema.anyOf) return schema.anyOf.map(typeOf).join(" | ");
    if (schema.enum) return schema.enum.map((v) => JSON.stringify(v)).join(" | ");
    if (schema.const !== undefined) return JSON.stringify(schema.const);
    if (schema.type === "array") return typeOf(schema.items) + "[]";
    if (schema.type === "object" && schema.additionalProperties) return "object of " + typeOf(schema.additionalProperties);
    return schema.type || "any";
  }

  function constraints(schema) {
    const out = [];
    const bounds = [["minimum", ">="], ["exclusiveMinimum", ">"], ["maximum", "<="], ["exclusiveMaximum", "<"],
      ["minLength", "min length"], ["maxLength", "max length"], ["minItems", "min items"], ["maxItems", "max items"]];
    const parts = [schema].concat(schema.anyOf || []);
    for (const part of parts) {
      for (const [key, label] of bounds) if (part[key] !== undefined) out.push(label + " " + part[key]);
    }
    return out.join(", ");
  }

  function schemaTable(schema) {
    const props = schema.properties || {};
    const required = new Set(schema.required || []);
    const table = el("table", {}, el("tr", {}, el("th", { textContent: "field" }), el("th", { textContent: "type" }),
      el("th", { textContent: "default" }), el("th", { textContent: "limits" }), el("th", { textContent: "description" })));
    for (const [name, prop] of Object.entries(props)) {
      const def = prop.default === undefined ? (required.has(name) ? "required" : "") : JSON.stringify(prop.default);
      table.append(el("tr", {},
        el("td", {}, el("code", { textContent: name })),
        el("td", { textContent: typeOf(prop) }),
        el("td", { textContent: def }),
        el("td", { textContent: constraints(prop) }),
        el("td", { textContent: prop.description || "" })));
    }
    return table;
  }

  function render(spec) {
    const endpoints = document.getElementById("endpoints");
    for (const [path, methods] of Object.entries(spec.paths)) {
      for (const [method, op] of Object.entries(methods)) {
        const box = el("section", { className: "endpoint" },
          el("h3", {}, el("span", { className: "method " + method, textContent: method.toUpperCase() }), path));
        if (op.summary) box.append(el("p", { textContent: op.summary }));
        if (op.description) box.append(el("p", { className: "hint", textContent: op.description }));
        const body = op.requestBody && op.requestBody.content["application/json"];
        if (body) box.append(el("p", {}, "Request body: ", el("code", { textContent: typeOf(body.schema) })));
        const rows = Object.entries(op.responses || {}).map(([status, response]) => {
          const content = response.content && response.content["application/json"];
          return el("tr", {}, el("td", { textContent: status }), el("td", { textContent: response.description || "" }),
            el("td", {}, el("code", { textContent: content ? typeOf(content.schema) : "" })));
        });
        box.append(el("table", {}, el("tr", {}, el("th", { textContent: "status" }), el("th", { textContent: "meaning" }),
          el("th", { textContent: "body" })), ...rows));
        endpoints.append(box);
      }
    }
    const schemas = document.getElementById("schemas");
    for (const [name, schema] of Object.entries((spec.components || {}).schemas || {})) {
      const box = el("section", { className: "schema", id: "schema-" + name }, el("h3", { textContent: name }));
      if (schema.description) box.append(el("p", { className: "hint", textContent: schema.description }));
      box.append(schemaTable(schema));
      schemas.append(box);
    }
  }

  document.addEventListener("DOMContentLoaded", async () => {
    try {
      const response = await fetch("/openapi.json");
      render(await response.json());
    } catch (err) {
      const box = document.getElementById("error");
      box.textContent = "Could not load /openapi.json: " + err.message;
      box.hidden = false;
    }
  });
})();
