// Runs every bench/*.bench.mjs (or the ones named on the command line) against
// the built package and prints one line per measurement: the figure, the
// baseline measured in the same run, and their ratio against the target.
import { readdirSync } from 'node:fs';
import { basename, dirname, join } from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';

const here = dirname(fileURLToPath(import.meta.url));
const wanted = process.argv.slice(2);
const files = readdirSync(here)
  .filter((name) => name.endsWith('.bench.mjs'))
  .filter((name) => wanted.length === 0 || wanted.some((w) => name.startsWith(w)))
  .sort();

const results = [];
function fmt(value) {
  if (!Number.isFinite(value)) return String(value);
  if (Math.abs(value) >= 100) return value.toFixed(0);
  if (Math.abs(value) >= 1) return value.toFixed(2);
  return value.toPrecision(3);
}

/**
 * report({ name, value, unit, baseline, baselineUnit, ratio, target, higherIsBetter, note })
 * ratio: value relative to the baseline, oriented so that bigger is better unless
 * `target` is stated as a maximum (`{ max: 2 }`).
 */
function report(input) {
  // A bare number as target means "at least this ratio".
  const entry = typeof input.target === 'number' ? { ...input, target: { min: input.target } } : input;
  results.push(entry);
  const parts = [`${entry.name}: ${fmt(entry.value)} ${entry.unit}`];
  if (entry.baseline !== undefined) parts.push(`baseline ${fmt(entry.baseline)} ${entry.baselineUnit ?? entry.unit}`);
  if (entry.ratio !== undefined) parts.push(`ratio ${fmt(entry.ratio)}x`);
  if (entry.target !== undefined) {
    const ok = entry.target.min !== undefined ? entry.ratio >= entry.target.min : entry.ratio <= entry.target.max;
    parts.push(`target ${entry.target.min !== undefined ? '>=' : '<='} ${entry.target.min ?? entry.target.max}x ${ok ? 'met' : 'MISSED'}`);
  }
  if (entry.note) parts.push(entry.note);
  console.log(`  ${parts.join('  |  ')}`);
}

let failed = 0;
for (const file of files) {
  console.log(`${basename(file, '.bench.mjs')}`);
  try {
    const module = await import(pathToFileURL(join(here, file)).href);
    await module.default(report);
  } catch (error) {
    failed += 1;
    console.log(`  FAILED: ${error instanceof Error ? error.message : String(error)}`);
  }
}
if (failed > 0) process.exitCode = 1;
if (process.env.PROOFGATE_BENCH_JSON) console.log(JSON.stringify(results));
