/* onnxruntime-web's Emscripten module, started from the WebAssembly the live views' worker
   compiled while it downloaded (tools/live/worker.js): onnxruntime-web imports this file in
   place of its own module file (env.wasm.wasmPaths.mjs) and calls it as that module's factory;
   Emscripten's instantiateWasm hook then instantiates the compiled module instead of fetching
   and compiling the .wasm a second time. */
import factory from "./ort-wasm-simd-threaded.js";

export default function (config) {
  var live = self.courseLive, compiled = live && live.wasmModule;
  if (compiled) {
    config.instantiateWasm = function (imports, done) {
      WebAssembly.instantiate(compiled, imports).then(function (instance) {
        live.mark("wasm instantiated");
        done(instance, compiled);
      }, function (err) {
        console.error("onnxruntime-web's WebAssembly did not start: " + err.message);
      });
      return {};
    };
  }
  return factory(config);
}
