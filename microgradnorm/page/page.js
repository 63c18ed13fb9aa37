/* The step-through page's script.
 *
 * Every number on this page was computed in Python by microgradnorm: node values,
 * gradients, local derivatives, each backward contribution and its running total
 * (see microgradnorm/page/data.py). They arrive as JSON; this script decides which
 * of them to show at the current step. Only when the learner changes the inputs
 * ("what if") does it compute: it replays the graph Python recorded, op by op.
 *
 * The timeline has T steps. Steps 1..N create the N nodes in data.forward's order
 * (x first, each parameter or constant just before its first use); step N + 1 starts backward (the root's grad is 1); each later step
 * is one contribution into.grad += local × grad, in the order backward() makes them.
 * Step t shows the state after t steps, so step 0 is an empty graph and step T the
 * graph with every gradient final.
 */
(function () {
  "use strict";

  const data = JSON.parse(document.getElementById("graph-data").textContent);
  const nodes = data.nodes;
  const contributions = data.backward;
  const N = nodes.length;
  const hasBackward = data.seed !== null;
  const T = N + (hasBackward ? 1 + contributions.length : 0);
  const forwardOrder = data.forward; // step s (1..N) makes node forwardOrder[s - 1]
  const madeAt = new Array(N);
  forwardOrder.forEach((k, s) => (madeAt[k] = s + 1));
  // the zoom at which the smallest text drawn (10 pt: Graphviz's node text and the gradient bars' signs) is 11 px,
  // just over (a point is 4/3 CSS px at 1:1)
  const MIN_READABLE = 11.1 / ((10 * 4) / 3);

  const byId = (id) => document.getElementById(id);
  const html = (text) =>
    String(text).replace(/[&<>"]/g, (c) => ({ "&": "&amp;", "<": "&lt;", ">": "&gt;", '"': "&quot;" })[c]);

  // The page's words, in the language it was made in (microgradnorm/page/text.py): say("counter", {t: 3, total: 9})
  // fills the {name} fields of one message; sayHtml escapes the message and its fields for innerHTML.
  const say = (key, fields) => data.ui[key].replace(/\{(\w+)\}/g, (m, name) => String((fields || {})[name]));
  const sayHtml = (key, fields) => {
    const escaped = {};
    Object.keys(fields || {}).forEach((name) => (escaped[name] = html(fields[name])));
    return html(data.ui[key]).replace(/\{(\w+)\}/g, (m, name) => escaped[name]);
  };

  // ---- the drawn elements of each node (absent in the drawing of stages only) -------------

  const el = nodes.map((node, k) => {
    const value = byId("v" + k);
    return {
      value: value,
      op: byId("op" + k),
      gradText: value ? value.querySelector("text.grad") : null,
      inEdges: node.inputs.map((_, slot) => byId("e" + k + "_" + slot)).filter(Boolean),
      outEdge: byId("o" + k),
    };
  });
  const stageOf = new Map(data.stages.map((s) => [s.name, s]));

  // ---- the state shown: step t, and each node's gradient so far ---------------------------

  let t = 0;
  let pinned = null; // a node the learner chose to look at; null: the panel follows the steps
  let pathNode = null; // the input x_i whose gradient paths are coloured
  let timer = null;
  let started = false; // set once the page has read its state from the URL
  let revealed = false; // the learner asked to see the final numbers before backward reaches them
  const received = new Array(N).fill(0); // contributions each node has received so far

  function setClass(element, name, on) {
    if (element) element.classList.toggle(name, on);
  }

  function created(k, on) {
    const e = el[k];
    [e.value, e.op, e.outEdge, ...e.inEdges].forEach((x) => setClass(x, "future", !on));
  }

  // Show a gradient on node k: the exact number in data-grad, the short one in the drawing,
  // and a ✓ beside the node once the gradient is final.
  const shown = new Array(N).fill(null); // the short text of each node's gradient as shown
  function showGrad(k, exact, text, final) {
    const e = el[k];
    shown[k] = exact === null ? null : text;
    if (!e.value) return;
    if (exact === null) {
      e.value.removeAttribute("data-grad");
    } else {
      e.value.setAttribute("data-grad", exact);
    }
    e.value.setAttribute("data-final", final ? "true" : "false");
    setClass(e.value, "final", final);
    if (e.gradText) e.gradText.textContent = data.gradWord + " " + (exact === null ? "–" : text);
    finalMark(k, final);
    gradBar(k, exact);
  }

  // The size and sign of a node's gradient so far, as a bar under its box: its length grows with the square root
  // of |grad| relative to the largest final gradient (data.gradScale, from Python), solid blue with a "+" when
  // positive, dashed vermillion with a "−" when negative (Okabe-Ito colours; the dashes and signs say it without
  // colour). The bars show the backward pass flowing before any number is read.
  function gradBar(k, exact) {
    const e = el[k];
    const g = exact === null ? 0 : Number(exact);
    if (!e.value || !(data.gradScale > 0) || g === 0 || !Number.isFinite(g)) {
      if (e.bar) e.bar.style.display = "none";
      return;
    }
    const box = e.box || (e.box = e.value.getBBox());
    if (!e.bar) {
      e.bar = document.createElementNS(SVG_NS, "g");
      e.bar.appendChild(document.createElementNS(SVG_NS, "rect"));
      e.bar.appendChild(document.createElementNS(SVG_NS, "text"));
      e.value.appendChild(e.bar);
    }
    const [rect, sign] = e.bar.childNodes;
    const fraction = Math.sqrt(Math.min(1, Math.abs(g) / data.gradScale));
    const width = Math.max(3, (box.width - 10) * fraction);
    e.bar.setAttribute("data-fraction", String(fraction));
    e.bar.style.display = "";
    e.bar.setAttribute("class", "grad-bar " + (g > 0 ? "positive" : "negative"));
    [["x", box.x + 10], ["y", box.y + box.height + 1.5], ["width", width], ["height", 3.5]].forEach(([a, v]) =>
      rect.setAttribute(a, v)
    );
    sign.setAttribute("x", String(box.x + 1));
    sign.setAttribute("y", String(box.y + box.height + 6.5));
    sign.textContent = g > 0 ? "+" : "−";
  }

  const SVG_NS = "http://www.w3.org/2000/svg";
  function finalMark(k, on) {
    const e = el[k];
    if (on && !e.mark && e.gradText) {
      const box = e.box || (e.box = e.value.getBBox()); // measured once, before anything is folded
      e.mark = document.createElementNS(SVG_NS, "text");
      e.mark.setAttribute("class", "final-mark");
      e.mark.setAttribute("x", String(box.x + box.width + 2));
      e.mark.setAttribute("y", String(box.y + box.height - 3));
      e.mark.textContent = "✓";
      e.value.appendChild(e.mark);
    } else if (!on && e.mark) {
      e.mark.remove();
      e.mark = null;
    }
  }

  function isFinal(k) {
    return received[k] === nodes[k].m;
  }

  // Apply step s (going from s - 1 to s), or undo it (going from s back to s - 1).
  function apply(s, forward) {
    if (s <= N) {
      created(forwardOrder[s - 1], forward);
    } else if (s === N + 1) {
      nodes.forEach((node, k) => {
        if (forward) showGrad(k, "0.0", "0", false);
        else showGrad(k, null, "", false);
      });
      if (forward) showGrad(data.seed.node, "1.0", "1", nodes[data.seed.node].m === 0);
    } else {
      const c = contributions[s - N - 2];
      received[c.into] += forward ? 1 : -1;
      if (forward) showGrad(c.into, c.total, c.totalText, isFinal(c.into));
      else showGrad(c.into, c.before, c.beforeText, isFinal(c.into));
    }
  }

  function goTo(target) {
    target = Math.max(0, Math.min(T, target));
    while (t < target) apply(++t, true);
    while (t > target) apply(t--, false);
    decorate();
  }

  // Steps where a stage ends: the forward pass between two stages, backward when the
  // contributions move on from the nodes of one stage to those of the next.
  const stops = [0];
  for (let s = 1; s <= N; s++) {
    if (s === N || nodes[forwardOrder[s]].stage !== nodes[forwardOrder[s - 1]].stage) stops.push(s);
  }
  if (hasBackward) {
    stops.push(N + 1);
    contributions.forEach((c, j) => {
      const next = contributions[j + 1];
      if (!next || next.stage !== c.stage) stops.push(N + 2 + j);
    });
  }

  function stageStep(direction) {
    const target = direction > 0 ? stops.find((s) => s > t) : [...stops].reverse().find((s) => s < t);
    goTo(target === undefined ? (direction > 0 ? T : 0) : target);
  }

  // ---- what the current step is about ------------------------------------------------------

  function currentStep() {
    if (t === 0) return { node: null, text: say("pressToStart", { n: N }), why: "" };
    if (t <= N) {
      const k = forwardOrder[t - 1];
      const node = nodes[k];
      const fields = { t: t, n: N, forward: node.forward, value: node.valueText };
      return {
        node: k,
        text: say(node.inputs.length ? "forwardStep" : "forwardLeaf", fields),
        why: node.stage ? say("stageOf", { stage: node.stageTitle }) : "",
      };
    }
    if (t === N + 1) return { node: data.seed.node, text: say("backwardStarts", { text: data.seed.text }), why: "" };
    const j = t - N - 2;
    const c = contributions[j];
    const text = say("backwardStep", { j: j + 1, m: contributions.length, text: c.text });
    return { node: c.into, from: c.from, edge: c.edge, text: text, why: c.why };
  }

  let marked = [];
  function decorate() {
    marked.forEach(([element, name]) => element.classList.remove(name));
    marked = [];
    const mark = (element, name) => {
      if (element) {
        element.classList.add(name);
        marked.push([element, name]);
      }
    };
    const step = currentStep();
    const focused = document.activeElement;
    const shownOn = (k) => {
      // where node k is drawn in the view shown: its own box, its stage's folded box, or its stage's box
      const stage = stageOf.get(nodes[k].stage);
      if (view === "stages") return stage ? [byId(stage.box)] : [];
      if (stage && folds.has(stage.name)) return [folds.get(stage.name)];
      return [el[k].value, el[k].op];
    };
    const cues = [];
    if (step.node !== null) {
      [el[step.node].value, el[step.node].op].forEach((x) => mark(x, "current"));
      const stage = stageOf.get(nodes[step.node].stage);
      if (stage) mark(byId(stage.box), "current");
      if (stage && folds.has(stage.name)) mark(folds.get(stage.name), "current");
      cues.push(["current", shownOn(step.node)]);
    }
    if (step.from !== undefined) {
      [el[step.from].value, el[step.from].op].forEach((x) => mark(x, "source"));
      cues.push(["source", shownOn(step.from)]);
    }
    if (step.edge) mark(byId(step.edge), "active");
    drawCues(cues);
    let text = step.text;
    if (t === T && T > 0) text = say(hasBackward ? "allFinal" : "forwardDone", { text: text });
    byId("status").textContent = text;
    byId("status-why").textContent = step.why;
    byId("scrubber").value = String(t);
    byId("scrubber").setAttribute("aria-valuetext", text);
    byId("counter").textContent = say("counter", { t: t, total: T });
    document.body.dataset.step = String(t);
    document.body.dataset.done = t === T ? "true" : "false"; // the stage boxes show final gradients only
    byId("back").disabled = byId("first").disabled = byId("back-stage").disabled = t === 0;
    byId("forward").disabled = byId("last").disabled = byId("forward-stage").disabled = t === T;
    if (focused && focused.disabled) {
      // the button in use ran out of steps: keep the keyboard on the stepping controls, not the page body
      const backward = ["back", "first", "back-stage"].includes(focused.id);
      byId(backward ? "forward" : "back").focus({ preventScroll: true }); // a notebook around the page stays still
    }
    showNode(pinned !== null ? pinned : step.node);
    if (pathNode !== null) showPaths(pathNode);
    if (t === T) pause();
    const first = step.node === null && N ? shownOn(forwardOrder[0]) : []; // step 0: where the forward pass starts
    const shrunk = keepInView(step.node !== null ? shownOn(step.node) : first, step.from !== undefined ? shownOn(step.from) : []);
    byId("zoom-note").textContent = shrunk ? say("zoomedOut", { percent: Math.round(100 * zoom) }) : "";
    saveState();
  }

  // A frame drawn around the node of the step ("current", solid) and the node its contribution comes
  // from ("source", dashed): a cue that does not rely on colour, with at least 3:1 contrast in both themes.
  let cueFrames = [];
  function drawCues(cues) {
    cueFrames.forEach((f) => f.remove());
    cueFrames = [];
    cues.forEach(([name, elements]) => {
      elements.filter(Boolean).forEach((element) => {
        if (element.closest(".folded")) return;
        const b = userBox(element);
        const rect = document.createElementNS(SVG_NS, "rect");
        const pad = 4;
        [["x", b.x - pad], ["y", b.y - pad], ["width", b.width + 2 * pad], ["height", b.height + 2 * pad], ["rx", 4]]
          .forEach(([a, v]) => rect.setAttribute(a, v));
        rect.setAttribute("class", "cue " + name);
        if (element.hasAttribute("transform")) rect.setAttribute("transform", element.getAttribute("transform"));
        element.parentNode.appendChild(rect);
        cueFrames.push(rect);
      });
    });
  }

  // An element's box in its own drawing units (getBBox), measured once: it does not change with the zoom or the
  // stacking (a transform), and measuring it again each step would lay out the whole drawing again.
  const userBoxes = new WeakMap();
  function userBox(element) {
    if (!userBoxes.has(element)) userBoxes.set(element, element.getBBox());
    return userBoxes.get(element);
  }

  // ---- the node panel --------------------------------------------------------------------------

  function gradNow(k) {
    if (!hasBackward) return sayHtml("gradForwardOnly");
    if (t <= N && !revealed) return sayHtml("gradNotYet");
    if (t <= N) return sayHtml("gradRevealed", { exact: nodes[k].gradText });
    const fields = { grad: shown[k], k: received[k], m: nodes[k].m, exact: nodes[k].gradText };
    if (nodes[k].m) return sayHtml(isFinal(k) ? "gradCountFinal" : "gradCount", fields);
    return isFinal(k) ? sayHtml("gradFinal", fields) : html(shown[k]);
  }

  function checkLine(node, k) {
    const c = node.check;
    if (!c || !(revealed || (t > N && isFinal(k)))) return ""; // no final numbers before backward gets there
    const mark = (ok) => (ok ? " ✓" : " ✗");
    const fields = { grad: node.gradText, closed: c.closedText, cf: mark(c.closedOk), fdValue: c.fdText, fd: mark(c.fdOk) };
    const line = sayHtml(c.fd === null ? "checkLineNoFd" : "checkLine", fields);
    return "<dt>" + sayHtml("factCheck") + "</dt><dd>" + line + "</dd>";
  }

  function showNode(k) {
    const box = byId("node-info");
    if (k === null || k === undefined) {
      box.innerHTML = '<p class="why">' + sayHtml("hoverHint") + "</p>";
      return;
    }
    const node = nodes[k];
    const exists = t >= madeAt[k];
    const partials = node.partials.map((p) => "<li>" + html(p.text) + "</li>").join("");
    box.innerHTML =
      "<h3>" + html(node.name) + "</h3>" +
      '<dl class="facts">' +
      "<dt>" + sayHtml("factValue") + '</dt><dd class="num">' +
      (exists ? html(node.valueText) + ' <span class="why">(' + html(node.value) + ")</span>" : sayHtml("notComputedYet")) + "</dd>" +
      "<dt>" + sayHtml("factGrad") + '</dt><dd class="num">' + gradNow(k) + "</dd>" +
      "<dt>" + sayHtml("factMadeBy") + "</dt><dd>" + (node.inputs.length ? html(node.forward) : sayHtml("leaf")) + "</dd>" +
      (node.op ? "<dt>" + sayHtml("factOp") + "</dt><dd>" + html(node.op) + "</dd>" : "") +
      "<dt>" + sayHtml("factStage") + "</dt><dd>" + (node.stage ? html(node.stageTitle) : sayHtml("none")) + "</dd>" +
      "<dt>" + sayHtml("factLabel") + "</dt><dd>" + (node.label ? html(node.label) : sayHtml("none")) + "</dd>" +
      (partials ? "<dt>" + sayHtml("factLocal") + '</dt><dd><ul class="partials">' + partials + "</ul></dd>" : "") +
      checkLine(node, k) +
      "</dl>";
    box.dataset.node = String(k);
  }

  function pin(k) {
    if (pinned !== null) {
      setClass(el[pinned].value, "pinned", false);
    }
    pinned = k;
    if (k !== null) setClass(el[k].value, "pinned", true);
    byId("node-select").value = k === null ? "" : String(k);
    showNode(k !== null ? k : currentStep().node);
  }

  function nodeOfElement(target) {
    const g = target.closest ? target.closest("g.node.value, g.node.op") : null;
    if (!g) return null;
    const m = /^(?:v|op)(\d+)$/.exec(g.id);
    return m ? Number(m[1]) : null;
  }

  // ---- the gradient paths into x_i ------------------------------------------------------------

  function showPaths(k) {
    document.querySelectorAll(".path-copy").forEach((copy) => copy.remove());
    pathNode = k;
    byId("path-select").value = k === null ? "" : String(k);
    const box = byId("path-info");
    if (k === null) {
      box.innerHTML = data.paths.inputs.length ? "" : '<p class="why">' + sayHtml("pathsNormOnly") + "</p>";
      return;
    }
    const info = data.paths.byNode[k];
    const onEdge = new Map(); // edge id -> the paths it is on
    info.paths.forEach((p) => p.edges.forEach((id) => onEdge.set(id, [...(onEdge.get(id) || []), p.key])));
    onEdge.forEach((keys, id) => {
      const edge = byId(id);
      const line = edge ? edge.querySelector("path") : null;
      if (!line) return;
      keys.forEach((key, i) => {
        const copy = line.cloneNode(false);
        copy.removeAttribute("stroke"); // the path's colour comes from its class
        const shift = (i - (keys.length - 1) / 2) * 3.5; // side by side where paths share an edge
        copy.setAttribute("class", "path-copy " + key);
        copy.setAttribute("transform", "translate(" + shift + " " + shift + ")");
        edge.appendChild(copy);
      });
    });
    // each path's share of dL/dx_i is final numbers: shown once backward has finished x_i (or on request)
    const known = revealed || (hasBackward && t > N && isFinal(k));
    let rows = info.paths
      .map(
        (p) =>
          '<tr><td><span class="swatch ' + p.key + '"></span></td><td><b>' + html(p.title) + "</b><br>" +
          html(p.route) + '<br><span class="why">' + html(p.formula) + '</span></td><td class="amount">' +
          html(p.amountText === null || !known ? "" : p.amountText) + "</td></tr>"
      )
      .join("");
    if (info.sumText !== null && known) {
      rows += "<tr><td></td><td><b>" + sayHtml("pathSum") + "</b> · " + sayHtml("autogradGrad", { name: nodes[k].name, grad: info.gradText }) +
        '</td><td class="amount"><b>' + html(info.sumText) + "</b></td></tr>";
    }
    box.innerHTML = '<table class="paths">' + rows + '</table><p class="why">' + html(info.note) + "</p>" +
      (data.paths.note ? '<p class="why">' + html(data.paths.note) + "</p>" : "");
  }

  // ---- the layout: stages stacked top to bottom, a folded stage as small as its box ----------------
  //
  // Graphviz lays the graph out left to right: every stage a column, the whole 3 to 6 pane widths wide, and an
  // edge such as xshift[i] -> xhat[i] crossing half of it (rstd is ten ops further on). The page keeps
  // Graphviz's drawing of each stage and stacks the stages top to bottom in forward order, left-aligned: the
  // graph is as wide as its widest stage, and a contribution's two nodes are at most the stages between them
  // apart. A folded stage takes the height of its box, so the stages below it move up. Only positions change
  // (an SVG translate per element; edges between stages are redrawn between their moved ends); what is drawn
  // is Graphviz's.

  const FOLD_HEIGHT = 34; // drawing units (points): one line of 16 px text and its margin
  const GAP = 14; // between two stacked stages
  const GUTTER = 10; // the overview's edges run left of its boxes, this much further per box they pass
  const folds = new Map(); // stage name -> the box drawn in place of its nodes
  const [layout, overview] = (() => {
    // measured with both drawings shown (a hidden drawing has no size); setView hides one of them at the start
    const hidden = byId("view-stages").hidden;
    byId("view-stages").hidden = false;
    const made = [fullLayout(), overviewLayout()];
    byId("view-stages").hidden = hidden;
    return made;
  })();

  // The drawing of every node: a block per stage (its cluster, title, nodes and the edges inside it).
  function fullLayout() {
    const svg = byId("svg-full");
    if (!svg || !data.stages.length) return null;
    const blocks = [];
    const blockOf = new Array(N).fill(null);
    data.stages.forEach((stage) => {
      const cluster = byId(stage.cluster);
      if (!cluster) return;
      const block = { stage: stage, elements: [cluster, byId(stage.title)].filter(Boolean), box: cluster.getBBox() };
      stage.nodes.forEach((k) => (blockOf[k] = block));
      blocks.push(block);
    });
    const loose = nodes.map((_, k) => k).filter((k) => blockOf[k] === null && el[k].value);
    if (loose.length) {
      // nodes of no stage: a last block of their own, as wide and tall as Graphviz drew them
      const boxes = loose.flatMap((k) => [el[k].value, el[k].op].filter(Boolean).map((x) => x.getBBox()));
      const x = Math.min(...boxes.map((b) => b.x));
      const y = Math.min(...boxes.map((b) => b.y));
      const box = { x: x, y: y, width: Math.max(...boxes.map((b) => b.x + b.width)) - x,
        height: Math.max(...boxes.map((b) => b.y + b.height)) - y };
      const block = { stage: null, elements: [], box: box };
      loose.forEach((k) => (blockOf[k] = block));
      blocks.push(block);
    }
    const crossing = []; // edges from one block to another, redrawn after every move
    nodes.forEach((node, k) => {
      if (!blockOf[k]) return;
      blockOf[k].elements.push(...[el[k].value, el[k].op, el[k].outEdge].filter(Boolean));
      node.inputs.forEach((c, slot) => {
        const edge = byId("e" + k + "_" + slot);
        if (!edge || !blockOf[c]) return;
        if (blockOf[c] === blockOf[k]) blockOf[k].elements.push(edge);
        else crossing.push(between(edge, blockOf[c], blockOf[k]));
      });
    });
    return laidOut(svg, "full-graph", blocks, crossing);
  }

  // The overview, one box per stage: a block per box, stacked as the stages of the full drawing are.
  function overviewLayout() {
    const svg = byId("svg-stages");
    if (!svg || !data.stages.length) return null;
    const blockOf = new Map();
    const blocks = [];
    data.stages.forEach((stage) => {
      const box = byId(stage.box);
      if (!box) return;
      const block = { stage: null, elements: [box], box: box.getBBox() };
      blockOf.set(stage.box, block);
      blocks.push(block);
    });
    const crossing = [];
    svg.querySelectorAll("g.edge").forEach((edge) => {
      const title = edge.querySelector("title");
      const [a, b] = (title ? title.textContent : "").split(" → ");
      if (blockOf.has(a) && blockOf.has(b)) crossing.push(between(edge, blockOf.get(a), blockOf.get(b)));
    });
    const made = laidOut(svg, "stages-graph", blocks, crossing);
    if (made) made.gutter = true; // its edges run down the left side, from box to box (see redrawInGutter)
    return made;
  }

  // An edge from block `from` to block `to`, as Graphviz drew it: its ends and the directions it leaves and
  // arrives in (null: an edge whose path this page cannot read, left as drawn).
  function between(edge, from, to) {
    const path = edge.querySelector("path");
    const p = path ? (path.getAttribute("d").match(/-?[\d.]+(?:e-?\d+)?/g) || []).map(Number) : [];
    if (p.length < 8) return null;
    const at = (i) => ({ x: p[2 * i], y: p[2 * i + 1] });
    const last = Math.floor(p.length / 2) - 1;
    return { edge: edge, path: path, head: edge.querySelector("polygon"), from: from, to: to,
      start: at(0), out: at(1), into: at(last - 1), end: at(last) };
  }

  function laidOut(svg, graphId, blocks, crossing) {
    if (!blocks.length) return null;
    const graph = byId(graphId);
    return { svg: svg, graph: graph, blocks: blocks, crossing: crossing.filter(Boolean),
      left: Math.min(...blocks.map((b) => b.box.x)), top: Math.min(...blocks.map((b) => b.box.y)),
      background: graph.querySelector(":scope > polygon") };
  }

  const offset = (block) => ({ x: block.dx, y: block.dy });
  const translate = (d) => "translate(" + d.x + " " + d.y + ")";

  // Put every stage in its place: top to bottom, each as tall as its drawing, or as its box when folded.
  function stack(l) {
    if (!l) return;
    const layout = l;
    let y = layout.top;
    const skips = layout.crossing.map((c) => layout.blocks.indexOf(c.to) - layout.blocks.indexOf(c.from));
    const gutter = layout.gutter ? GUTTER * (1 + Math.max(1, ...skips)) : 0;
    let right = layout.left + gutter;
    layout.blocks.forEach((block) => {
      const folded = block.stage !== null && folds.has(block.stage.name);
      block.dx = layout.left + gutter - block.box.x;
      block.dy = y - block.box.y;
      block.elements.forEach((x) => x.setAttribute("transform", translate(offset(block))));
      if (folded) folds.get(block.stage.name).setAttribute("transform", translate(offset(block)));
      const width = folded ? foldWidth(block) : block.box.width;
      right = Math.max(right, layout.left + width);
      y += (folded ? FOLD_HEIGHT : block.box.height) + GAP;
    });
    if (layout.gutter) layout.crossing.forEach((c, i) => redrawInGutter(c, layout.left + gutter, skips[i]));
    else layout.crossing.forEach(redraw);
    // the drawing's own bounds: the background and the viewBox follow the stacked stages
    const bottom = y - GAP;
    const m = layout.graph.transform.baseVal.consolidate();
    const [ex, ey] = m ? [m.matrix.e, m.matrix.f] : [0, 0];
    const pad = 4;
    const [x0, y0, x1, y1] = [layout.left - pad, layout.top - pad, right + pad, bottom + pad];
    if (layout.background) layout.background.setAttribute("points", [[x0, y0], [x1, y0], [x1, y1], [x0, y1]].join(" "));
    layout.svg.setAttribute("viewBox", [x0 + ex, y0 + ey, x1 - x0, y1 - y0].join(" "));
  }

  // An edge between two stages, from its moved tail to its moved head: a curve that leaves and arrives as
  // Graphviz drew it (the arrowhead moves with its head); at a folded stage it ends on the stage's box.
  function redraw(c) {
    const end = (block, point, side) => {
      const d = offset(block);
      if (block.stage === null || !folds.has(block.stage.name)) return { x: point.x + d.x, y: point.y + d.y };
      const b = block.box;
      return { x: b.x + d.x + (side > 0 ? foldWidth(block) : 0), y: b.y + d.y + FOLD_HEIGHT / 2 };
    };
    const s = end(c.from, c.start, 1);
    const e = end(c.to, c.end, -1);
    const unit = (a, b) => {
      const length = Math.hypot(b.x - a.x, b.y - a.y) || 1;
      return { x: (b.x - a.x) / length, y: (b.y - a.y) / length };
    };
    const u = unit(c.start, c.out);
    const v = unit(c.into, c.end);
    const reach = Math.max(30, 0.4 * Math.hypot(e.x - s.x, e.y - s.y));
    const d = [s.x, s.y, s.x + u.x * reach, s.y + u.y * reach, e.x - v.x * reach, e.y - v.y * reach, e.x, e.y];
    c.path.setAttribute("d", "M" + d[0] + "," + d[1] + "C" + d.slice(2).join(","));
    if (c.head) {
      const shift = { x: e.x - c.end.x, y: e.y - c.end.y };
      c.head.setAttribute("transform", translate(shift));
    }
    c.edge.querySelectorAll(".path-copy").forEach((copy) => copy.setAttribute("d", c.path.getAttribute("d")));
  }

  // An edge of the overview, whose boxes are stacked in one column: from the left side of its tail's box, out
  // into the gutter on the left (further for an edge that passes more boxes), into the left side of its head's.
  function redrawInGutter(c, x, skip) {
    const middle = (block) => block.box.y + block.dy + block.box.height / 2;
    const [sy, ey] = [middle(c.from) + 4, middle(c.to) - 4];
    const bulge = GUTTER * (0.8 + skip);
    const arrow = 7;
    c.path.setAttribute("d", "M" + [x, sy] + "C" + [x - bulge, sy, x - bulge, ey, x - arrow, ey].join(","));
    if (c.head) c.head.setAttribute("points", [[x, ey], [x - arrow, ey - 3.5], [x - arrow, ey + 3.5], [x, ey]].join(" "));
  }

  function foldWidth(block) {
    return block.foldWidth || block.box.width;
  }

  // Fold a stage: its nodes hidden, one box with its formula in their place.
  function fold(stage, on) {
    const cluster = byId(stage.cluster);
    if (!cluster) return;
    const block = layout ? layout.blocks.find((b) => b.stage === stage) : null;
    const inside = new Set(stage.nodes);
    const parts = [byId(stage.title), cluster];
    stage.nodes.forEach((k) => {
      parts.push(el[k].value, el[k].op, el[k].outEdge);
      nodes[k].inputs.forEach((c, slot) => {
        if (inside.has(c)) parts.push(byId("e" + k + "_" + slot));
      });
    });
    parts.forEach((x) => setClass(x, "folded", on));
    if (on && !folds.has(stage.name)) {
      const b = block ? block.box : cluster.getBBox();
      const height = block ? FOLD_HEIGHT : b.height;
      const g = document.createElementNS(SVG_NS, "g");
      g.setAttribute("class", "fold");
      g.setAttribute("id", "folded-" + stage.cluster);
      const rect = document.createElementNS(SVG_NS, "rect");
      [["x", b.x], ["y", b.y], ["width", b.width], ["height", height], ["rx", 8]].forEach(([a, v]) => rect.setAttribute(a, v));
      g.appendChild(rect);
      // One line, 16 px unless the box is narrower: "var: var = Σ xshift² / n · 6 values folded"
      const text = document.createElementNS(SVG_NS, "text");
      const size = Math.min(16, height * 0.45);
      text.setAttribute("x", b.x + 8);
      text.setAttribute("y", b.y + height / 2 + size / 3);
      text.style.fontSize = size + "px";
      const fields = { stage: stage.shown, formula: stage.formula, n: stage.nodes.length };
      text.textContent = say(stage.formula ? "folded" : "foldedNoFormula", fields);
      g.appendChild(text);
      const tip = document.createElementNS(SVG_NS, "title");
      tip.textContent = say("clickToOpen", { stage: stage.shown });
      g.appendChild(tip);
      g.addEventListener("click", () => setFold(stage.name, false));
      cluster.parentNode.appendChild(g); // last, so it covers the edges that enter the stage
      const width = text.getComputedTextLength() + 16;
      if (width > b.width) {
        if (block) block.foldWidth = width; // a box as wide as its line: it keeps its 16 px text
        else text.style.fontSize = (size * (b.width - 16)) / (width - 16) + "px";
      }
      rect.setAttribute("width", block ? foldWidth(block) : b.width);
      folds.set(stage.name, g);
    } else if (!on && folds.has(stage.name)) {
      folds.get(stage.name).remove();
      folds.delete(stage.name);
      if (block) block.foldWidth = 0;
    }
    stack(layout);
  }

  function setFold(name, on) {
    fold(stageOf.get(name), on);
    const button = byId("fold-" + stageOf.get(name).cluster);
    if (button) {
      button.setAttribute("aria-pressed", on ? "true" : "false");
      button.textContent = say(on ? "openStage" : "foldStage", { stage: stageOf.get(name).shown });
    }
    if (t > 0) decorate(); // the step's node may now be on the folded box, or back in view
  }

  // ---- views, zoom and theme -------------------------------------------------------------------

  let view = data.view.start;
  let zoom = null; // the zoom shown; null: Graphviz's own size, or larger if the window is wider
  let chosen = null; // the zoom the learner chose ("0" key, 1:1, Fit, + and −); a step may zoom out from it

  function setView(name) {
    view = name;
    byId("view-full").hidden = name !== "full";
    byId("view-stages").hidden = name !== "stages";
    const toggle = byId("view-toggle"); // its label stays "One box per stage"; aria-pressed says whether it is on
    toggle.setAttribute("aria-pressed", name === "stages" ? "true" : "false");
    toggle.disabled = !data.view.full;
    byId("stage-list").querySelectorAll("button").forEach((b) => (b.disabled = name !== "full"));
    zoom = chosen = null;
    applyZoom();
    if (started) decorate();
  }

  function applyZoom() {
    const svg = byId(view === "full" ? "svg-full" : "svg-stages");
    if (!svg) return;
    const box = svg.viewBox.baseVal;
    const natural = (box.width * 4) / 3; // Graphviz measures in points; CSS pixels are 3/4 of a point
    svg.style.width = zoom === null ? "max(100%, " + Math.round(natural) + "px)" : Math.round(natural * zoom) + "px";
    laterMinimap();
  }

  // The minimap follows at the next frame, once per frame however many zooms and scrolls a step made.
  let minimapDue = false;
  function laterMinimap() {
    if (minimapDue) return;
    minimapDue = true;
    requestAnimationFrame(() => {
      minimapDue = false;
      updateMinimap();
    });
  }

  // The minimap: the drawing shown (an SVG <use> of it, no second copy) with the pane's part framed. It is
  // hidden when the whole drawing fits in the pane.
  function updateMinimap() {
    const map = byId("minimap");
    const svg = currentSvg();
    const area = byId("graph-area");
    if (!svg || !map) return;
    const box = svg.viewBox.baseVal;
    map.setAttribute("viewBox", [box.x, box.y, box.width, box.height].join(" "));
    byId("minimap-use").setAttribute("href", "#" + (view === "full" ? "full" : "stages") + "-graph");
    map.hidden = area.scrollWidth <= area.clientWidth + 1 && area.scrollHeight <= area.clientHeight + 1;
    const shown = svg.getBoundingClientRect();
    const pane = area.getBoundingClientRect();
    const scale = shown.width / box.width; // CSS px per drawing unit
    const frame = byId("minimap-view");
    frame.setAttribute("x", String(box.x + (pane.left - shown.left) / scale));
    frame.setAttribute("y", String(box.y + (pane.top - shown.top) / scale));
    frame.setAttribute("width", String(area.clientWidth / scale));
    frame.setAttribute("height", String(area.clientHeight / scale));
  }

  function minimapClick(e) {
    const map = byId("minimap");
    const svg = currentSvg();
    const area = byId("graph-area");
    const point = map.createSVGPoint();
    [point.x, point.y] = [e.clientX, e.clientY];
    const at = point.matrixTransform(map.getScreenCTM().inverse()); // drawing units
    const box = svg.viewBox.baseVal;
    const shown = svg.getBoundingClientRect();
    const pane = area.getBoundingClientRect();
    const scale = shown.width / box.width;
    const x = shown.left + (at.x - box.x) * scale; // where that point is now, on screen
    const y = shown.top + (at.y - box.y) * scale;
    area.scrollBy({ left: x - (pane.left + pane.right) / 2, top: y - (pane.top + pane.bottom) / 2, behavior: "instant" });
  }

  // Keep the step's node, and in backward the node its contribution comes from, in the graph pane. The rule, in
  // order (the browser tests check each case):
  //  1. both fit wholly at the zoom the learner chose: pan, if needed, so that they are in the pane;
  //  2. else zoom out until both fit wholly, as far as text stays readable (11 px, MIN_READABLE);
  //  3. else, at that readable zoom, centre the pane on the gap between them: both are partly in view (a node's
  //     nearer part, at least PEEK px of it), the step's node on the side nearer the source;
  //  4. else (they are further apart than the pane at 11 px: a phone, or a long edge across a tall stage)
  //     zoom out just far enough for rule 3, below 11 px, for this step only; the next step returns to the
  //     learner's zoom. Text under 11 px is the price of seeing where a contribution comes from.
  // The learner's zoom (+, −, 1:1, Fit) is never exceeded: steps only zoom out from it.
  const PEEK = 24; // CSS px of each node shown at least, under rules 3 and 4
  const MARGIN = 12; // CSS px kept free at the pane's edges
  function keepInView(current, source) {
    const area = byId("graph-area");
    const visible = (elements) => elements.filter((x) => x && !x.closest(".folded") && x.getClientRects().length);
    // a node's first element: its box (the op circle beside it is left out: with it the two could make an L whose
    // bounding box is in the pane while neither part is)
    const mine = visible(current).slice(0, 1);
    const theirs = visible(source).slice(0, 1);
    if (!mine.length) return false;
    const svg = currentSvg();
    if (zoom !== chosen) {
      zoom = chosen;
      applyZoom();
    }
    const box = (elements) => {
      const rects = elements.map((x) => x.getBoundingClientRect());
      return {
        left: Math.min(...rects.map((r) => r.left)),
        right: Math.max(...rects.map((r) => r.right)),
        top: Math.min(...rects.map((r) => r.top)),
        bottom: Math.max(...rects.map((r) => r.bottom)),
      };
    };
    const room = [area.clientWidth - 2 * MARGIN, area.clientHeight - 2 * MARGIN];
    const span = (u) => [u.right - u.left, u.bottom - u.top];
    const gap = (a, b) => [
      Math.max(0, b.left - a.right, a.left - b.right),
      Math.max(0, b.top - a.bottom, a.top - b.bottom),
    ];
    let u = box(mine.concat(theirs));
    let shrunk = false;
    const now = svg.getBoundingClientRect().width / naturalWidth(svg);
    const [w, h] = span(u);
    if (w > room[0] || h > room[1]) {
      const whole = Math.min(room[0] / w, room[1] / h); // rule 2's factor
      const [gx, gy] = theirs.length ? gap(box(mine), box(theirs)) : [0, 0];
      const peek = (g, r) => (g > 0 ? (r - 2 * PEEK) / g : Infinity);
      const apart = Math.min(peek(gx, room[0]), peek(gy, room[1])); // rule 4's factor
      let wanted = Math.max(MIN_READABLE, now * whole);
      if (theirs.length && wanted > now * apart) wanted = now * apart;
      if (wanted < now - 1e-3) {
        zoom = wanted;
        applyZoom();
        u = box(mine.concat(theirs));
        shrunk = wanted < MIN_READABLE; // rule 4: said under the step
      }
    }
    // pan: the union of both where it fits on an axis, else the middle of the gap between them
    const a = box(mine);
    const b = theirs.length ? box(theirs) : a;
    const pane = area.getBoundingClientRect();
    const inside = [pane.left + area.clientLeft + MARGIN, pane.top + area.clientTop + MARGIN];
    const axis = (lo, hi, aLo, aHi, bLo, bHi, start, size) => {
      if (hi - lo <= size) return lo < start ? lo - start : hi > start + size ? hi - start - size : 0;
      const middle = aHi <= bLo ? (aHi + bLo) / 2 : bHi <= aLo ? (bHi + aLo) / 2 : (Math.max(aLo, bLo) + Math.min(aHi, bHi)) / 2;
      return middle - (start + size / 2);
    };
    const dx = axis(u.left, u.right, a.left, a.right, b.left, b.right, inside[0], room[0]);
    const dy = axis(u.top, u.bottom, a.top, a.bottom, b.top, b.bottom, inside[1], room[1]);
    if (dx || dy) area.scrollBy({ left: dx, top: dy, behavior: "instant" });
    return shrunk;
  }

  function currentSvg() {
    return byId(view === "full" ? "svg-full" : "svg-stages");
  }

  function naturalWidth(svg) {
    return (svg.viewBox.baseVal.width * 4) / 3; // Graphviz measures in points; a CSS pixel is 3/4 of a point
  }

  function zoomBy(factor) {
    const svg = byId(view === "full" ? "svg-full" : "svg-stages");
    if (!svg) return;
    const now = zoom === null ? svg.getBoundingClientRect().width / ((svg.viewBox.baseVal.width * 4) / 3) : zoom;
    zoom = chosen = Math.max(0.2, Math.min(6, now * factor));
    applyZoom();
  }

  function fitWindow() {
    const svg = byId(view === "full" ? "svg-full" : "svg-stages");
    const area = byId("graph-area");
    if (!svg) return;
    const box = svg.viewBox.baseVal;
    const natural = [(box.width * 4) / 3, (box.height * 4) / 3];
    zoom = chosen = Math.min((area.clientWidth - 20) / natural[0], (area.clientHeight - 20) / natural[1]);
    applyZoom();
    decorate();
  }

  function setTheme(name) {
    document.documentElement.dataset.theme = name;
    byId("theme").setAttribute("aria-pressed", name === "dark" ? "true" : "false"); // its label stays "Dark"
  }

  // ---- playing ----------------------------------------------------------------------------------

  function pause() {
    if (timer !== null) clearInterval(timer);
    timer = null;
    byId("play").setAttribute("aria-pressed", "false");
  }

  function togglePlay() {
    if (timer !== null) return pause();
    if (t === T) goTo(0);
    timer = setInterval(() => goTo(t + 1), 1000 / Number(byId("speed").value));
    byId("play").setAttribute("aria-pressed", "true");
  }

  // ---- controls -----------------------------------------------------------------------------------

  function option(value, text) {
    const o = document.createElement("option");
    o.value = value;
    o.textContent = text;
    return o;
  }

  function buildControls() {
    const nodeSelect = byId("node-select");
    nodeSelect.appendChild(option("", say("followSteps")));
    forwardOrder.forEach((k) =>
      nodeSelect.appendChild(option(String(k), nodes[k].name + (nodes[k].stage ? " · " + nodes[k].stageTitle : "")))
    );
    nodeSelect.addEventListener("change", () => pin(nodeSelect.value === "" ? null : Number(nodeSelect.value)));

    const pathSelect = byId("path-select");
    pathSelect.appendChild(option("", say("noInput")));
    data.paths.inputs.forEach((k) => pathSelect.appendChild(option(String(k), nodes[k].name)));
    pathSelect.addEventListener("change", () => showPaths(pathSelect.value === "" ? null : Number(pathSelect.value)));
    if (!data.paths.inputs.length) byId("paths-section").hidden = true;

    const list = byId("stage-list");
    data.stages.forEach((stage) => {
      const button = document.createElement("button");
      button.type = "button";
      button.id = "fold-" + stage.cluster;
      button.textContent = say("foldStage", { stage: stage.shown });
      button.setAttribute("aria-pressed", "false");
      button.addEventListener("click", () => setFold(stage.name, !folds.has(stage.name)));
      list.appendChild(button);
    });
    if (!data.stages.length) byId("stages-section").hidden = true;
    if (!hasBackward) byId("bars-legend").hidden = true;
    if (!hasBackward) byId("reveal").closest("label").hidden = true;

    if (data.check) byId("check-info").textContent = data.check.text;
    else byId("check-section").hidden = true;

    const speed = byId("speed");
    [1, 2, 5, 10, 25, 60].forEach((n) => speed.appendChild(option(String(n), say("perSecond", { n: n }))));
    speed.value = "2";
    speed.addEventListener("change", () => {
      if (timer !== null) {
        pause();
        togglePlay();
      }
    });
    byId("reveal").addEventListener("change", (e) => {
      revealed = e.target.checked;
      decorate();
    });

    const scrubber = byId("scrubber");
    scrubber.max = String(T);
    scrubber.addEventListener("input", () => goTo(Number(scrubber.value)));
    const click = (id, action) => byId(id).addEventListener("click", action);
    click("first", () => goTo(0));
    click("back-stage", () => stageStep(-1));
    click("back", () => goTo(t - 1));
    click("play", togglePlay);
    click("forward", () => goTo(t + 1));
    click("forward-stage", () => stageStep(1));
    click("last", () => goTo(T));
    click("view-toggle", () => setView(view === "full" ? "stages" : "full"));
    click("zoom-in", () => zoomBy(1.25));
    click("zoom-out", () => zoomBy(0.8));
    click("zoom-actual", () => {
      zoom = chosen = null;
      applyZoom();
    });
    click("zoom-fit", fitWindow);
    click("theme", () => setTheme(document.documentElement.dataset.theme === "dark" ? "light" : "dark"));
    byId("minimap").addEventListener("click", minimapClick);
    byId("graph-area").addEventListener("scroll", laterMinimap);
    window.addEventListener("resize", laterMinimap);

    const area = byId("graph-area");
    area.addEventListener("mouseover", (e) => {
      const k = nodeOfElement(e.target);
      if (k !== null && pinned === null) showNode(k); // a pinned node stays until the learner lets it go
    });
    area.addEventListener("mouseout", (e) => {
      if (nodeOfElement(e.target) !== null && pinned === null) showNode(currentStep().node);
    });
    area.addEventListener("click", (e) => {
      const k = nodeOfElement(e.target);
      if (k !== null) pin(pinned === k ? null : k);
      const box = e.target.closest ? e.target.closest("#svg-stages g.node.stage") : null;
      if (box) openStage(box.id);
    });
    // the stage view is the overview: a stage's box opens that stage in the drawing of every node, the others folded
    if (data.view.full) {
      data.stages.forEach((stage) => {
        const box = byId(stage.box);
        if (!box) return;
        box.setAttribute("tabindex", "0");
        box.setAttribute("role", "button");
        box.setAttribute("aria-label", say("openInPlace", { stage: stage.shown }));
        box.addEventListener("keydown", (e) => {
          if (e.key === "Enter" || e.key === " ") {
            e.preventDefault();
            e.stopPropagation();
            openStage(box.id);
          }
        });
      });
    }
  }

  function openStage(boxId) {
    const stage = data.stages.find((s) => s.box === boxId);
    if (!stage || !data.view.full) return;
    setView("full");
    data.stages.forEach((s) => setFold(s.name, s.name !== stage.name));
    const cluster = byId(stage.cluster);
    if (cluster) keepInView([cluster], []);
  }

  const KEYS = {
    ArrowRight: (e) => (e.shiftKey ? stageStep(1) : goTo(t + 1)),
    ArrowLeft: (e) => (e.shiftKey ? stageStep(-1) : goTo(t - 1)),
    PageDown: () => goTo(t + 1),
    PageUp: () => goTo(t - 1),
    " ": () => togglePlay(),
    Home: () => goTo(0),
    End: () => goTo(T),
    "+": () => zoomBy(1.25),
    "=": () => zoomBy(1.25),
    "-": () => zoomBy(0.8),
    "0": () => {
      zoom = chosen = null;
      applyZoom();
    },
    Escape: () => pin(null),
  };

  // ---- what if: the learner changes the inputs ------------------------------------------------------
  //
  // Python recorded each node's op (data.nodes[k].raw) and inputs; replaying that record forward (in the order the
  // engine made the nodes) and backward (data.backward's contributions, in backward()'s order) gives every value
  // and gradient for new inputs. Each op's forward and local derivative is the engine's formula
  // (microgradnorm/engine.py), evaluated in the same order, so the numbers agree with the engine's to the last
  // bit or two (the tests compare at a relative 1e-12). This is an interpreter of the recorded ops, not a second
  // implementation of any norm: it knows ops, not LayerNorm.

  const power = (a, p) => (p === 2 ? a * a : p === -1 ? 1 / a : p === 0.5 ? Math.sqrt(a) : Math.pow(a, p));
  const OPS = {
    "+": [(v) => v[0] + v[1], () => [1, 1]],
    "-": [(v) => v[0] - v[1], () => [1, -1]],
    "*": [(v) => v[0] * v[1], (v) => [v[1], v[0]]],
    sum: [(v) => v.reduce((total, x) => total + x, 0), (v) => v.map(() => 1)],
    dot: [
      (v) => {
        const n = v.length / 2;
        let total = 0;
        for (let i = 0; i < n; i++) total += v[i] * v[n + i];
        return total;
      },
      (v) => v.slice(v.length / 2).concat(v.slice(0, v.length / 2)),
    ],
    exp: [(v) => Math.exp(v[0]), (v, out) => [out]],
    log: [(v) => Math.log(v[0]), (v) => [1 / v[0]]],
    sqrt: [(v) => Math.sqrt(v[0]), (v, out) => [out !== 0 ? 0.5 / out : Infinity]],
    tanh: [(v) => Math.tanh(v[0]), (v, out) => [1 - out * out]],
    relu: [(v) => (v[0] > 0 ? v[0] : 0), (v) => [v[0] > 0 ? 1 : 0]],
    sigmoid: [
      (v) => (v[0] >= 0 ? 1 / (1 + Math.exp(-v[0])) : Math.exp(v[0]) / (1 + Math.exp(v[0]))),
      (v, out) => [out * (1 - out)],
    ],
  };
  function op(raw) {
    if (OPS[raw]) return OPS[raw];
    const p = Number(raw.slice(2)); // "**2", "**-1", "**0.5": one op per exponent, as in the engine
    return [
      (v) => power(v[0], p),
      (v) => [v[0] === 0 && p < 1 ? (p === 0 ? 0 : Infinity) : p * power(v[0], p - 1)],
    ];
  }

  // A number as the drawing writes it: Python's f"{v:.4g}" (microgradnorm.viz.num).
  function num(v) {
    if (Number.isNaN(v)) return "nan";
    if (!Number.isFinite(v)) return v > 0 ? "inf" : "-inf";
    if (v === 0) return "0";
    const [mantissa, power10] = v.toExponential(3).split("e");
    const e = Number(power10);
    const strip = (text) => (text.includes(".") ? text.replace(/0+$/, "").replace(/\.$/, "") : text);
    if (e < -4 || e >= 4) return strip(mantissa) + "e" + (e < 0 ? "-" : "+") + String(Math.abs(e)).padStart(2, "0");
    return strip(v.toFixed(Math.max(0, 3 - e)));
  }
  const exact = (v) => (Number.isInteger(v) && Math.abs(v) < 1e16 ? v.toFixed(1) : String(v));

  const groups = new Map(); // what-if group -> the positions of its leaves, in forward order
  forwardOrder.forEach((k) => {
    if (nodes[k].edit) groups.set(nodes[k].edit, [...(groups.get(nodes[k].edit) || []), k]);
  });
  const original = nodes.map((node) => Number(node.value));
  let edited = false;

  // Every value and gradient for the leaf values `leaf` (position -> number), or null if one is not finite.
  function replay(leaf) {
    const value = nodes.map((node, k) => (k in leaf ? leaf[k] : original[k]));
    for (const k of forwardOrder) {
      const node = nodes[k];
      if (node.inputs.length) value[k] = op(node.raw)[0](node.inputs.map((c) => value[c]));
    }
    if (value.some((v) => !Number.isFinite(v))) return null;
    const grad = nodes.map(() => 0);
    const locals = new Map();
    const steps = [];
    if (hasBackward) grad[data.seed.node] = 1;
    for (const c of contributions) {
      if (!locals.has(c.from)) {
        const inputs = nodes[c.from].inputs.map((i) => value[i]);
        locals.set(c.from, op(nodes[c.from].raw)[1](inputs, value[c.from]));
      }
      const local = locals.get(c.from)[c.slot];
      const before = grad[c.into];
      const amount = local * grad[c.from];
      grad[c.into] = nodes[c.from].raw === "+" || nodes[c.from].raw === "sum" ? before + grad[c.from] : before + amount;
      steps.push({ local: local, outGrad: grad[c.from], amount: amount, before: before, total: grad[c.into] });
    }
    return { value: value, grad: grad, locals: locals, steps: steps };
  }

  // Put the numbers of `r` (from replay) everywhere the page shows them.
  function showReplay(r) {
    const keep = t;
    goTo(0);
    nodes.forEach((node, k) => {
      node.value = exact(r.value[k]);
      node.valueText = num(r.value[k]);
      if (hasBackward) {
        node.grad = exact(r.grad[k]);
        node.gradText = num(r.grad[k]);
      }
      const local = r.locals.get(k);
      node.partials.forEach((p, slot) => {
        if (local) p.value = exact(local[slot]);
        if (local && p.head !== null) p.text = p.head + " = " + num(local[slot]);
      });
      node.check = null; // the three-way check was run on the inputs the page was made with
      if (el[k].value) el[k].value.setAttribute("data-value", node.value);
      const text = el[k].value && el[k].value.querySelector("text.data");
      if (text) text.textContent = data.dataWord + " " + node.valueText;
    });
    contributions.forEach((c, j) => {
      const s = r.steps[j];
      c.before = exact(s.before);
      c.beforeText = num(s.before);
      c.total = exact(s.total);
      c.totalText = num(s.total);
      const fields = { name: nodes[c.into].name, local: num(s.local), grad: num(s.outGrad), product: num(s.amount) };
      Object.assign(fields, { total: num(s.total), k: c.k, m: c.m });
      c.text = say("contribution", fields);
      c.why = nodes[c.from].partials[c.slot].text + "; " + nodes[c.from].name + ".grad = " + num(s.outGrad);
    });
    data.gradScale = Math.max(0, ...r.grad.filter(Number.isFinite).map(Math.abs));
    Object.values(data.paths.byNode).forEach((info) => {
      info.paths.forEach((p) => (p.amountText = null)); // from the closed forms on the original inputs
      info.sumText = null;
    });
    byId("check-section").hidden = true;
    document.body.dataset.edited = "true"; // the stage view's numbers are Graphviz's, of the original inputs
    edited = true;
    goTo(keep);
  }

  function buildWhatIf() {
    const box = byId("whatif-fields");
    if (!groups.size) {
      byId("whatif-section").hidden = true;
      return;
    }
    groups.forEach((ks, name) => {
      const label = document.createElement("label");
      label.className = "field";
      label.textContent = name + " ";
      const input = document.createElement("input");
      input.type = "text";
      input.id = "whatif-" + name;
      input.dataset.group = name;
      input.setAttribute("spellcheck", "false");
      input.value = ks.map((k) => nodes[k].value).join(", ");
      label.appendChild(input);
      box.appendChild(label);
    });
    byId("whatif-apply").addEventListener("click", applyWhatIf);
    byId("whatif-reset").addEventListener("click", () => {
      groups.forEach((ks, name) => (byId("whatif-" + name).value = ks.map((k) => exact(original[k])).join(", ")));
      applyWhatIf();
    });
  }

  function applyWhatIf() {
    const error = byId("whatif-error");
    const leaf = {};
    for (const [name, ks] of groups) {
      const text = byId("whatif-" + name).value.trim();
      const parts = text === "" ? [] : text.split(/[\s,]+/).filter(Boolean);
      const numbers = parts.map(Number);
      if (parts.length !== ks.length || numbers.some((v) => !Number.isFinite(v))) {
        error.textContent = say("whatIfCount", { name: name, n: ks.length, got: text || "—" });
        return;
      }
      if (name === "eps" && numbers.some((v) => v < 0)) {
        error.textContent = say("whatIfEps", { got: text });
        return;
      }
      ks.forEach((k, i) => (leaf[k] = numbers[i]));
    }
    const r = replay(leaf);
    if (r === null) {
      error.textContent = say("whatIfNotFinite");
      return;
    }
    error.textContent = "";
    showReplay(r);
    saveState();
  }

  // ---- the state in the URL: #step=78&node=xhat[2]&paths=x[0]&view=stages ------------------------------

  const byName = new Map(nodes.map((node, k) => [node.name, k]));
  function saveState() {
    if (!started) return;
    const parts = ["step=" + t];
    if (pinned !== null) parts.push("node=" + encodeURIComponent(nodes[pinned].name));
    if (pathNode !== null) parts.push("paths=" + encodeURIComponent(nodes[pathNode].name));
    if (view !== data.view.start) parts.push("view=" + view);
    if (edited) {
      groups.forEach((ks, name) => parts.push(name + "=" + encodeURIComponent(ks.map((k) => nodes[k].value).join(","))));
    }
    const hash = "#" + parts.join("&");
    if (location.hash !== hash) history.replaceState(null, "", hash);
  }

  function loadState() {
    const state = {};
    location.hash.replace(/^#/, "").split("&").forEach((part) => {
      const at = part.indexOf("=");
      if (at > 0) state[part.slice(0, at)] = decodeURIComponent(part.slice(at + 1));
    });
    if ([...groups.keys()].some((name) => state[name] !== undefined)) {
      groups.forEach((ks, name) => {
        if (state[name] !== undefined) byId("whatif-" + name).value = state[name];
      });
      applyWhatIf();
    }
    if ((state.view === "full" && data.view.full) || state.view === "stages") setView(state.view);
    if (state.paths !== undefined && data.paths.byNode[byName.get(state.paths)]) showPaths(byName.get(state.paths));
    if (state.node !== undefined && byName.has(state.node)) pin(byName.get(state.node));
    const step = Number(state.step);
    return Number.isInteger(step) ? step : 0;
  }

  document.addEventListener("keydown", (e) => {
    const tag = (e.target.tagName || "").toLowerCase();
    const box = tag === "input" && e.target.type === "checkbox";
    if ((["select", "input", "textarea"].includes(tag) && !box) && e.key !== "Escape") return; // the control's own keys
    if ((tag === "button" || box) && (e.key === " " || e.key === "Enter")) return; // pressing the focused control
    if (e.altKey || e.ctrlKey || e.metaKey) return;
    const action = KEYS[e.key];
    if (!action) return;
    e.preventDefault();
    action(e);
  });

  // ---- start --------------------------------------------------------------------------------------

  buildControls();
  buildWhatIf();
  stack(layout);
  stack(overview);
  el.forEach((e) => {
    if (e.value) userBoxes.set(e.value, (e.box = e.value.getBBox())); // before the gradient bars are added to it
  });
  nodes.forEach((node, k) => {
    if (el[k].value) el[k].value.setAttribute("data-value", node.value);
    created(k, false);
    showGrad(k, null, "", false);
  });
  let dark = window.matchMedia && window.matchMedia("(prefers-color-scheme: dark)").matches;
  try {
    // inside a JupyterLab notebook (an iframe of the same origin): follow the notebook's theme
    const notebook = window.parent !== window ? window.parent.document.body.dataset.jpThemeLight : undefined;
    if (notebook !== undefined) dark = notebook === "false";
  } catch (e) {
    // another origin: keep the system's preference
  }
  setTheme(dark ? "dark" : "light");
  setView(data.view.full ? data.view.start : "stages");
  showPaths(data.pathStart);
  const startAt = loadState();
  started = true;
  goTo(startAt);
  decorate();
  window.addEventListener("hashchange", () => goTo(loadState()));
})();
