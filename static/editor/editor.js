/*
 * The recipe editor: the Cytoscape canvas, its undoable edits, the side panels (htmx forms that
 * answer with the edited piece of the document), saving with conflict detection, and the lint
 * panel. recipe-graph.js converts between the canvas and recipe format v1.
 */
(function () {
  "use strict";

  if (window.performance && performance.mark) performance.mark("editor-start");
  var G = window.RecipeGraph;
  var config = JSON.parse(document.getElementById("editor-config").textContent);
  var initialDocument = JSON.parse(document.getElementById("recipe-document").textContent);
  var urls = config.urls;
  var container = document.getElementById("cy");
  var csrfToken = JSON.parse(document.body.getAttribute("hx-headers") || "{}")["X-CSRFToken"];

  var app = (window.branchline = {
    ready: false,
    dirty: false,
    revision: config.revision,
    allowUnload: false,
  });

  // -- the canvas ---------------------------------------------------------------------------

  var STYLE = [
    {
      selector: "node",
      style: {
        label: "data(label)", "text-wrap": "wrap", "text-max-width": 168, "text-valign": "center",
        "text-halign": "center", "font-size": 12, "font-family": "system-ui, sans-serif",
        width: 180, height: 54, shape: "round-rectangle", "background-color": "#ffffff",
        "border-width": 1.5, "border-color": "#98a2b3", color: "#1d2330", "min-zoomed-font-size": 6,
      },
    },
    { selector: "node.kind-llm", style: { "background-color": "#eef4ff", "border-color": "#2f5bea" } },
    { selector: "node.kind-human", style: { "background-color": "#fffaeb", "border-color": "#dc6803" } },
    { selector: "node.kind-decision_tree", style: { "background-color": "#f4f3ff", "border-color": "#7a5af8", shape: "cut-rectangle" } },
    { selector: "node.kind-classify", style: { "background-color": "#ecfdf3", "border-color": "#039855", shape: "round-tag" } },
    { selector: "node.first", style: { "border-width": 3.5 } },
    {
      selector: "node.terminal",
      style: { width: 96, height: 44, "font-size": 11, "font-weight": "bold", shape: "round-octagon" },
    },
    { selector: "node.terminal.end", style: { "background-color": "#fef3f2", "border-color": "#d92d20", color: "#912018" } },
    { selector: "node.terminal.complete", style: { "background-color": "#ecfdf3", "border-color": "#039855", color: "#05603a", shape: "ellipse" } },
    {
      selector: "node.missing",
      style: { "border-style": "dashed", "border-color": "#d92d20", color: "#b42318", width: 120, height: 36, "font-size": 11 },
    },
    {
      selector: "edge",
      style: {
        "curve-style": "bezier", "target-arrow-shape": "triangle", width: 1.6, "line-color": "#98a2b3",
        "target-arrow-color": "#98a2b3", label: "data(label)", "font-size": 10, "text-wrap": "wrap",
        "text-background-color": "#ffffff", "text-background-opacity": 0.9, "text-background-padding": 2,
        "min-zoomed-font-size": 7, color: "#344054", "arrow-scale": 0.9,
      },
    },
    { selector: "edge:loop", style: { "loop-direction": "-30deg", "loop-sweep": "-70deg", "control-point-step-size": 70 } },
    { selector: "edge.inactive", style: { "line-style": "dotted", opacity: 0.55 } },
    { selector: "edge.leaf", style: { "line-style": "dashed", "line-color": "#7a5af8", "target-arrow-color": "#7a5af8", "font-style": "italic", color: "#5925dc" } },
    { selector: ".has-warning", style: { "border-color": "#f79009", "line-color": "#f79009", "target-arrow-color": "#f79009" } },
    { selector: ".has-error", style: { "border-color": "#d92d20", "line-color": "#d92d20", "target-arrow-color": "#d92d20", "border-style": "dashed" } },
    { selector: "node.run-visited", style: { "background-color": "#d1fadf", "border-color": "#039855", "border-width": 3 } },
    { selector: "node.run-failed", style: { "background-color": "#fee4e2", "border-color": "#d92d20", "border-width": 3 } },
    { selector: "node.run-current", style: { "border-color": "#f79009", "border-width": 5 } },
    { selector: "edge.run-taken", style: { width: 4, "line-color": "#039855", "target-arrow-color": "#039855", color: "#05603a" } },
    { selector: "edge.run-lost", style: { opacity: 0.3, "line-color": "#98a2b3", "target-arrow-color": "#98a2b3" } },
    { selector: "edge.uncovered", style: { "line-style": "dashed", width: 3, "line-color": "#f79009", "target-arrow-color": "#f79009" } },
    { selector: "edge.covered", style: { width: 3, "line-color": "#12b76a", "target-arrow-color": "#12b76a" } },
    { selector: "node:selected", style: { "border-color": "#f79009", "border-width": 4, "overlay-opacity": 0.06 } },
    { selector: "edge:selected", style: { "line-color": "#f79009", "target-arrow-color": "#f79009", width: 3.5, "z-index": 10 } },
    { selector: ".eh-ghost-edge, edge.eh-preview", style: { "line-color": "#f79009", "target-arrow-color": "#f79009", "line-style": "dashed", width: 2, label: "" } },
    { selector: ".eh-ghost-node", style: { opacity: 0 } },
    { selector: "node.eh-target, node.eh-hover", style: { "border-color": "#f79009", "border-width": 4 } },
  ];

  var built = G.toElements(initialDocument);
  var meta = built.meta;
  var big = built.elements.length > 300;
  var cy = cytoscape({
    container: container,
    elements: built.elements,
    style: STYLE,
    layout: { name: "preset", fit: false },
    minZoom: 0.05,
    maxZoom: 3,
    wheelSensitivity: 0.25,
    boxSelectionEnabled: true,
    selectionType: "single",
    textureOnViewport: big,
    hideEdgesOnViewport: big,
    motionBlur: false,
  });
  app.cy = cy;
  cy.edges('[kind = "branch"]').forEach(function (e) {
    if (e.data("branch").active === false) e.addClass("inactive");
  });
  G.syncEdges(cy);

  var LAYOUT = { name: "dagre", rankDir: "LR", nodeSep: 28, rankSep: 90, edgeSep: 12, fit: true, padding: 30, animate: false };

  function placeTerminals() {
    var steps = cy.nodes('[kind = "step"]');
    if (!steps.length) {
      cy.getElementById(G.END_ID).position({ x: 300, y: 120 });
      cy.getElementById(G.COMPLETE_ID).position({ x: 300, y: 240 });
      return;
    }
    // Above and below the right end of the steps, so edges to them do not run through steps.
    var bb = steps.boundingBox();
    cy.getElementById(G.END_ID).position({ x: bb.x2 + 160, y: bb.y1 - 90 });
    cy.getElementById(G.COMPLETE_ID).position({ x: bb.x2 + 160, y: bb.y2 + 90 });
  }

  function placeMissing() {
    cy.nodes('[kind = "missing"]').forEach(function (n) {
      var source = n.incomers("node").first();
      if (source.nonempty()) n.position({ x: source.position("x") + 220, y: source.position("y") + 90 });
    });
  }

  if (built.needsLayout && built.positionedCount === 0) {
    cy.layout(LAYOUT).run();
  } else {
    if (built.needsLayout) {
      // Some steps have no position: put them in a column right of the others.
      var placed = cy.nodes('[kind = "step"]').filter(function (n) { return n.data("origPosition"); });
      var bb = placed.boundingBox();
      cy.nodes('[kind = "step"]').filter(function (n) { return !n.data("origPosition"); }).forEach(function (n, i) {
        n.position({ x: bb.x2 + 260, y: bb.y1 + i * 90 });
      });
    }
    placeTerminals();
    placeMissing();
    cy.fit(undefined, 30);
  }
  if (cy.zoom() > 1.2) cy.zoom({ level: 1.2, renderedPosition: { x: container.clientWidth / 2, y: container.clientHeight / 2 } });
  if (window.performance && performance.mark) performance.mark("editor-laid-out");
  document.getElementById("canvas-hint").hidden = cy.nodes('[kind = "step"]').length > 0;

  var ur = cy.undoRedo({ undoableDrag: false, isDebug: false });
  var eh = cy.edgehandles({
    canConnect: function (source, target) {
      var kind = target.data("kind");
      return source.data("kind") === "step" && (kind === "step" || kind === "terminal");
    },
    edgeParams: function () { return { data: { kind: "preview" } }; },
    hoverDelay: 60,
    snap: true,
    snapThreshold: 24,
    snapFrequency: 20,
    noEdgeEventsInDraw: true,
    disableBrowserGestures: true,
  });

  // -- the document -------------------------------------------------------------------------

  function currentDocument() {
    return G.toDocument(cy, meta);
  }

  var savedJSON = G.stableStringify(currentDocument().document);

  // -- undoable actions (all by element id, so moved edges and re-added nodes stay valid) --

  function refreshElement(ele) {
    if (ele.data("kind") === "branch") {
      var branch = ele.data("branch");
      ele.data("label", G.edgeLabel(branch));
      ele.toggleClass("inactive", branch.active === false);
    } else if (ele.data("kind") === "step") {
      var step = ele.data("step");
      ele.data("label", G.nodeLabel(step));
      ele.data("stepKind", step.kind || "llm");
      ["llm", "human", "decision_tree", "classify"].forEach(function (k) {
        ele.toggleClass("kind-" + k, (step.kind || "llm") === k);
      });
    }
  }

  function applyData(args) {
    var inverse = [];
    cy.batch(function () {
      args.changes.forEach(function (change) {
        if (change.id === "__meta__") {
          inverse.push({ id: "__meta__", data: { meta: G.clone(meta) } });
          meta = G.clone(change.data.meta);
          document.getElementById("recipe-title").textContent = meta.name || config.slug;
          return;
        }
        var ele = cy.getElementById(change.id);
        if (ele.empty()) return;
        var old = {};
        Object.keys(change.data).forEach(function (k) { old[k] = G.clone(ele.data(k)); });
        inverse.push({ id: change.id, data: old });
        Object.keys(change.data).forEach(function (k) { ele.data(k, G.clone(change.data[k])); });
        refreshElement(ele);
      });
    });
    G.syncEdges(cy);
    return { changes: inverse.reverse() };
  }

  function addElements(args) {
    var json = args.json.map(G.clone);
    cy.add(json);
    cy.batch(function () {
      json.forEach(function (j) { refreshElement(cy.getElementById(j.data.id)); });
    });
    G.syncEdges(cy);
    return { ids: json.map(function (j) { return j.data.id; }) };
  }

  function removeElements(args) {
    var eles = cy.collection();
    args.ids.forEach(function (id) { eles = eles.union(cy.getElementById(id)); });
    var nodes = eles.filter('[kind = "step"]');
    var edges = eles.filter('[kind = "branch"]');
    var touching = nodes.connectedEdges('[kind = "branch"]');
    var outgoing = touching.filter(function (e) { return nodes.contains(e.source()); });
    var incoming = touching.filter(function (e) { return !nodes.contains(e.source()) && !edges.contains(e); });
    var gone = nodes.union(outgoing).union(edges);
    var json = gone.nodes().map(function (e) { return e.json(); }).concat(gone.edges().map(function (e) { return e.json(); }));
    cy.batch(function () {
      // Branches of other steps that led to a removed step stay, pointing at a placeholder.
      incoming.forEach(function (e) { e.move({ target: e.source().id() }); });
      gone.remove();
    });
    G.syncEdges(cy);
    return { json: json };
  }

  function setPositions(args) {
    cy.batch(function () {
      args.positions.forEach(function (p) {
        var node = cy.getElementById(p.id);
        if (node.empty()) return;
        node.position(p.pos);
        if (node.data("kind") === "step") node.data("moved", p.moved);
      });
    });
    return { positions: args.before, before: args.positions };
  }

  ur.action("apply-data", applyData, applyData);
  ur.action("add-elements", addElements, removeElements);
  ur.action("remove-elements", removeElements, addElements);
  ur.action("set-positions", setPositions, setPositions);

  function positionsSnapshot(nodes, moved) {
    return nodes.map(function (n) {
      return { id: n.id(), pos: { x: n.position("x"), y: n.position("y") }, moved: moved === undefined ? !!n.data("moved") : moved };
    });
  }

  // Dragging nodes: one undoable step per drag.
  var dragStart = null;
  cy.on("grab", "node", function () {
    if (!dragStart) dragStart = positionsSnapshot(cy.nodes());
  });
  cy.on("free", "node", function () {
    if (!dragStart) return;
    var before = dragStart;
    dragStart = null;
    var byId = {};
    before.forEach(function (p) { byId[p.id] = p; });
    var changed = cy.nodes().filter(function (n) {
      var p = byId[n.id()];
      return p && (p.pos.x !== n.position("x") || p.pos.y !== n.position("y"));
    });
    if (!changed.length) return;
    var after = positionsSnapshot(changed, true).map(function (p) {
      return cy.getElementById(p.id).data("kind") === "step" ? p : Object.assign(p, { moved: false });
    });
    var previous = changed.map(function (n) { return byId[n.id()]; });
    ur.do("set-positions", { positions: after, before: previous });
  });

  function runLayout() {
    var nodes = cy.nodes();
    var before = positionsSnapshot(nodes);
    cy.layout(LAYOUT).run();
    var after = positionsSnapshot(nodes).map(function (p) {
      return Object.assign(p, { moved: cy.getElementById(p.id).data("kind") === "step" });
    });
    ur.do("set-positions", { positions: after, before: before });
  }

  // -- changes: dirty flag, lint and the step list --------------------------------------------

  var saveState = document.getElementById("save-state");
  var changeTimer = null;

  function updateDirty() {
    var json = G.stableStringify(currentDocument().document);
    app.dirty = json !== savedJSON;
    saveState.textContent = app.dirty ? "● Unsaved changes" : "Saved";
    saveState.classList.toggle("dirty", app.dirty);
    document.title = (app.dirty ? "● " : "") + document.title.replace(/^● /, "");
  }

  function changed() {
    clearTimeout(changeTimer);
    changeTimer = setTimeout(function () {
      changeTimer = null;
      updateDirty();
      scheduleCheck(0);
    }, 150);
    document.getElementById("canvas-hint").hidden = cy.nodes('[kind = "step"]').length > 0;
  }

  cy.on("afterDo afterUndo afterRedo", changed);
  cy.on("afterUndo afterRedo", function () { reopenPanel(); });

  var checkTimer = null;
  var checking = false;
  var checkAgain = false;
  var lintElements = {};

  function scheduleCheck(delay) {
    clearTimeout(checkTimer);
    checkTimer = setTimeout(runCheck, delay === undefined ? 300 : delay);
  }

  function runCheck() {
    checkTimer = null;
    if (checking) {
      checkAgain = true;
      return;
    }
    checking = true;
    var current = currentDocument();
    htmx.ajax("POST", urls.check, {
      source: "#lint",
      target: "#lint",
      swap: "innerHTML",
      values: { document: JSON.stringify(current.document) },
    }).then(function () {
      lintElements = current.elements;
      markProblems();
    }).finally(function () {
      checking = false;
      if (checkAgain) {
        checkAgain = false;
        runCheck();
      }
    });
  }

  function markProblems() {
    cy.elements().removeClass("has-error has-warning");
    document.querySelectorAll("#lint .problem").forEach(function (li) {
      var link = li.querySelector("[data-path]");
      var id = G.elementForPath(lintElements, link && link.getAttribute("data-path"));
      if (!id) return;
      cy.getElementById(id).addClass(li.classList.contains("error") ? "has-error" : "has-warning");
    });
  }

  // -- selection and the side panels ----------------------------------------------------------

  var panel = document.getElementById("panel");
  var openElementId = null;

  function pathOf(id) {
    return currentDocument().paths[id];
  }

  function indices(path) {
    var found = /^steps\[(\d+)\](?:\.branches\[(\d+)\])?$/.exec(path || "");
    return found ? { step: found[1], branch: found[2] } : null;
  }

  function openPanel(ele) {
    var current = currentDocument();
    var where = indices(current.paths[ele.id()]);
    if (!where) return;
    showTab("properties", false);
    openElementId = ele.id();
    var values = { document: JSON.stringify(current.document), step: where.step, element: ele.id() };
    if (where.branch !== undefined) values.branch = where.branch;
    return htmx.ajax("POST", where.branch !== undefined ? urls.branchPanel : urls.stepPanel, {
      source: "#panel", target: "#panel", swap: "innerHTML", values: values,
    });
  }

  function reopenPanel() {
    if (!openElementId) return;
    var ele = cy.getElementById(openElementId);
    if (ele.empty()) {
      openElementId = null;
      panel.innerHTML = '<p class="muted">Select a step or a branch to edit it.</p>';
      return;
    }
    openPanel(ele);
  }

  cy.on("select", "node, edge", function (evt) {
    var ele = evt.target;
    var kind = ele.data("kind");
    if (kind === "step" || kind === "branch") openPanel(ele);
  });

  function selectElement(id) {
    var ele = cy.getElementById(id);
    if (ele.empty()) return false;
    cy.elements().unselect();
    ele.select();
    var pos = ele.isNode() ? ele.position() : ele.midpoint();
    if (cy.zoom() < 0.6) cy.zoom({ level: 0.8, position: pos });
    var ext = cy.extent();
    if (pos.x < ext.x1 || pos.x > ext.x2 || pos.y < ext.y1 || pos.y > ext.y2) cy.center(ele);
    return true;
  }
  app.selectElement = selectElement;
  app.selectPath = function (path) {
    return selectElement(G.elementForPath(currentDocument().elements, path));
  };

  // Panel requests carry the current document and the current place of the edited element.
  document.body.addEventListener("htmx:configRequest", function (evt) {
    var elt = evt.detail.elt;
    var form = elt && elt.closest ? elt.closest("[data-editor-form]") : null;
    if (form) {
      var current = currentDocument();
      evt.detail.parameters.document = JSON.stringify(current.document);
      var elementInput = form.querySelector('[name="element"]');
      if (elementInput && elementInput.value) {
        var where = indices(current.paths[elementInput.value]);
        if (!where) {
          evt.preventDefault();
          panel.innerHTML = '<p class="muted">That element was deleted.</p>';
          return;
        }
        evt.detail.parameters.step = where.step;
        if (where.branch !== undefined) evt.detail.parameters.branch = where.branch;
      }
    }
    // The server refuses these if the draft was saved elsewhere since this revision (409).
    if (elt && elt.closest && elt.closest("[data-needs-revision], [data-needs-save]")) {
      evt.detail.parameters.revision = String(app.revision);
    }
  });

  // Publishing uses the saved draft: it waits for a save in flight and saves what the canvas
  // shows first. Dirtiness is computed here, not read from `app.dirty`, which follows an edit only
  // after a short delay: an edit applied just before the click must be in the published version.
  document.body.addEventListener("htmx:confirm", function (evt) {
    var elt = evt.detail.elt;
    if (!elt || !elt.closest || !elt.closest("[data-needs-save]")) return;
    updateDirty();
    if (!app.dirty && !saving) return;
    evt.preventDefault();
    flushSave().then(function (ok) {
      if (ok) evt.detail.issueRequest(true);
    });
  });

  // Restoring a version or importing a file reloads the page once the author confirmed it.
  document.body.addEventListener("htmx:beforeRequest", function (evt) {
    var elt = evt.detail.elt;
    if (elt && elt.closest && elt.closest("[data-needs-revision]")) app.allowUnload = true;
  });
  document.body.addEventListener("htmx:afterRequest", function (evt) {
    var elt = evt.detail.elt;
    if (!elt || !elt.closest || !elt.closest("[data-needs-revision]")) return;
    var xhr = evt.detail.xhr;
    if (!xhr || xhr.getResponseHeader("HX-Refresh") !== "true") app.allowUnload = false;
  });

  document.body.addEventListener("htmx:afterSwap", function (evt) {
    var target = evt.detail.target;
    if (!target) return;
    var script = target.querySelector("#panel-result");
    if (script) {
      var result = JSON.parse(script.textContent);
      script.remove();
      applyResult(target, result);
    }
    if (target.id === "panel") setupPanel();
  });

  document.body.addEventListener("htmx:responseError", function (evt) {
    var target = evt.detail.target;
    if (target && (target.id === "panel" || target.closest("#panel"))) {
      var p = document.createElement("p");
      p.className = "field-error";
      p.setAttribute("role", "alert");
      p.textContent = evt.detail.xhr.status === 403 ? "You may not change this recipe." : (evt.detail.xhr.responseText || "The server could not answer.").slice(0, 300);
      panel.prepend(p);
    }
  });

  function applyResult(target, result) {
    if (target.id === "panel-recipe") {
      var next = Object.assign(G.clone(meta), result);
      ur.do("apply-data", { changes: [{ id: "__meta__", data: { meta: next } }] });
      return;
    }
    var ele = cy.getElementById(result.element);
    if (ele.empty()) return;
    if (result.branch) {
      ur.do("apply-data", { changes: [{ id: ele.id(), data: { branch: result.branch } }] });
    } else if (result.step) {
      ur.do("apply-data", { changes: stepChanges(ele, result) });
    }
  }

  function stepChanges(node, result) {
    var step = result.step;
    var oldKey = node.data("key");
    var changes = [{ id: node.id(), data: { step: step, key: step.key } }];
    if (oldKey !== step.key) {
      cy.edges('[kind = "branch"]').forEach(function (e) {
        var branch = e.data("branch");
        if (branch.target === oldKey) changes.push({ id: e.id(), data: { branch: Object.assign(G.clone(branch), { target: step.key }) } });
      });
      cy.nodes('[kind = "step"]').forEach(function (n) {
        if (n.same(node)) return;
        var other = n.data("step");
        var targets = other.leaf_targets;
        if (!targets) return;
        var renamed = false, copy = G.clone(targets);
        Object.keys(copy).forEach(function (leaf) {
          if (copy[leaf] === oldKey) { copy[leaf] = step.key; renamed = true; }
        });
        if (renamed) changes.push({ id: n.id(), data: { step: Object.assign(G.clone(other), { leaf_targets: copy }) } });
      });
    }
    var order = G.stepNodes(cy).map(function (n) { return n.id(); });
    var from = order.indexOf(node.id());
    var to = Math.max(0, Math.min(order.length - 1, (result.sequence || from + 1) - 1));
    if (from !== to) {
      order.splice(to, 0, order.splice(from, 1)[0]);
      order.forEach(function (id, i) {
        if (cy.getElementById(id).data("order") !== i) changes.push({ id: id, data: { order: i } });
      });
    }
    if (result.actors && Object.keys(result.actors).length) {
      var next = G.clone(meta);
      next.actors = Object.assign({}, next.actors || {}, result.actors);
      changes.push({ id: "__meta__", data: { meta: next } });
    }
    return changes;
  }

  function setupPanel() {
    var form = panel.querySelector('[data-editor-form="step"]');
    if (form) {
      var kind = form.querySelector('[name="kind"]');
      var showKind = function () {
        form.querySelectorAll("[data-kind-only]").forEach(function (el) {
          el.hidden = el.getAttribute("data-kind-only") !== kind.value;
        });
      };
      if (kind) {
        kind.addEventListener("change", showKind);
        showKind();
      }
      var prompt = form.querySelector('[name="prompt"]');
      if (prompt) {
        prompt.setAttribute("hx-post", urls.stepPanel.replace(/panels\/step\/$/, "panels/prompt/"));
        prompt.setAttribute("hx-trigger", "input changed delay:400ms");
        prompt.setAttribute("hx-target", "#prompt-check");
        prompt.setAttribute("hx-swap", "innerHTML");
        htmx.process(prompt);
      }
    }
  }

  // Condition builder buttons and type changes re-render the branch form with what was typed.
  function refreshBranchForm(form, op) {
    htmx.ajax("POST", urls.branchPanel, {
      source: form, target: "#panel", swap: "innerHTML", values: { _op: op },
    });
  }

  panel.addEventListener("change", function (evt) {
    var el = evt.target;
    var form = el.closest('[data-editor-form="branch"]');
    if (form && el.getAttribute("data-refresh")) refreshBranchForm(form, "refresh");
  });

  panel.addEventListener("click", function (evt) {
    var opButton = evt.target.closest("[data-op]");
    if (opButton) {
      refreshBranchForm(opButton.closest("form"), opButton.getAttribute("data-op"));
      return;
    }
    var chip = evt.target.closest("[data-insert]");
    if (chip) {
      var textarea = panel.querySelector('[name="prompt"]');
      var insert = "{" + chip.getAttribute("data-insert") + "}";
      var start = textarea.selectionStart || 0, end = textarea.selectionEnd || 0;
      textarea.value = textarea.value.slice(0, start) + insert + textarea.value.slice(end);
      textarea.focus();
      textarea.selectionStart = textarea.selectionEnd = start + insert.length;
      textarea.dispatchEvent(new Event("input", { bubbles: true }));
      return;
    }
    var move = evt.target.closest("[data-move]");
    if (move) {
      var li = move.closest("li");
      var list = li.parentElement;
      var items = Array.prototype.slice.call(list.children);
      var i = items.indexOf(li);
      var j = move.getAttribute("data-move") === "up" ? i - 1 : i + 1;
      if (j < 0 || j >= items.length) return;
      var order = items.map(function (item) { return Number(item.getAttribute("data-branch")); });
      order.splice(j, 0, order.splice(i, 1)[0]);
      reorderBranches(Number(list.getAttribute("data-step")), order);
    }
  });

  // Branch priority: drag a branch in the step's list (or use its arrows).
  var dragged = null;
  panel.addEventListener("dragstart", function (evt) {
    var li = evt.target.closest && evt.target.closest(".branch-order li");
    if (!li) return;
    dragged = li;
    evt.dataTransfer.effectAllowed = "move";
    evt.dataTransfer.setData("text/plain", li.getAttribute("data-branch"));
    li.classList.add("dragging");
  });
  panel.addEventListener("dragover", function (evt) {
    if (dragged && evt.target.closest(".branch-order li")) evt.preventDefault();
  });
  panel.addEventListener("drop", function (evt) {
    var li = evt.target.closest(".branch-order li");
    if (!dragged || !li) return;
    evt.preventDefault();
    var list = li.parentElement;
    var items = Array.prototype.slice.call(list.children);
    var order = items.map(function (item) { return Number(item.getAttribute("data-branch")); });
    var from = items.indexOf(dragged), to = items.indexOf(li);
    order.splice(to, 0, order.splice(from, 1)[0]);
    dragged = null;
    reorderBranches(Number(list.getAttribute("data-step")), order);
  });
  panel.addEventListener("dragend", function () {
    if (dragged) dragged.classList.remove("dragging");
    dragged = null;
  });

  /** Give the step's branches the priorities they had, in the new order `order` (old indices). */
  function reorderBranches(stepIndex, order) {
    var elements = currentDocument().elements;
    var edges = order.map(function (j) {
      return cy.getElementById(elements["steps[" + stepIndex + "].branches[" + j + "]"]);
    });
    if (edges.some(function (e) { return e.empty(); })) return;
    var priorities = edges.map(function (e) { return e.data("branch").priority; }).sort(function (a, b) { return a - b; });
    var distinct = priorities.every(function (p, i) { return typeof p === "number" && (i === 0 || p !== priorities[i - 1]); });
    var changes = edges.map(function (e, i) {
      var branch = G.clone(e.data("branch"));
      branch.priority = distinct ? priorities[i] : i + 1;
      return { id: e.id(), data: { branch: branch } };
    });
    ur.do("apply-data", { changes: changes });
    var step = cy.getElementById(elements["steps[" + stepIndex + "]"]);
    if (step.nonempty() && openElementId === step.id()) openPanel(step);
  }

  // -- lists that point at the canvas: outline, lint, save errors, coverage -------------------

  document.addEventListener("click", function (evt) {
    var link = evt.target.closest("[data-path]");
    if (!link) return;
    var path = link.getAttribute("data-path");
    if (/^(actors|inputs|name|description)\b/.test(path)) {
      showTab("recipe", true);
      return;
    }
    var map = link.closest("#lint") ? lintElements : currentDocument().elements;
    var id = G.elementForPath(map, path) || G.elementForPath(currentDocument().elements, path);
    if (id) selectElement(id);
  });

  document.addEventListener("click", function (evt) {
    var ref = evt.target.closest("[data-branch-ref]");
    if (!ref) return;
    var edge = edgeByName(ref.getAttribute("data-branch-ref"), ref.getAttribute("data-branch-name"));
    if (edge) selectElement(edge.id());
  });

  function nodeByKey(key) {
    return cy.nodes('[kind = "step"]').filter(function (n) { return n.data("key") === key; }).first();
  }

  function edgeByName(stepKey, name) {
    var node = nodeByKey(stepKey);
    if (node.empty()) return null;
    var edge = G.branchEdges(node).filter(function (e) { return e.data("branch").name === name; }).first();
    return edge.nonempty() ? edge : null;
  }
  app.nodeByKey = nodeByKey;
  app.edgeByName = edgeByName;

  // The list is re-rendered after each change: keep the keyboard focus on the same item.
  var focusedPath = null;
  document.body.addEventListener("htmx:oobBeforeSwap", function () {
    var active = document.activeElement;
    focusedPath = active && active.closest && active.closest("#outline") ? active.getAttribute("data-path") : null;
  });
  document.body.addEventListener("htmx:oobAfterSwap", function () {
    if (!focusedPath) return;
    var item = document.querySelector('#outline [data-path="' + focusedPath.replace(/"/g, "") + '"]');
    if (item) item.focus();
    focusedPath = null;
  });

  // Arrow keys move through the step/branch list.
  document.addEventListener("keydown", function (evt) {
    if (["ArrowDown", "ArrowUp", "Home", "End"].indexOf(evt.key) < 0) return;
    if (!evt.target.closest || !evt.target.closest("#outline")) return;
    var items = Array.prototype.slice.call(document.querySelectorAll("#outline .outline-item"));
    var i = items.indexOf(document.activeElement);
    if (i < 0) return;
    evt.preventDefault();
    var j = evt.key === "ArrowDown" ? Math.min(items.length - 1, i + 1)
      : evt.key === "ArrowUp" ? Math.max(0, i - 1)
        : evt.key === "Home" ? 0 : items.length - 1;
    items[j].focus();
  });

  // -- tabs ---------------------------------------------------------------------------------

  var TABS = ["properties", "recipe", "testrun", "tests", "versions"];
  var testrunStale = false;
  document.body.addEventListener("htmx:afterSwap", function () {
    if (document.querySelector("#panel-versions .applied")) testrunStale = true;
  });

  function loadTab(name) {
    var current = currentDocument();
    if (name === "recipe") {
      return htmx.ajax("POST", urls.recipePanel, { source: "#panel-recipe", target: "#panel-recipe", swap: "innerHTML", values: { document: JSON.stringify(current.document) } });
    }
    // The test-run form keeps what was typed, unless a new version was published since.
    if (name === "testrun" && (testrunStale || !document.querySelector("#panel-testrun form"))) {
      testrunStale = false;
      return htmx.ajax("POST", urls.testrunPanel, { source: "#panel-testrun", target: "#panel-testrun", swap: "innerHTML" });
    }
    if (name === "tests") return htmx.ajax("GET", urls.tests, { source: "#panel-tests", target: "#panel-tests", swap: "innerHTML" });
    if (name === "versions") return htmx.ajax("GET", urls.versions, { source: "#panel-versions", target: "#panel-versions", swap: "innerHTML" });
    return Promise.resolve();
  }

  function showTab(name, load) {
    TABS.forEach(function (tab) {
      var button = document.getElementById("tab-" + tab);
      var section = document.getElementById("panel-" + tab);
      var on = tab === name;
      button.setAttribute("aria-selected", on ? "true" : "false");
      button.tabIndex = on ? 0 : -1;
      section.hidden = !on;
    });
    return load === false ? Promise.resolve() : loadTab(name);
  }
  app.showTab = showTab;

  TABS.forEach(function (tab, i) {
    var button = document.getElementById("tab-" + tab);
    button.addEventListener("click", function () { showTab(tab, true); });
    button.addEventListener("keydown", function (evt) {
      if (evt.key !== "ArrowRight" && evt.key !== "ArrowLeft") return;
      var next = TABS[(i + (evt.key === "ArrowRight" ? 1 : TABS.length - 1)) % TABS.length];
      document.getElementById("tab-" + next).focus();
      showTab(next, true);
    });
  });

  // -- toolbar ------------------------------------------------------------------------------

  function viewportCenter() {
    var ext = cy.extent();
    return { x: (ext.x1 + ext.x2) / 2, y: (ext.y1 + ext.y2) / 2 };
  }

  function addStep(kind) {
    var selected = cy.nodes(":selected[kind = 'step']").first();
    var pos;
    if (selected.nonempty()) {
      pos = { x: selected.position("x") + 240, y: selected.position("y") + 20 };
    } else {
      var steps = cy.nodes('[kind = "step"]');
      if (steps.length) {
        var bb = steps.boundingBox();
        pos = { x: bb.x2 + 240, y: (bb.y1 + bb.y2) / 2 };
      } else {
        pos = viewportCenter();
      }
    }
    var json = G.newStep(cy, meta, kind, pos);
    ur.do("add-elements", { json: [json] });
    var node = cy.getElementById(json.data.id);
    var box = node.boundingBox();
    var overlaps = cy.nodes('[kind = "terminal"]').some(function (t) {
      var b = t.boundingBox();
      return b.x1 < box.x2 + 40 && b.x2 > box.x1 - 40 && b.y1 < box.y2 + 20 && b.y2 > box.y1 - 20;
    });
    // Terminals have no saved position: keep them clear of the steps.
    if (overlaps || cy.nodes('[kind = "step"]').length === 1) placeTerminals();
    var ext = cy.extent();
    if (pos.x > ext.x2 - 100 || pos.x < ext.x1 || pos.y < ext.y1 || pos.y > ext.y2) {
      cy.fit(cy.elements(), 40);
      if (cy.zoom() > 1.2) cy.zoom({ level: 1.2, position: node.position() });
    }
    selectElement(node.id());
    return node;
  }
  app.addStep = addStep;

  document.querySelectorAll("[data-add-step]").forEach(function (button) {
    button.addEventListener("click", function () { addStep(button.getAttribute("data-add-step")); });
  });

  function deleteSelected() {
    var ids = cy.elements(":selected").filter('[kind = "step"], [kind = "branch"]').map(function (e) { return e.id(); });
    if (!ids.length) return;
    openElementId = null;
    panel.innerHTML = '<p class="muted">Deleted. Ctrl+Z brings it back.</p>';
    ur.do("remove-elements", { ids: ids });
  }
  app.deleteSelected = deleteSelected;

  document.getElementById("btn-delete").addEventListener("click", deleteSelected);
  document.getElementById("btn-undo").addEventListener("click", function () { ur.undo(); });
  document.getElementById("btn-redo").addEventListener("click", function () { ur.redo(); });
  document.getElementById("btn-fit").addEventListener("click", function () { cy.fit(undefined, 30); });
  document.getElementById("btn-layout").addEventListener("click", runLayout);
  document.getElementById("btn-zoom-in").addEventListener("click", function () {
    cy.zoom({ level: cy.zoom() * 1.25, renderedPosition: { x: container.clientWidth / 2, y: container.clientHeight / 2 } });
  });
  document.getElementById("btn-zoom-out").addEventListener("click", function () {
    cy.zoom({ level: cy.zoom() / 1.25, renderedPosition: { x: container.clientWidth / 2, y: container.clientHeight / 2 } });
  });
  var connectButton = document.getElementById("btn-connect");
  connectButton.addEventListener("click", function () {
    var on = connectButton.getAttribute("aria-pressed") !== "true";
    if (on) eh.enableDrawMode(); else eh.disableDrawMode();
    connectButton.setAttribute("aria-pressed", on ? "true" : "false");
  });
  app.undo = function () { ur.undo(); };
  app.redo = function () { ur.redo(); };
  app.layout = runLayout;

  document.addEventListener("keydown", function (evt) {
    var mod = evt.ctrlKey || evt.metaKey;
    if (mod && (evt.key === "s" || evt.key === "S")) {
      evt.preventDefault();
      save(false);
      return;
    }
    var t = evt.target;
    var typing = t && (t.isContentEditable || /^(INPUT|TEXTAREA|SELECT)$/.test(t.tagName));
    if (typing) return;
    if (evt.key === "Delete" || evt.key === "Backspace") {
      if (cy.elements(":selected").length) {
        evt.preventDefault();
        deleteSelected();
      }
    } else if (mod && (evt.key === "z" || evt.key === "Z") && evt.shiftKey) {
      evt.preventDefault();
      ur.redo();
    } else if (mod && (evt.key === "z" || evt.key === "Z")) {
      evt.preventDefault();
      ur.undo();
    } else if (mod && (evt.key === "y" || evt.key === "Y")) {
      evt.preventDefault();
      ur.redo();
    }
  });

  // -- drawing branches: drag from the handle of a step (or anywhere on it in Connect mode) --

  var handle = document.getElementById("eh-handle");
  var handleNode = null;
  var hideTimer = null;

  function showHandle(node) {
    clearTimeout(hideTimer);
    var bb = node.renderedBoundingBox({ includeLabels: false });
    handle.style.left = Math.round(bb.x2 - 8) + "px";
    handle.style.top = Math.round((bb.y1 + bb.y2) / 2 - 8) + "px";
    handle.hidden = false;
    handleNode = node;
  }

  function hideHandleSoon() {
    clearTimeout(hideTimer);
    hideTimer = setTimeout(function () { handle.hidden = true; }, 400);
  }

  cy.on("mouseover", 'node[kind = "step"]', function (evt) {
    if (!eh.active) showHandle(evt.target);
  });
  cy.on("mouseout", 'node[kind = "step"]', hideHandleSoon);
  cy.on("pan zoom drag", function () { handle.hidden = true; });
  handle.addEventListener("mouseenter", function () { clearTimeout(hideTimer); });
  handle.addEventListener("mouseleave", hideHandleSoon);
  handle.addEventListener("mousedown", function (evt) {
    if (!handleNode || evt.button !== 0) return;
    evt.preventDefault();
    startConnect(handleNode);
  });

  function modelPosition(evt) {
    var rect = container.getBoundingClientRect();
    var pan = cy.pan(), zoom = cy.zoom();
    return { x: (evt.clientX - rect.left - pan.x) / zoom, y: (evt.clientY - rect.top - pan.y) / zoom };
  }

  function startConnect(node) {
    handle.hidden = true;
    eh.start(node);
    var move = function (evt) { eh.update(modelPosition(evt)); };
    var up = function () {
      window.removeEventListener("mousemove", move);
      window.removeEventListener("mouseup", up);
      eh.stop();
    };
    window.addEventListener("mousemove", move);
    window.addEventListener("mouseup", up);
  }

  cy.on("ehcomplete", function (evt, source, target, added) {
    added.remove();
    var json = G.newBranch(source, target);
    ur.do("add-elements", { json: [json] });
    selectElement(json.data.id);
  });

  // Tooltips: a branch's name, or why a test run did not take it.
  var tip = document.getElementById("edge-tip");
  cy.on("mouseover", "edge", function (evt) {
    var edge = evt.target;
    var text;
    if (edge.data("kind") === "branch") {
      var b = edge.data("branch");
      text = b.name + " (priority " + b.priority + "): " + G.summarize(b.when) + " → " + b.action + (b.target ? " " + b.target : "");
      if (edge.data("runReason")) text += "\n" + edge.data("runReason");
    } else if (edge.data("kind") === "leaf") {
      text = edge.data("label");
    } else {
      return;
    }
    tip.textContent = text;
    var p = evt.renderedPosition || edge.renderedMidpoint();
    tip.hidden = false;
    // Keep the tip inside the canvas: left of the pointer near the right edge.
    var left = p.x + 12;
    if (left + tip.offsetWidth > container.clientWidth - 4) left = Math.max(4, p.x - 12 - tip.offsetWidth);
    var top = p.y + 12;
    if (top + tip.offsetHeight > container.clientHeight - 4) top = Math.max(4, p.y - 12 - tip.offsetHeight);
    tip.style.left = Math.round(left) + "px";
    tip.style.top = Math.round(top) + "px";
  });
  cy.on("mouseout", "edge", function () { tip.hidden = true; });

  // -- saving -------------------------------------------------------------------------------

  var conflict = document.getElementById("conflict");
  var saveErrors = document.getElementById("save-errors");

  function showSaveErrors(errors) {
    saveErrors.innerHTML = "";
    var p = document.createElement("p");
    p.textContent = "The draft was not saved: fix these first.";
    saveErrors.appendChild(p);
    var ul = document.createElement("ul");
    errors.forEach(function (error) {
      var li = document.createElement("li");
      var button = document.createElement("button");
      button.type = "button";
      button.className = "link";
      button.setAttribute("data-path", String(error).split(": ")[0]);
      button.textContent = error;
      li.appendChild(button);
      ul.appendChild(li);
    });
    saveErrors.appendChild(ul);
    saveErrors.hidden = false;
  }

  var saving = null; // the last save asked for, until it has answered

  /** Save the draft after any save in flight (each carries the revision the one before got). */
  function save(force) {
    var run = function () { return saveNow(force); };
    var mine = (saving || Promise.resolve(true)).then(run, run);
    saving = mine;
    var done = function () {
      if (saving === mine) saving = null;
    };
    mine.then(done, done);
    return mine;
  }

  /** Resolve true once the saved draft is what the canvas shows, saving it if needed. */
  function flushSave() {
    return (saving || Promise.resolve(true)).then(function (ok) {
      if (!ok) return false;
      updateDirty();
      return app.dirty ? save(false) : true;
    }, function () { return false; });
  }

  function saveNow(force) {
    var current = currentDocument();
    var body = { document: current.document };
    if (!force) body.revision = app.revision;
    saveState.textContent = "Saving…";
    return fetch(urls.save, {
      method: "PUT",
      credentials: "same-origin",
      headers: { "Content-Type": "application/json", Accept: "application/json", "X-CSRFToken": csrfToken },
      body: JSON.stringify(body),
    }).then(function (response) {
      return response.json().catch(function () { return {}; }).then(function (data) {
        if (response.ok) {
          app.revision = data.revision;
          savedJSON = G.stableStringify(current.document);
          conflict.hidden = true;
          saveErrors.hidden = true;
          updateDirty();
          if (!app.dirty) saveState.textContent = "Saved";
          return true;
        }
        updateDirty();
        if (response.status === 409) {
          document.getElementById("conflict-detail").textContent = (data.errors || []).join(" ");
          conflict.hidden = false;
          conflict.scrollIntoView({ block: "nearest" });
        } else if (response.status === 400) {
          showSaveErrors(data.errors || ["$: the server refused the draft"]);
        } else {
          showSaveErrors(["$: the server answered " + response.status + "; your changes are kept here"]);
        }
        return false;
      });
    }).catch(function () {
      updateDirty();
      showSaveErrors(["$: the server could not be reached; your changes are kept here"]);
      return false;
    });
  }
  app.save = save;
  app.flushSave = flushSave;
  // Nothing is waiting to happen: no edit still to be marked and checked, no check, save or
  // panel request in flight, and htmx has wired up what it swapped in (it does so when the swap
  // settles, a moment later: until then a form in it would submit as a plain form). Tests wait
  // for this before acting on a layout that must hold still or on controls just loaded.
  app.settled = function () {
    return changeTimer === null && checkTimer === null && !checking && !saving &&
      !document.querySelector(".htmx-request, .htmx-settling");
  };
  app.documentJSON = function () { return JSON.stringify(currentDocument().document); };
  app.currentDocument = function () { return currentDocument().document; };

  document.getElementById("btn-save").addEventListener("click", function () { save(false); });
  document.getElementById("btn-conflict-overwrite").addEventListener("click", function () { save(true); });
  document.getElementById("btn-conflict-reload").addEventListener("click", function () {
    app.allowUnload = true;
    window.location.reload();
  });
  document.getElementById("btn-conflict-download").addEventListener("click", function () {
    var blob = new Blob([JSON.stringify(currentDocument().document, null, 2)], { type: "application/json" });
    var a = document.createElement("a");
    a.href = URL.createObjectURL(blob);
    a.download = config.slug + ".mine.json";
    document.body.appendChild(a);
    a.click();
    a.remove();
  });
  document.getElementById("btn-export").addEventListener("click", function (evt) {
    if (app.dirty && !window.confirm("Export downloads the saved draft, without your unsaved changes. Continue?")) evt.preventDefault();
  });

  window.addEventListener("beforeunload", function (evt) {
    if (app.dirty && !app.allowUnload) {
      evt.preventDefault();
      evt.returnValue = "";
    }
  });

  // -- ready --------------------------------------------------------------------------------

  cy.ready(function () {
    requestAnimationFrame(function () {
      requestAnimationFrame(function () {
        app.ready = true;
        document.documentElement.setAttribute("data-editor-ready", "1");
        if (window.performance && performance.mark) performance.mark("editor-ready");
        scheduleCheck(0);
        setTimeout(function () {
          if (cy.navigator) cy.navigator({ container: "#cy-nav", viewLiveFramerate: 0, rerenderDelay: 400 });
        }, 50);
      });
    });
  });
})();
