/*
 * recipe-graph.js: the one module that converts between recipe format v1 and Cytoscape.
 *
 * A step is a node whose data keeps the step document (without its branches and position);
 * a branch is an edge whose data keeps the branch document as written. Saving turns the
 * graph back into the document, so a recipe that is opened and saved untouched comes back
 * unchanged. Edges are drawn where a branch *leads*: @repeat and the repeat actions as a
 * self-loop, @end and END_RECIPE to the End terminal, @complete to the Complete terminal.
 */
(function (root) {
  "use strict";

  var END_ID = "t-end";
  var COMPLETE_ID = "t-complete";
  var REPEAT_ACTIONS = ["REQUEST_MORE_DETAIL", "ENHANCE_PROMPT", "RETRY_WITH_DIFFERENT_ACTOR"];
  var ACTION_ALIASES = { RETRY_DIFFERENT_ACTOR: "RETRY_WITH_DIFFERENT_ACTOR", HUMAN_REVIEW_NEEDED: "HUMAN_REVIEW" };
  var LOGICAL = ["and", "or", "not"];
  var PLAIN_TYPES = [
    "pattern_match", "length_check", "ai_evaluation", "human_decision", "execution_timeout",
    "execution_error", "field_compare", "check_count", "content_type", "route_selected", "default",
  ];
  var KIND_LABELS = { llm: "LLM", human: "Human", decision_tree: "Decision tree", classify: "Classify" };
  var SYMBOLS = {
    less_than: "<", less_equal: "≤", greater_than: ">", greater_equal: "≥", equals: "=",
    not_equals: "≠", less_than_or_equal: "≤", greater_than_or_equal: "≥",
  };
  var MAX_SUMMARY = 40;
  var counter = 0;

  function newId(prefix) {
    counter += 1;
    return prefix + "-" + counter.toString(36) + "-" + Math.random().toString(36).slice(2, 7);
  }

  function clone(value) {
    return value === undefined ? undefined : JSON.parse(JSON.stringify(value));
  }

  function text(value) {
    return typeof value === "string" ? value : "";
  }

  function canonicalAction(action) {
    var name = text(action).trim().toUpperCase();
    return ACTION_ALIASES[name] || name;
  }

  function logicalType(when) {
    if (LOGICAL.indexOf(when.type) >= 0) return when.type;
    if (LOGICAL.indexOf(when.operator) >= 0 && PLAIN_TYPES.indexOf(when.type) < 0) return when.operator;
    return null;
  }

  function number(value) {
    return value === undefined || value === null ? "?" : String(value);
  }

  function summaryOf(when, depth) {
    if (!when || typeof when !== "object" || Array.isArray(when)) return "?";
    var logical = logicalType(when);
    if (logical) {
      var parts = (Array.isArray(when.conditions) ? when.conditions : []).map(function (c) {
        return summaryOf(c, depth + 1);
      });
      if (logical === "not") return "not (" + (parts[0] || "") + ")";
      var inner = parts.join(" " + logical + " ");
      return depth ? "(" + inner + ")" : inner;
    }
    var kind = when.type === "check_count" ? "field_compare" : when.type;
    var op = when.operator || "";
    var value = when.value;
    var symbol = SYMBOLS[op] || op;
    switch (kind) {
      case "pattern_match": {
        var flags = text(when.flags);
        var t = value === undefined || value === null ? "" : String(value);
        return ({
          regex_match: "/" + t + "/" + flags,
          regex_not_match: "not /" + t + "/" + flags,
          contains: 'has "' + t + '"',
          not_contains: 'lacks "' + t + '"',
          equals: '= "' + t + '"',
        })[op] || "/" + t + "/";
      }
      case "length_check":
        return "len " + symbol + " " + number(value) + (when.unit === "words" ? " words" : "");
      case "ai_evaluation":
        return (when.evaluator || "judge") + " " + symbol + " " + number(value);
      case "field_compare":
        return (when.field || "?") + " " + symbol + " " + number(value);
      case "human_decision":
        return "human: " + number(value);
      case "execution_timeout":
        return value === undefined || value === null || value === true || value === "true" ? "timeout" : "no timeout";
      case "execution_error":
        if (op === "contains") return 'error has "' + number(value) + '"';
        return value === undefined || value === null || value === true || value === "true" ? "error" : "no error";
      case "content_type":
        return op === "is_not" ? "is not " + number(value) : "is " + number(value);
      case "route_selected":
        return "route: " + number(value);
      case "default":
        return "default";
      default:
        return String(kind || "?");
    }
  }

  /** Return a short readable summary of a condition: `len < 200`, `judge ≥ 8`, `default`. */
  function summarize(when) {
    var s = summaryOf(when, 0);
    return s.length <= MAX_SUMMARY ? s : s.slice(0, MAX_SUMMARY - 1) + "…";
  }

  function edgeLabel(branch) {
    return number(branch.priority) + " · " + summarize(branch.when) + "\n" + text(branch.action);
  }

  function nodeLabel(step) {
    var kind = KIND_LABELS[step.kind || "llm"] || step.kind;
    var actor = step.actor ? step.actor : step.kind === "decision_tree" ? "rules" : "no actor";
    return text(step.name) + "\n" + kind + " · " + actor;
  }

  /** Return where a branch leads as drawn: a step key, "@repeat", "@end", "@complete" or "". */
  function visualTarget(branch, stepKey, lastKey) {
    var action = canonicalAction(branch.action);
    var target = text(branch.target);
    if (REPEAT_ACTIONS.indexOf(action) >= 0) return "@repeat";
    if (action === "END_RECIPE") return "@end";
    if (action === "SKIP_TO_END" && !target) return lastKey;
    if (target === stepKey) return "@repeat";
    return target;
  }

  function stepData(step, order) {
    var data = clone(step);
    delete data.branches;
    delete data.position;
    return data;
  }

  function terminalNodes() {
    return [
      { group: "nodes", data: { id: END_ID, kind: "terminal", label: "End\n@end", terminal: "@end" }, classes: "terminal end" },
      { group: "nodes", data: { id: COMPLETE_ID, kind: "terminal", label: "Complete\n@complete", terminal: "@complete" }, classes: "terminal complete" },
    ];
  }

  /**
   * Turn a recipe document into Cytoscape elements.
   * Returns {elements, meta, needsLayout}: `meta` is the document without its steps.
   */
  function toElements(doc) {
    var meta = clone(doc) || {};
    var steps = (Array.isArray(meta.steps) ? meta.steps : []).filter(function (s) {
      return s && typeof s === "object" && !Array.isArray(s);
    });
    delete meta.steps;
    var nodes = [];
    var edges = [];
    var idByKey = {};
    var positioned = 0;
    steps.forEach(function (step, i) {
      var id = newId("s");
      if (typeof step.key === "string" && !(step.key in idByKey)) idByKey[step.key] = id;
      var pos = step.position && typeof step.position.x === "number" && typeof step.position.y === "number"
        ? { x: step.position.x, y: step.position.y } : null;
      if (pos) positioned += 1;
      var data = stepData(step);
      var node = {
        group: "nodes",
        data: {
          id: id, kind: "step", key: text(step.key), order: i, step: data,
          origPosition: step.position === undefined ? null : clone(step.position),
          moved: false, label: nodeLabel(data), stepKind: data.kind || "llm",
        },
        classes: "step kind-" + (data.kind || "llm") + (i === 0 ? " first" : ""),
      };
      if (pos) node.position = pos;
      nodes.push(node);
    });
    var lastKey = nodes.length ? nodes[nodes.length - 1].data.key : "";
    var missing = {};
    nodes.forEach(function (node, i) {
      var step = steps[i];
      var source = node.data.id;
      (Array.isArray(step.branches) ? step.branches : []).forEach(function (branch, j) {
        if (!branch || typeof branch !== "object") return;
        var vt = visualTarget(branch, node.data.key, lastKey);
        var target;
        if (vt === "@repeat") target = source;
        else if (vt === "@end") target = END_ID;
        else if (vt === "@complete") target = COMPLETE_ID;
        else if (vt && idByKey[vt]) target = idByKey[vt];
        else {
          target = "m-" + (vt || "none") + "-" + source;
          if (!missing[target]) {
            missing[target] = {
              group: "nodes",
              data: { id: target, kind: "missing", label: vt ? "missing: " + vt : "no target" },
              classes: "missing",
            };
            if (node.position) missing[target].position = { x: node.position.x + 220, y: node.position.y + 90 };
          }
        }
        edges.push({
          group: "edges",
          data: {
            id: newId("b"), kind: "branch", source: source, target: target,
            branch: clone(branch), seq: j, label: edgeLabel(branch),
          },
          classes: "branch",
        });
      });
    });
    var extra = Object.keys(missing).map(function (k) { return missing[k]; });
    var elements = nodes.concat(terminalNodes(), extra, edges);
    return {
      elements: elements,
      meta: meta,
      needsLayout: nodes.length > 0 && positioned < nodes.length,
      positionedCount: positioned,
    };
  }

  function stepNodes(cy) {
    return cy.nodes('[kind = "step"]').sort(function (a, b) {
      return a.data("order") - b.data("order");
    });
  }

  function branchEdges(node) {
    return node.connectedEdges('[kind = "branch"]').filter(function (e) {
      return e.source().same(node);
    }).sort(function (a, b) {
      var pa = a.data("branch").priority, pb = b.data("branch").priority;
      var na = typeof pa === "number" ? pa : Infinity, nb = typeof pb === "number" ? pb : Infinity;
      return na !== nb ? na - nb : a.data("seq") - b.data("seq");
    });
  }

  function roundPosition(p) {
    return { x: Math.round(p.x), y: Math.round(p.y) };
  }

  /**
   * Turn the graph back into a recipe document.
   * Returns {document, paths, elements}: `paths` maps element ids to document paths
   * (`steps[2]`, `steps[0].branches[1]`), `elements` maps paths back to ids.
   */
  function toDocument(cy, meta) {
    var paths = {};
    var elements = {};
    var steps = stepNodes(cy).map(function (node, i) {
      var step = clone(node.data("step"));
      if (node.data("moved")) {
        step.position = roundPosition(node.position());
      } else if (node.data("origPosition") !== null && node.data("origPosition") !== undefined) {
        step.position = clone(node.data("origPosition"));
      }
      step.branches = branchEdges(node).map(function (edge, j) {
        var path = "steps[" + i + "].branches[" + j + "]";
        paths[edge.id()] = path;
        elements[path] = edge.id();
        return clone(edge.data("branch"));
      });
      paths[node.id()] = "steps[" + i + "]";
      elements["steps[" + i + "]"] = node.id();
      return step;
    });
    var doc = clone(meta) || {};
    doc.steps = steps;
    return { document: doc, paths: paths, elements: elements };
  }

  /** Return the element id a lint path points at (the branch if any, else the step). */
  function elementForPath(elements, path) {
    var found = /^steps\[(\d+)\](?:\.branches\[(\d+)\])?/.exec(path || "");
    if (!found) return null;
    if (found[2] !== undefined) {
      var branch = elements["steps[" + found[1] + "].branches[" + found[2] + "]"];
      if (branch) return branch;
    }
    return elements["steps[" + found[1] + "]"] || null;
  }

  function leafNames(tree) {
    var names = [];
    if (!tree || typeof tree !== "object") return names;
    var stack = [tree.type === "node" || tree.type === "leaf" ? tree : tree.tree];
    while (stack.length) {
      var node = stack.pop();
      if (!node || typeof node !== "object") continue;
      if (node.type === "leaf" && typeof node.prompt === "string") names.push(node.prompt);
      else stack.push(node.if_false, node.if_true);
    }
    return names;
  }

  /**
   * Point every branch edge at where its branch leads now, keep placeholder nodes for missing
   * targets, and redraw the dashed leaf edges of decision trees. Call after any data change.
   */
  function syncEdges(cy) {
    var nodes = stepNodes(cy);
    var idByKey = {};
    nodes.forEach(function (n) {
      if (!(n.data("key") in idByKey)) idByKey[n.data("key")] = n.id();
    });
    var lastKey = nodes.length ? nodes[nodes.length - 1].data("key") : "";
    cy.batch(function () {
      nodes.forEach(function (n, i) {
        n.toggleClass("first", i === 0);
      });
      var wanted = {};
      cy.edges('[kind = "branch"]').forEach(function (edge) {
        var source = edge.source();
        var vt = visualTarget(edge.data("branch"), source.data("key"), lastKey);
        var targetId;
        if (vt === "@repeat") targetId = source.id();
        else if (vt === "@end") targetId = END_ID;
        else if (vt === "@complete") targetId = COMPLETE_ID;
        else if (vt && idByKey[vt]) targetId = idByKey[vt];
        else targetId = "m-" + (vt || "none") + "-" + source.id();
        if (targetId.indexOf("m-") === 0) wanted[targetId] = { source: source, key: vt };
        if (targetId.indexOf("m-") === 0 && cy.getElementById(targetId).empty()) {
          var p = source.position();
          cy.add({
            group: "nodes",
            data: { id: targetId, kind: "missing", label: vt ? "missing: " + vt : "no target" },
            classes: "missing",
            position: { x: p.x + 220, y: p.y + 90 },
          });
        }
        if (edge.target().id() !== targetId) edge.move({ target: targetId });
      });
      cy.nodes('[kind = "missing"]').forEach(function (n) {
        if (!wanted[n.id()]) n.remove();
      });
      cy.edges('[kind = "leaf"]').remove();
      nodes.forEach(function (n) {
        var step = n.data("step");
        if (step.kind !== "decision_tree") return;
        var targets = step.leaf_targets || {};
        leafNames(step.tree).forEach(function (leaf) {
          var target = targets[leaf] || leaf;
          var targetId = target === "@end" ? END_ID : target === "@complete" ? COMPLETE_ID : idByKey[target];
          if (!targetId) return;
          cy.add({
            group: "edges",
            data: { id: "leaf-" + n.id() + "-" + leaf, kind: "leaf", source: n.id(), target: targetId, label: "leaf: " + leaf },
            classes: "leaf",
          });
        });
      });
    });
  }

  function uniqueKey(cy, base) {
    var keys = {};
    cy.nodes('[kind = "step"]').forEach(function (n) { keys[n.data("key")] = true; });
    var n = 1;
    while (keys[base + "_" + n]) n += 1;
    return base + "_" + n;
  }

  /** Return the element JSON of a new step of `kind`, with an actor alias that suits it. */
  function newStep(cy, meta, kind, position) {
    var actors = meta.actors || {};
    var aliases = Object.keys(actors);
    var human = aliases.filter(function (a) { return String(actors[a]).indexOf("@human:") === 0; });
    var models = aliases.filter(function (a) { return String(actors[a]).indexOf("@human:") !== 0; });
    var key = uniqueKey(cy, { llm: "step", human: "review", decision_tree: "decide", classify: "classify" }[kind] || "step");
    var step = { key: key, name: { llm: "New LLM step", human: "New review", decision_tree: "New decision", classify: "New classifier" }[kind], kind: kind };
    if (kind === "human" && human.length) step.actor = human[0];
    if ((kind === "llm" || kind === "classify") && models.length) step.actor = models[0];
    step.prompt = "";
    if (kind === "decision_tree") step.tree = { version: "1.0", tree: { type: "leaf", prompt: "next" } };
    if (kind === "classify") step.routes = [{ name: "general", instructions: "Any request.", always_active: true }];
    var order = cy.nodes('[kind = "step"]').length;
    return {
      group: "nodes",
      data: {
        id: newId("s"), kind: "step", key: key, order: order, step: step, origPosition: null,
        moved: true, label: nodeLabel(step), stepKind: kind,
      },
      classes: "step kind-" + kind,
      position: position,
    };
  }

  /** Return the element JSON of a new branch from `source` to `target` (a node). */
  function newBranch(source, target) {
    var existing = branchEdges(source).map(function (e) { return e.data("branch"); });
    var names = {}, priorities = {};
    var top = 0;
    existing.forEach(function (b) {
      names[b.name] = true;
      priorities[b.priority] = true;
      if (typeof b.priority === "number" && b.priority < 900) top = Math.max(top, b.priority);
    });
    var priority = top + 1;
    while (priorities[priority]) priority += 1;
    var branch;
    var base;
    if (target.same(source)) {
      base = "retry";
      branch = { when: { type: "default" }, action: "REQUEST_MORE_DETAIL", target: "@repeat", params: { max_retries: 2 } };
    } else if (target.id() === END_ID) {
      base = "stop";
      branch = { when: { type: "default" }, action: "END_RECIPE", target: "@end" };
    } else if (target.id() === COMPLETE_ID) {
      base = "finish";
      branch = { when: { type: "default" }, action: "CONTINUE", target: "@complete" };
    } else {
      base = "to_" + target.data("key");
      branch = { when: { type: "default" }, action: "CONTINUE", target: target.data("key") };
    }
    var name = base, n = 2;
    while (names[name]) { name = base + "_" + n; n += 1; }
    var doc = { name: name, priority: priority, when: branch.when, action: branch.action, target: branch.target };
    if (branch.params) doc.params = branch.params;
    return {
      group: "edges",
      data: {
        id: newId("b"), kind: "branch", source: source.id(), target: target.id(),
        branch: doc, seq: 1000 + counter, label: edgeLabel(doc),
      },
      classes: "branch",
    };
  }

  /** Return JSON that compares equal for equal documents, whatever the key order. */
  function stableStringify(value) {
    if (Array.isArray(value)) return "[" + value.map(stableStringify).join(",") + "]";
    if (value && typeof value === "object") {
      return "{" + Object.keys(value).sort().map(function (k) {
        return JSON.stringify(k) + ":" + stableStringify(value[k]);
      }).join(",") + "}";
    }
    return JSON.stringify(value === undefined ? null : value);
  }

  root.RecipeGraph = {
    END_ID: END_ID,
    COMPLETE_ID: COMPLETE_ID,
    toElements: toElements,
    toDocument: toDocument,
    elementForPath: elementForPath,
    syncEdges: syncEdges,
    summarize: summarize,
    edgeLabel: edgeLabel,
    nodeLabel: nodeLabel,
    visualTarget: visualTarget,
    canonicalAction: canonicalAction,
    newStep: newStep,
    newBranch: newBranch,
    branchEdges: branchEdges,
    stepNodes: stepNodes,
    stableStringify: stableStringify,
    clone: clone,
  };
})(window);
