/* The live views' engine (tools/live_pages.py): onnxruntime-web in a worker of its own, so that
   starting it (compiling its WebAssembly, building each model's session) and every run happen
   beside the page's main thread, not between its tasks. The page's <head> starts this worker
   (live_pages.BOOT) and live.js talks to it:

     {op: "boot", ort, wasm, factory, model, ids}
                                               load onnxruntime-web, compile its WebAssembly while
                                               it downloads, open ``model`` (if given) as the
                                               session "shipped" and run it on ``ids`` (the
                                               view's opening text): answered {op: "opened",
                                               seq: 0, id: "shipped", bytes (the file, for its
                                               description), first: {ids, logits, attention}}
     {op: "open", seq, id, bytes}              open a model as session ``id``: {op: "opened"}
     {op: "run", seq, id, ids}                 run it on token ids (1, L): {op: "result",
                                               logits, attention} (as Float32Arrays)

   Failures answer {op: "error", seq, message}; {op: "mark", name, at} reports when each step
   of the start finished (an absolute time: performance.timeOrigin + now). */
"use strict";

var sessions = {}, ready = null, queue = Promise.resolve();

function mark(name) {
  postMessage({ op: "mark", name: name, at: performance.timeOrigin + performance.now() });
}

function fail(seq, err) {
  postMessage({ op: "error", seq: seq, message: (err && err.message) || String(err) });
}

function get(url) {
  return fetch(url).then(function (r) {
    if (!r.ok) throw new Error("could not load " + url.split("/").pop() + " (" + r.status + ")");
    return r;
  });
}

/** Compile while the bytes arrive where the server says application/wasm (any Python
    http.server does); from the whole file otherwise. */
function compile(r) {
  var type = (r.headers.get("content-type") || "").split(";")[0].trim();
  if (WebAssembly.compileStreaming && type === "application/wasm") {
    return WebAssembly.compileStreaming(r);
  }
  return r.arrayBuffer().then(function (b) { return WebAssembly.compile(b); });
}

function boot(msg) {
  var wasm = get(msg.wasm).then(compile).then(function (m) { mark("wasm compiled"); return m; });
  var model = msg.model && get(msg.model).then(function (r) { return r.arrayBuffer(); })
    .then(function (b) { mark("model fetched"); return b; });
  importScripts(msg.ort);  // onnxruntime-web's loader (50 kB), while the two above download
  ready = wasm.then(function (compiled) {
    // ort-wasm-factory.js instantiates the module compiled here
    self.courseLive = { wasmModule: compiled, mark: mark };
    var env = self.ort.env;
    env.wasm.numThreads = 1;  // threads need a cross-origin-isolated page
    env.wasm.proxy = false;  // this is the worker
    env.wasm.initTimeout = 60000;  // an error, not a view that waits for ever
    env.wasm.wasmPaths = { mjs: msg.factory, wasm: msg.wasm };
    env.logLevel = "error";
  });
  if (model) {
    open(0, "shipped", model, msg.ids);
  }
}

/** A session for ``bytes`` (or a promise of them); with ``first`` (token ids: the boot's
    model), run at once on them, the page's first result, and the file sent back. */
function open(seq, id, bytes, first) {
  queue = queue.then(function () {
    return Promise.all([ready, bytes]);
  }).then(function (got) {
    var file = got[1], answer = { op: "opened", seq: seq, id: id };
    return self.ort.InferenceSession.create(new Uint8Array(file), {
      executionProviders: ["wasm"], graphOptimizationLevel: "all"
    }).then(function (session) {
      sessions[id] = session;
      if (!first) return postMessage(answer);
      mark("session created");
      return run(session, first).then(function (out) {
        mark("first run");
        var res = outputs(out);
        answer.bytes = file;
        answer.first = { ids: first, logits: res[0], attention: res[1] };
        postMessage(answer, [file, res[0].buffer, res[1].buffer]);
      });
    });
  }).catch(function (err) { fail(seq, err); });
}

/** A run's two outputs as Float32Arrays of their own (to transfer). */
function outputs(out) {
  return [out.logits.data.slice(), out.attention.data.slice()];
}

function run(session, ids) {
  var feeds = {};
  feeds[session.inputNames[0]] = new self.ort.Tensor(
    "int64", BigInt64Array.from(ids, function (i) { return BigInt(i); }), [1, ids.length]);
  return session.run(feeds);
}

onmessage = function (e) {
  var msg = e.data;
  if (msg.op === "boot") {
    try { boot(msg); } catch (err) { fail(0, err); }
  } else if (msg.op === "open") {
    if (!ready) { fail(msg.seq, new Error("the engine was not started")); return; }
    open(msg.seq, msg.id, msg.bytes, null);
  } else if (msg.op === "run") {
    queue = queue.then(function () {
      var session = sessions[msg.id];
      if (!session) throw new Error("no model " + JSON.stringify(msg.id) + " is open");
      return run(session, msg.ids);
    }).then(function (out) {
      var res = outputs(out);
      postMessage({ op: "result", seq: msg.seq, logits: res[0], attention: res[1] },
                  [res[0].buffer, res[1].buffer]);
    }).catch(function (err) { fail(msg.seq, err); });
  }
};
