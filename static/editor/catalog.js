/*
 * catalog.js: the engine's catalog of condition types, step kinds and actions, as the page
 * embeds it (`json_script`, id `branchline-catalog`), and the labels drawn from it: a
 * condition's short summary (`len < 200`, `judge ≥ 8`, `default`) and a step kind's label.
 *
 * Summaries follow the catalog's one rule, which the engine's Python renderer follows too
 * (`workflows.engine.condition_summary`): a type's summary template for the operator (or
 * "*"), `{name}` the document's value of field `name` through the field's `display` map,
 * `{name!raw}` that value as written, `{symbol}` the operator's symbol; `a and b`, `a or b` (nested ones in parentheses),
 * `not (a)`; cut to 40 characters.
 */

const MAX_SUMMARY = 40;
const PLACEHOLDER = /\{(\w+)(!raw)?\}/g;
let loaded = null;

function catalog() {
  if (loaded === null) {
    const script = document.getElementById("branchline-catalog");
    const data = script ? JSON.parse(script.textContent) : {};
    const types = {};
    (data.conditions || []).forEach((spec) => {
      [spec.type].concat(spec.aliases || []).forEach((name) => {
        types[name] = spec;
      });
    });
    const steps = {};
    (data.steps || []).forEach((spec) => {
      steps[spec.kind] = spec;
    });
    loaded = {
      types: types,
      logical: data.logical || [],
      steps: steps,
      kinds: (data.steps || []).map((spec) => spec.kind),
      repeating: (data.actions || []).filter((a) => a.repeats).map((a) => a.name),
      actionAliases: data.action_aliases || {},
      bands: data.priority_bands || [],
    };
  }
  return loaded;
}

function has(object, key) {
  return Object.prototype.hasOwnProperty.call(object, key);
}

/** Return a document value as summaries write it ("" when missing, lists joined with |). */
function valueText(value) {
  if (value === undefined || value === null) return "";
  if (Array.isArray(value)) return value.map(valueText).join("|");
  if (typeof value === "object") return JSON.stringify(value);
  return String(value);
}

/** Return `and` / `or` / `not` when a condition combines others, else null. */
function combinator(type, operator) {
  const logical = catalog().logical;
  if (typeof type === "string" && logical.indexOf(type) >= 0) return type;
  const plain = typeof type === "string" && has(catalog().types, type);
  if (typeof operator === "string" && logical.indexOf(operator) >= 0 && !plain) return operator;
  return null;
}

/** Return a field's value: under its name, else under the first of its aliases given. */
function fieldValue(field, when) {
  const keys = [field.name].concat(field.aliases || []);
  const key = keys.find((k) => when[k] !== undefined && when[k] !== null);
  return key === undefined ? undefined : when[key];
}

// Fill a summary-like template with the condition's values (`extra` names more placeholders).
function fillTemplate(spec, when, op, template, extra) {
  const canonical = has(spec.operator_aliases, op) ? spec.operator_aliases[op] : op;
  const operator = spec.operators.find((o) => o.name === canonical);
  return template.replace(PLACEHOLDER, (match, key, raw) => {
    if (extra && has(extra, key)) return extra[key];
    if (key === "symbol") return operator ? operator.symbol : op;
    const field = spec.fields.find((f) => f.name === key);
    const text = valueText(field ? fieldValue(field, when) : when[key]);
    return field && !raw && has(field.display, text) ? field.display[text] : text;
  });
}

function plainSummary(spec, when, op) {
  const canonical = has(spec.operator_aliases, op) ? spec.operator_aliases[op] : op;
  const operator = spec.operators.find((o) => o.name === canonical);
  const name = operator ? operator.name : op;
  const template = has(spec.summary, name) ? spec.summary[name] : spec.summary["*"] || "";
  return fillTemplate(spec, when, op, template);
}

function summaryOf(when, nested) {
  if (!when || typeof when !== "object" || Array.isArray(when)) return "?";
  const type = when.type;
  const op = when.operator;
  const logical = combinator(type, op);
  if (logical) {
    const parts = Array.isArray(when.conditions) ? when.conditions.map((c) => summaryOf(c, true)) : [];
    if (logical === "not") return "not (" + (parts.length ? parts[0] : "") + ")";
    const inner = parts.join(" " + logical + " ");
    return nested ? "(" + inner + ")" : inner;
  }
  const spec = typeof type === "string" && has(catalog().types, type) ? catalog().types[type] : null;
  if (!spec) return type === undefined || type === null || type === "" ? "?" : valueText(type);
  return plainSummary(spec, when, typeof op === "string" ? op : "");
}

/** Return a short readable summary of a condition: `len < 200`, `judge ≥ 8`, `default`. */
export function summarize(when) {
  // Cut by characters, not UTF-16 units, as the Python renderer does.
  const chars = Array.from(summaryOf(when, false));
  return chars.length <= MAX_SUMMARY ? chars.join("") : chars.slice(0, MAX_SUMMARY - 1).join("") + "…";
}

/**
 * Return how a branch with condition `when` reads before "→ target": its type's `words`
 * template (`if {summary}`, `otherwise`, `{value}`), or "if " and the summary of a combination.
 */
export function conditionWords(when) {
  const summary = summarize(when);
  const type = when && typeof when === "object" ? when.type : undefined;
  const spec = typeof type === "string" && has(catalog().types, type) ? catalog().types[type] : null;
  if (!spec || !spec.words || combinator(type, when.operator)) return "if " + summary;
  return fillTemplate(spec, when, typeof when.operator === "string" ? when.operator : "", spec.words, { summary: summary });
}

/** Return the label of a step kind, as the canvas shows it. */
export function kindLabel(kind) {
  const spec = catalog().steps[kind];
  return spec ? spec.label : kind;
}

/** Return the step kinds, in the catalog's order. */
export function stepKinds() {
  return catalog().kinds;
}

/** Tell whether a step kind takes field `name` (an actor, a prompt, …). */
export function kindTakes(kind, name) {
  const spec = catalog().steps[kind];
  return !!spec && spec.fields.some((f) => f.name === name);
}

/** Return the canonical name of an action (aliases resolved). */
export function canonicalAction(action) {
  const name = (typeof action === "string" ? action : "").trim().toUpperCase();
  return has(catalog().actionAliases, name) ? catalog().actionAliases[name] : name;
}

/** Tell whether a condition always holds: of the `default` type, under any of its names. */
export function alwaysHolds(when) {
  const type = when && typeof when === "object" ? when.type : undefined;
  return typeof type === "string" && has(catalog().types, type) && catalog().types[type].type === "default";
}

/** Return the lowest priority of the band `name` (`flow`: 51), or 1 for a band not known. */
export function bandStart(name) {
  const band = catalog().bands.find((b) => b.name === name);
  return band ? band.low : 1;
}

/** Tell whether an action runs the step again (the branch is drawn as a loop). */
export function repeats(action) {
  return catalog().repeating.indexOf(canonicalAction(action)) >= 0;
}
