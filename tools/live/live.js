/* The website's live views (tools/live_pages.py): the course's own exported models, run in the
   reader's browser by onnxruntime-web, in a worker (worker.js) that the page's <head> started.

   Nothing here implements a model: the page runs the ONNX graph that course_lib exported
   (course_lib.gpt.live.export, course_lib.bert.live.export). What is here: reading the
   description the export wrote into the file (ModelProto.metadata_props, key "course"), the
   tokenisers' small algorithms (characters; chapter 7's byte-level BPE from its tables, tested
   equal to course_lib's encoder in tests/test_live.py), and drawing the results. Files the
   reader opens with "Open your own model" are read in the browser and sent nowhere. */
(function () {
  "use strict";
  var SCRIPT = document.currentScript.src;
  var VENDOR = new URL("../_vendor/onnxruntime-web/dist/", SCRIPT).href;
  var api = (window.courseLive = window.courseLive || { views: {}, timings: {}, marks: {} });

  // -- the description inside an exported file ----------------------------------------------

  function varint(buf, pos) {
    var value = 0, scale = 1, b;
    do {
      if (pos >= buf.length) throw new Error("the file ends inside a number: not an ONNX file");
      b = buf[pos++];
      value += (b & 0x7f) * scale;
      scale *= 128;
    } while (b & 0x80);
    return [value, pos];
  }

  /** The fields of one protobuf message: [[field number, wire type, value or [start, end]]]. */
  function fields(buf, start, end) {
    var out = [], pos = start, r;
    while (pos < end) {
      r = varint(buf, pos); pos = r[1];
      var field = Math.floor(r[0] / 8), wire = r[0] % 8;
      if (wire === 0) { r = varint(buf, pos); pos = r[1]; out.push([field, 0, r[0]]); }
      else if (wire === 1) { pos += 8; }
      else if (wire === 5) { pos += 4; }
      else if (wire === 2) {
        r = varint(buf, pos); pos = r[1];
        out.push([field, 2, [pos, pos + r[0]]]); pos += r[0];
      } else throw new Error("wire type " + wire + " in the file: not an ONNX file");
    }
    if (pos !== end) throw new Error("the file is cut short: not a whole ONNX file");
    return out;
  }

  /** The "course" entry of the model's metadata_props (field 14), parsed as JSON. */
  function metadataOf(bytes) {
    var buf = new Uint8Array(bytes), text = new TextDecoder("utf-8");
    var top = fields(buf, 0, buf.length);
    for (var i = 0; i < top.length; i++) {
      if (top[i][0] !== 14 || top[i][1] !== 2) continue;
      var entry = fields(buf, top[i][2][0], top[i][2][1]), key = "", value = "";
      entry.forEach(function (f) {
        if (f[1] !== 2) return;
        var s = text.decode(buf.subarray(f[2][0], f[2][1]));
        if (f[0] === 1) key = s; else if (f[0] === 2) value = s;
      });
      if (key === "course") return JSON.parse(value);
    }
    throw new Error("this ONNX file has no course description: export it with " +
                    "course_lib.gpt.live.export or course_lib.bert.live.export");
  }

  // -- the engine: onnxruntime-web in a worker (worker.js) ----------------------------------

  var engine = null;

  /** The worker the page's <head> started (tools/live_pages.py, BOOT), taken over with the
      messages it sent so far, or one started now. call(op, message) answers a promise. */
  function startEngine() {
    if (engine) return engine;
    var boot = api.boot, worker, early = [];
    if (boot) {
      worker = boot.worker;
      early = boot.messages;
    } else {
      worker = new Worker(new URL("worker.js", SCRIPT).href);
      worker.postMessage({ op: "boot", ort: VENDOR + "ort.wasm.min.js",
                           wasm: VENDOR + "ort-wasm-simd-threaded.wasm",
                           factory: new URL("ort-wasm-factory.js", SCRIPT).href, model: null });
    }
    var waiting = {}, seq = 1, done = {};
    function settle(msg) {
      if (msg.op === "mark") {
        mark(msg.name, msg.at - performance.timeOrigin);
        return;
      }
      var w = waiting[msg.seq];
      if (!w) { done[msg.seq] = msg; return; }  // the boot's answer, before anyone asked
      delete waiting[msg.seq];
      if (msg.op === "error") w.reject(new Error(msg.message));
      else w.resolve(msg);
    }
    early.forEach(settle);
    worker.onmessage = function (e) { settle(e.data); };
    worker.onerror = function (e) {  // every request still waiting fails, the boot's too
      var message = "the live view's worker failed: " + (e.message || "it did not start");
      var pending = Object.keys(waiting);
      if (!waiting[0] && !done[0]) pending.push("0");
      pending.forEach(function (n) { settle({ op: "error", seq: +n, message: message }); });
    };
    function answer(n) {
      return new Promise(function (resolve, reject) {
        if (done[n]) {
          var msg = done[n];
          delete done[n];
          if (msg.op === "error") reject(new Error(msg.message)); else resolve(msg);
        } else waiting[n] = { resolve: resolve, reject: reject };
      });
    }
    engine = {
      /** The model the <head> asked the worker to open (its file's bytes, once it runs). */
      shipped: boot ? answer(0) : null,
      call: function (op, msg, transfer) {
        var n = seq++;
        msg.op = op;
        msg.seq = n;
        worker.postMessage(msg, transfer || []);
        return answer(n);
      }
    };
    return engine;
  }

  var opened = 0;

  /** The model in ``bytes`` (an exported ONNX file), opened in the worker. */
  function openModel(bytes) {
    var meta = metadataOf(bytes), id = "model" + (++opened);
    var copy = bytes.slice(0);
    return startEngine().call("open", { id: id, bytes: copy }, [copy]).then(function () {
      return { id: id, meta: meta, tokenizer: makeTokenizer(meta.tokenizer) };
    });
  }

  /** The shipped model the worker opened while the page loaded. */
  function shippedModel() {
    return startEngine().shipped.then(function (msg) {
      var meta = metadataOf(msg.bytes);
      return { id: "shipped", meta: meta, tokenizer: makeTokenizer(meta.tokenizer),
               first: msg.first };
    });
  }

  /** The model's outputs for ``ids``: the run the worker made while the page loaded when it
      was on the same ids (the view's opening text; once), a run in the worker otherwise. */
  function runModel(model, ids) {
    var first = model.first;
    model.first = null;
    var got = first && JSON.stringify(first.ids) === JSON.stringify(ids) ? Promise.resolve(first)
      : engine.call("run", { id: model.id, ids: ids });
    return got.then(function (out) {
      return { logits: out.logits, attention: out.attention, L: ids.length,
               V: model.meta.vocab_size };
    });
  }

  // -- tokenisers -----------------------------------------------------------------------------

  function makeTokenizer(desc) {
    if (desc.kind === "char") return charTokenizer(desc);
    if (desc.kind === "bpe") return bpeTokenizer(desc);
    throw new Error("unknown tokenizer kind " + JSON.stringify(desc.kind));
  }

  function charTokenizer(desc) {
    var chars = Array.from(desc.chars), index = new Map();
    chars.forEach(function (c, i) { index.set(c, i); });
    return {
      kind: "char",
      encode: function (text) {
        var ids = [], unknown = [];
        Array.from(text).forEach(function (c) {
          if (index.has(c)) ids.push(index.get(c));
          else if (unknown.indexOf(c) < 0) unknown.push(c);
        });
        return { ids: ids, unknown: unknown };
      },
      piece: function (id) { return chars[id]; }
    };
  }

  function bpeTokenizer(desc) {
    var rank = new Map(), merged = [], pieces = [];
    var byteId = desc.bytes, m = desc.merges;
    var enc = new TextEncoder();
    for (var b = 0; b < 256; b++) pieces[byteId[b]] = [b];
    for (var r = 0; r < m.length / 3; r++) {
      var a = m[3 * r], c = m[3 * r + 1], z = m[3 * r + 2];
      rank.set(a * 1048576 + c, r);
      merged[r] = z;
      pieces[z] = pieces[a].concat(pieces[c]);
    }
    Object.keys(desc.specials || {}).forEach(function (s) {
      pieces[desc.specials[s]] = Array.from(enc.encode(s));
    });
    Object.keys(desc.extra || {}).forEach(function (i) { pieces[+i] = desc.extra[i]; });
    var pattern = new RegExp(desc.pattern, "gu");
    var cache = new Map();

    function encodeChunk(bytes) {
      var ids = Array.from(bytes, function (x) { return byteId[x]; });
      while (ids.length > 1) {
        var best = -1, at = -1;
        for (var i = 0; i + 1 < ids.length; i++) {
          var k = rank.get(ids[i] * 1048576 + ids[i + 1]);
          if (k !== undefined && (best < 0 || k < best)) { best = k; at = i; }
        }
        if (best < 0) break;
        var out = [];  // merge every occurrence of the best pair, left to right
        var a = ids[at], c = ids[at + 1];
        for (var j = 0; j < ids.length; j++) {
          if (j + 1 < ids.length && ids[j] === a && ids[j + 1] === c) { out.push(merged[best]); j++; }
          else out.push(ids[j]);
        }
        ids = out;
      }
      return ids;
    }

    function encodeText(text, specials) {
      var ids = [];
      var parts = specials ? splitSpecials(text, specials) : [[text, null]];
      parts.forEach(function (part) {
        if (part[1] !== null) { ids.push(part[1]); return; }
        var chunks = part[0].match(pattern) || [];
        chunks.forEach(function (chunk) {
          var hit = cache.get(chunk);
          if (!hit) {
            hit = encodeChunk(enc.encode(chunk));
            if (cache.size < 50000) cache.set(chunk, hit);
          }
          for (var i = 0; i < hit.length; i++) ids.push(hit[i]);
        });
      });
      return ids;
    }

    return {
      kind: "bpe",
      /** ids of text; ``specials`` ({text: id}) are the control tokens it may contain. */
      encode: function (text, specials) { return { ids: encodeText(text, specials), unknown: [] }; },
      bytesOf: function (id) { return pieces[id] || []; },
      piece: function (id) {
        return new TextDecoder("utf-8").decode(new Uint8Array(pieces[id] || []));
      }
    };
  }

  function splitSpecials(text, specials) {
    var names = Object.keys(specials).sort(function (a, b) { return b.length - a.length; });
    var out = [], start = 0, i = 0;
    while (i < text.length) {
      var hit = null;
      for (var k = 0; k < names.length; k++) {
        if (text.startsWith(names[k], i)) { hit = names[k]; break; }
      }
      if (hit) {
        if (i > start) out.push([text.slice(start, i), null]);
        out.push([hit, specials[hit]]);
        i += hit.length; start = i;
      } else i++;
    }
    if (start < text.length) out.push([text.slice(start), null]);
    return out;
  }

  // -- shared drawing -------------------------------------------------------------------------

  function el(tag, attrs, children) {
    var e = document.createElement(tag);
    Object.keys(attrs || {}).forEach(function (k) {
      if (k === "text") e.textContent = attrs[k];
      else if (k === "class") e.className = attrs[k];
      else e.setAttribute(k, attrs[k]);
    });
    (children || []).forEach(function (c) { e.appendChild(c); });
    return e;
  }

  /** A character as the page shows it: visible, with a name for the invisible ones. */
  function shown(c) {
    if (c === "\n") return "↵";
    if (c === " ") return "␣";
    if (c === "\t") return "⇥";
    return c;
  }

  function softmax(row) {
    var max = -Infinity, i, out = new Float64Array(row.length), s = 0;
    for (i = 0; i < row.length; i++) if (row[i] > max) max = row[i];
    for (i = 0; i < row.length; i++) { out[i] = Math.exp(row[i] - max); s += out[i]; }
    for (i = 0; i < row.length; i++) out[i] /= s;
    return out;
  }

  function topK(probs, k) {
    var idx = Array.from(probs.keys());
    idx.sort(function (a, b) { return probs[b] - probs[a] || a - b; });
    return idx.slice(0, k);
  }

  function record(kind, ms) {
    (api.timings[kind] = api.timings[kind] || []).push(ms);
  }

  /** Run ``work`` one request at a time: requests made while it runs collapse into one run
      after it, which keeps the oldest request's argument (its start time: a keystroke's
      latency runs until the page shows its text or a later one). */
  function latest(work) {
    var running = false, pending = null;
    function go(arg) {
      if (running) { if (pending === null) pending = arg; return; }  // the oldest waiting
      running = true;
      Promise.resolve().then(function () { return work(arg); }).catch(function (err) {
        console.warn(err);
      }).then(function () {
        running = false;
        if (pending !== null) { var p = pending; pending = null; go(p); }
      });
    }
    return go;
  }

  /** Every head's attention weights from position ``p`` (over the positions up to p when
      ``causal``, else all), one row of tokens per head, the weight as a bar under each. */
  function drawHeads(box, res, meta, pieces, p, causal) {
    var L = res.L, H = meta.n_heads, NL = meta.n_layers, rows = [];
    var grid = el("div", { class: "course-live-heads" });
    var upto = causal ? p + 1 : L;
    for (var l = 0; l < NL; l++) {
      for (var h = 0; h < H; h++) {
        var base = ((l * H + h) * L + p) * L, cells = [], top = 0;
        for (var j = 0; j < upto; j++) {
          var w = res.attention[base + j];
          if (w > res.attention[base + top]) top = j;
          cells.push(el("span", {
            class: "course-live-cell", style: "--w:" + w.toFixed(3),
            title: JSON.stringify(pieces[j]) + " at " + (j + 1) + ": " + w.toFixed(3)
          }, [document.createTextNode(pieces[j])]));
        }
        rows.push(Array.from(res.attention.subarray(base, base + upto)));
        grid.appendChild(el("div", {
          class: "course-live-head", role: "img",
          "aria-label": "layer " + (l + 1) + " head " + (h + 1) + ": most weight on " +
            JSON.stringify(pieces[top]) + " at position " + (top + 1) + " (" +
            res.attention[base + top].toFixed(2) + ")"
        }, [el("span", { class: "course-live-label", text: "L" + (l + 1) + " H" + (h + 1) }),
            el("span", { class: "course-live-cells" }, cells)]));
      }
    }
    box.replaceChildren(grid);
    box.dataset.position = String(p);
    box.dataset.weights = JSON.stringify(rows);
  }

  // -- chapter 8: the GPT ---------------------------------------------------------------------

  function mulberry32(seed) {
    var a = seed >>> 0;
    return function () {
      a = (a + 0x6d2b79f5) >>> 0;
      var t = a;
      t = Math.imul(t ^ (t >>> 15), t | 1);
      t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
      return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
    };
  }

  /** Sample one id from ``row`` (logits) as course_lib.gpt.sampling does: top-k (0: off) on
      the logits, then temperature, then the smallest set of the likeliest tokens whose
      probability reaches top-p (1: off); temperature 0 is greedy (the first largest logit). */
  function sample(row, temperature, k, p, rand) {
    var i;
    if (temperature === 0) {
      var arg = 0;
      for (i = 1; i < row.length; i++) if (row[i] > row[arg]) arg = i;
      return arg;
    }
    var probs = softmax(Array.from(row, function (x) { return x / temperature; }));
    var order = topK(probs, k > 0 ? k : probs.length);
    var total = 0;
    for (i = 0; i < order.length; i++) total += probs[order[i]];
    var keep = [], mass = 0;
    for (i = 0; i < order.length; i++) {
      keep.push(order[i]);
      mass += probs[order[i]] / total;
      if (mass >= p) break;
    }
    var z = 0;
    keep.forEach(function (j) { z += probs[j]; });
    var u = rand() * z;
    for (i = 0; i < keep.length; i++) { u -= probs[keep[i]]; if (u <= 0) return keep[i]; }
    return keep[keep.length - 1];
  }

  function gptView(root) {
    var q = function (s) { return root.querySelector(s); };
    var status = q(".course-live-status"), text = q(".course-live-text");
    var nextBox = q(".course-live-next"), attnBox = q(".course-live-attention");
    var pos = q(".course-live-position"), posOut = q(".course-live-position-value");
    var model = null, last = null;
    var view = (api.views[root.id] = { root: root });

    function say(msg, state) {
      status.textContent = msg;
      if (state) root.dataset.state = state;
    }

    function describe(m) {
      var meta = m.meta;
      q(".course-live-model").textContent = meta.name + ": " + meta.n_layers + " layers, " +
        meta.n_heads + " heads, d_model " + meta.d_model + ", " +
        meta.parameters.toLocaleString("en") + " parameters, context " + meta.context_length +
        " tokens (" + meta.tokenizer.kind + " tokenizer)";
    }

    var update = latest(function (t0) {
      if (!model) return;
      var enc = model.tokenizer.encode(text.value);
      if (enc.unknown.length) {
        say("Not in this model's alphabet: " + enc.unknown.map(function (c) {
          return JSON.stringify(c);
        }).join(", ") + ". They are left out.");
      }
      var ids = enc.ids;
      if (!ids.length) {
        nextBox.textContent = "Type at least one character the model knows.";
        attnBox.textContent = "";
        root.dataset.ids = "[]";
        return;
      }
      var C = model.meta.context_length;
      var cut = Math.max(0, ids.length - C);
      var window_ = ids.slice(cut);
      return runModel(model, window_).then(function (res) {
        last = { ids: window_, res: res, cut: cut };
        drawNext(res);
        pos.max = String(res.L);
        pos.value = String(res.L);
        drawAttention();
        if (!enc.unknown.length) {
          say(cut ? "The model reads the last " + C + " tokens of your text." : view.note);
        }
        root.dataset.ids = JSON.stringify(window_);
        var ms = performance.now() - t0;
        if (!view.first) { view.first = performance.now(); mark("first result"); }
        record(root.id, ms);
        root.dataset.updates = String((+root.dataset.updates || 0) + 1);
      });
    });

    function drawNext(res) {
      var row = res.logits.subarray((res.L - 1) * res.V, res.L * res.V);
      var probs = softmax(row), best = topK(probs, 10);
      var body = el("tbody");
      best.forEach(function (i, r) {
        body.appendChild(el("tr", {}, [
          el("td", { text: String(r + 1) }),
          el("td", { class: "course-live-token", text: shown(model.tokenizer.piece(i)) }),
          el("td", {}, [el("span", {
            class: "course-live-bar", style: "width:" + (probs[i] * 100).toFixed(1) + "%"
          })]),
          el("td", { class: "course-live-num", text: (probs[i] * 100).toFixed(1) + "%" }),
          el("td", { class: "course-live-num", text: row[i].toFixed(3) })
        ]));
      });
      var table = el("table", { class: "course-live-table" }, [
        el("caption", { text: "The next character: the model's 10 likeliest, of " + res.V }),
        el("thead", {}, [el("tr", {}, ["rank", "character", "", "probability", "logit"].map(
          function (h) { return el("th", { scope: "col", text: h }); }))]),
        body
      ]);
      nextBox.replaceChildren(table);
      nextBox.dataset.logits = JSON.stringify(Array.from(row));
      nextBox.dataset.top = JSON.stringify(best);
    }

    function drawAttention() {
      if (!last) return;
      var L = last.res.L, p = (+pos.value || L) - 1;
      var pieces = last.ids.map(function (i) { return shown(model.tokenizer.piece(i)); });
      posOut.textContent = (p + 1) + " of " + L + " (" + JSON.stringify(pieces[p]) + ")";
      drawHeads(attnBox, last.res, model.meta, pieces, p, true);
    }

    pos.addEventListener("input", function () { drawAttention(); });
    text.addEventListener("input", function () { update(performance.now()); });

    var gen = q(".course-live-generate"), genOut = q(".course-live-generated");
    gen.addEventListener("click", function () {
      if (!model) return;
      var num = function (s, lo, hi, dflt) {
        var v = parseFloat(q(s).value);
        return isFinite(v) ? Math.min(hi, Math.max(lo, v)) : dflt;
      };
      var T = num(".course-live-temperature", 0, 5, 1);
      var k = Math.round(num(".course-live-topk", 0, model.meta.vocab_size, 0));
      var p = num(".course-live-topp", 0.01, 1, 1);
      var n = Math.round(num(".course-live-length", 1, 1000, 200));
      var rand = mulberry32(Math.round(num(".course-live-seed", 0, 4294967295, 0)));
      var ids = model.tokenizer.encode(text.value).ids;
      if (!ids.length) { genOut.textContent = "Type a prompt first."; return; }
      gen.disabled = true;
      var made = [], C = model.meta.context_length;
      var step = function () {
        if (made.length >= n) return Promise.resolve();
        var ctx = ids.concat(made).slice(-C);
        return runModel(model, ctx).then(function (res) {
          var row = res.logits.subarray((res.L - 1) * res.V, res.L * res.V);
          made.push(sample(row, T, k, p, rand));
          genOut.textContent = made.map(function (i) { return model.tokenizer.piece(i); }).join("");
          return step();
        });
      };
      genOut.textContent = "";
      step().then(function () {
        genOut.dataset.ids = JSON.stringify(made);
        root.dataset.generated = String((+root.dataset.generated || 0) + 1);
      }).catch(function (err) { genOut.textContent = "Error: " + err.message; })
        .then(function () { gen.disabled = false; });
    });

    function use(m, note) {
      model = m;
      last = null;
      view.note = note;
      describe(m);
      say(note, "ready");
      update(performance.now());
    }

    return chooser(root, "gpt", use, say);
  }

  // -- chapter 9: BERT fills the reader's [MASK]s ---------------------------------------------

  function bertView(root) {
    var q = function (s) { return root.querySelector(s); };
    var status = q(".course-live-status"), text = q(".course-live-text");
    var fillBox = q(".course-live-fills"), attnBox = q(".course-live-attention");
    var pos = q(".course-live-position"), posOut = q(".course-live-position-value");
    var model = null, last = null;
    var view = (api.views[root.id] = { root: root });

    function say(msg, state) {
      status.textContent = msg;
      if (state) root.dataset.state = state;
    }

    var update = latest(function (t0) {
      if (!model) return;
      var meta = model.meta, specials = {};
      specials["[MASK]"] = meta.mask;
      var ids = [meta.cls].concat(model.tokenizer.encode(text.value, specials).ids, [meta.sep]);
      if (ids.length > meta.context_length) {
        say("Your text is " + (ids.length - 2) + " tokens long; the model reads at most " +
            (meta.context_length - 2) + ". Shorten it.");
        return;
      }
      return runModel(model, ids).then(function (res) {
        last = { ids: ids, res: res };
        var masks = [];
        ids.forEach(function (id, i) { if (id === meta.mask) masks.push(i); });
        drawFills(res, masks);
        pos.max = String(res.L);
        pos.value = String((masks.length ? masks[0] : res.L - 1) + 1);
        drawAttention();
        say(masks.length ? "Ready." : "Ready. Put [MASK] where the model should guess a token.");
        root.dataset.ids = JSON.stringify(ids);
        if (!view.first) { view.first = performance.now(); mark("first result"); }
        record(root.id, performance.now() - t0);
        root.dataset.updates = String((+root.dataset.updates || 0) + 1);
      });
    });

    function drawFills(res, masks) {
      var V = res.V, tables = [], tops = {}, rows = {};
      masks.forEach(function (m, n) {
        var row = res.logits.subarray(m * V, (m + 1) * V);
        var probs = softmax(row), best = topK(probs, 5);
        tops[m] = best;
        rows[m] = Array.from(row);
        var body = el("tbody");
        best.forEach(function (i, r) {
          body.appendChild(el("tr", {}, [
            el("td", { text: String(r + 1) }),
            el("td", { class: "course-live-token",
                       text: Array.from(model.tokenizer.piece(i)).map(shown).join("") }),
            el("td", {}, [el("span", {
              class: "course-live-bar", style: "width:" + (probs[i] * 100).toFixed(1) + "%"
            })]),
            el("td", { class: "course-live-num", text: (probs[i] * 100).toFixed(1) + "%" }),
            el("td", { class: "course-live-num", text: row[i].toFixed(3) })
          ]));
        });
        tables.push(el("table", { class: "course-live-table" }, [
          el("caption", { text: "[MASK] " + (n + 1) + " (token " + (m + 1) +
                                "): the 5 likeliest tokens, of " + V }),
          el("thead", {}, [el("tr", {}, ["rank", "token", "", "probability", "logit"].map(
            function (h) { return el("th", { scope: "col", text: h }); }))]),
          body
        ]));
      });
      if (!masks.length) tables.push(el("p", { text: "No [MASK] in your text." }));
      fillBox.replaceChildren.apply(fillBox, tables);
      fillBox.dataset.top = JSON.stringify(tops);
      fillBox.dataset.logits = JSON.stringify(rows);
    }

    function drawAttention() {
      if (!last) return;
      var L = last.res.L, p = (+pos.value || 1) - 1;
      var pieces = last.ids.map(function (i) {
        return Array.from(model.tokenizer.piece(i)).map(shown).join("");
      });
      posOut.textContent = (p + 1) + " of " + L + " (" + JSON.stringify(pieces[p]) + ")";
      drawHeads(attnBox, last.res, model.meta, pieces, p, false);
    }

    pos.addEventListener("input", function () { drawAttention(); });
    text.addEventListener("input", function () { update(performance.now()); });

    function use(m, note) {
      model = m;
      last = null;
      var meta = m.meta;
      q(".course-live-model").textContent = meta.name + ": " + meta.n_layers + " layers, " +
        meta.n_heads + " heads, d_model " + meta.d_model + ", " +
        meta.parameters.toLocaleString("en") + " parameters, at most " + meta.context_length +
        " tokens";
      say(note, "ready");
      update(performance.now());
    }
    return chooser(root, "bert", use, say);
  }

  // -- chapter 7: the tokenisers -------------------------------------------------------------

  function tokenView(root) {
    var q = function (s) { return root.querySelector(s); };
    var status = q(".course-live-status"), text = q(".course-live-text");
    var choice = q(".course-live-tokenizer"), out = q(".course-live-tokens");
    var count = q(".course-live-count"), idsBox = q(".course-live-idlist");
    var tables = JSON.parse(root.dataset.tables), loaded = {};
    var view = (api.views[root.id] = { root: root, tokenizers: loaded });

    function tokenizer(name) {
      var inline = root.querySelector('script[type="application/json"][data-name="' + name + '"]');
      if (!loaded[name] && inline) {
        loaded[name] = Promise.resolve(makeTokenizer(JSON.parse(inline.textContent)));
      } else if (!loaded[name] && location.protocol === "file:") {
        return Promise.reject(new Error("this tokenizer's table is a file of its own, which a " +
          "page opened from disk cannot load: serve the website's folder over http (python -m " +
          "http.server) to use it"));
      }
      if (!loaded[name]) {
        loaded[name] = fetch(new URL(tables[name], location.href).href).then(function (r) {
          if (!r.ok) throw new Error("could not load the tokenizer (" + r.status + ")");
          return r.json();
        }).then(function (desc) { return makeTokenizer(desc); });
      }
      return loaded[name];
    }

    function label(tok, id) {
      var bytes = tok.bytesOf(id), s = tok.piece(id);
      if (s.indexOf("\ufffd") >= 0) {  // part of a character: show its bytes
        return bytes.map(function (b) { return "<" + b.toString(16).toUpperCase() + ">"; }).join("");
      }
      return Array.from(s).map(shown).join("");
    }

    var update = latest(function (t0) {
      var name = choice.value;
      return tokenizer(name).then(function (tok) {
        var value = text.value, ids = tok.encode(value).ids;
        var spans = ids.map(function (id, i) {
          return el("span", { class: "course-live-tok course-live-tok" + (i % 2),
                              title: "id " + id, text: label(tok, id) });
        });
        out.replaceChildren.apply(out, spans);
        var n = Array.from(value).length, nb = new TextEncoder().encode(value).length;
        count.textContent = ids.length + " tokens for " + n + " characters (" + nb +
          " bytes in UTF-8)" + (ids.length ? ": " + (nb / ids.length).toFixed(2) +
          " bytes per token" : "");
        idsBox.textContent = ids.join(" ");
        root.dataset.ids = JSON.stringify(ids);
        root.dataset.tokenizer = name;
        status.textContent = "Ready.";
        root.dataset.state = "ready";
        if (!view.first) { view.first = performance.now(); mark("first result"); }
        record(root.id, performance.now() - t0);
        root.dataset.updates = String((+root.dataset.updates || 0) + 1);
      }).catch(function (err) {
        status.textContent = "The tokenizer failed: " + err.message;
        root.dataset.state = "error";
      });
    });
    text.addEventListener("input", function () { update(performance.now()); });
    choice.addEventListener("change", function () { update(performance.now()); });
    update(performance.now());
    return null;
  }

  // -- the model selector and "Open your own model" ---------------------------------------------

  /** The view's labelled selector of models: "shipped" (opened while the page loaded), the
      other shipped files (an option's value: its URL, opened when first chosen) and the files
      the reader opens (read in this browser, sent nowhere), each added as an option. Choosing
      one calls ``use``; the text box takes the option's example text if it still holds the
      previous one's. Returns the view's start: given the shipped model. */
  function chooser(root, kind, use, say) {
    var select = root.querySelector(".course-live-choice");
    var input = root.querySelector(".course-live-file");
    var text = root.querySelector(".course-live-text");
    var models = {}, own = 0, current = select.value;

    function checked(bytes, name) {
      var meta = metadataOf(bytes);
      if (meta.kind !== kind) {
        throw new Error(name + " holds a " + meta.kind + " model; this view runs a " + kind +
                        " model");
      }
      return openModel(bytes);
    }

    function choose(value) {
      var was = select.querySelector('option[value="' + current + '"]');
      var now = select.querySelector('option[value="' + value + '"]');
      current = value;
      if (value === "shipped" && !models.shipped) return;  // start() chooses it
      if (!models[value]) {  // a shipped file not opened yet
        say("Loading " + now.textContent + "…");
        models[value] = fetch(new URL(value, location.href).href).then(function (r) {
          if (!r.ok) throw new Error("could not load the model (" + r.status + ")");
          return r.arrayBuffer();
        }).then(function (bytes) { return checked(bytes, value.split("/").pop()); });
      }
      models[value].then(function (m) {
        if (current !== value) return;  // chosen away meanwhile
        if (was && now.dataset.example && text.value === was.dataset.example) {
          text.value = now.dataset.example;
        }
        use(m, value === "shipped" ? "Ready." : m.meta.name + " is open.");
      }).catch(function (err) {
        delete models[value];
        say("Could not open the model: " + err.message);
      });
    }

    select.addEventListener("change", function () { choose(select.value); });

    input.addEventListener("change", function () {
      var file = input.files && input.files[0];
      if (!file) return;
      say("Opening " + file.name + " (in this browser; it goes nowhere)…");
      file.arrayBuffer().then(function (bytes) { return checked(bytes, file.name); })
        .then(function (m) {
          var value = "own:" + (++own);
          models[value] = Promise.resolve(m);
          select.appendChild(el("option", {
            value: value, text: "your model: " + m.meta.name + " (" + file.name + ")"
          }));
          select.value = value;
          choose(value);
        }).catch(function (err) {
          say("Could not open " + file.name + ": " + err.message);
        });
    });

    return function start(m) {
      models.shipped = Promise.resolve(m);
      if (current === "shipped") choose("shipped");
    };
  }

  // -- start ----------------------------------------------------------------------------------

  var VIEWS = { gpt: gptView, bert: bertView, bpe: tokenView };

  /** The time since the page opened at which ``name`` first happened (performance marks for
      the load's breakdown: tests/test_live.py records them). */
  function mark(name, at) {
    if (!(name in api.marks)) api.marks[name] = at === undefined ? performance.now() : at;
  }

  function init(root) {
    mark("init");
    var status = root.querySelector(".course-live-status");
    var kind = root.dataset.kind;
    if (!VIEWS[kind]) return;
    if (kind === "bpe") {  // no model to run: the tokenisers are tables and a loop
      tokenView(root);
      return;
    }
    if (location.protocol === "file:") {
      status.textContent = "The live view needs the website served over http: browsers do " +
        "not let a page opened from a file load a model. In the website's folder run " +
        "python -m http.server and open http://localhost:8000/" +
        location.pathname.split("/").slice(-2).join("/") + ".";
      root.dataset.state = "unavailable";
      return;
    }
    if (!window.Worker || !window.WebAssembly || !window.BigInt64Array) {
      status.textContent = "This browser cannot run the live view (it needs WebAssembly).";
      root.dataset.state = "unavailable";
      return;
    }
    var start = VIEWS[kind](root);
    startEngine();
    var shipped = engine.shipped;
    if (!shipped) {  // no <head> start: open the view's model now
      shipped = fetch(new URL(root.dataset.model, location.href).href).then(function (r) {
        if (!r.ok) throw new Error("could not load the model (" + r.status + ")");
        return r.arrayBuffer();
      }).then(openModel);
    } else shipped = shippedModel();
    shipped.then(function (m) { mark("model ready"); return start(m); }).catch(function (err) {
      status.textContent = "The live view failed: " + err.message;
      root.dataset.state = "error";
    });
  }

  api.metadataOf = metadataOf;
  api.makeTokenizer = makeTokenizer;
  document.querySelectorAll(".course-live").forEach(init);
})();
