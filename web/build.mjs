// Bundles the explorer into dist/: main.js (page), worker.js (engine), the
// wasm module built by `make web` into pkg/, and the static files.
import * as esbuild from 'esbuild';
import { copyFileSync, existsSync, mkdirSync, rmSync } from 'node:fs';

const pkg = 'pkg/gpuplan_wasm_bg.wasm';
if (!existsSync(pkg)) {
  console.error(`build: ${pkg} is missing; run \`make web\` (it builds the wasm first)`);
  process.exit(2);
}
rmSync('dist', { recursive: true, force: true });
mkdirSync('dist');
await esbuild.build({
  entryPoints: ['src/main.js', 'src/worker.js'],
  bundle: true,
  format: 'esm',
  minify: true,
  target: 'es2022',
  outdir: 'dist',
  logLevel: 'warning',
});
copyFileSync('src/index.html', 'dist/index.html');
copyFileSync('src/style.css', 'dist/style.css');
copyFileSync('src/favicon.svg', 'dist/favicon.svg');
copyFileSync('node_modules/uplot/dist/uPlot.min.css', 'dist/uPlot.min.css');
copyFileSync(pkg, 'dist/gpuplan_wasm_bg.wasm');
console.log('build: web/dist ready');
