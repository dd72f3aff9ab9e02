#!/usr/bin/env node
// Write schemas/<name>.json from the zod contracts (run after `npm run build`).
// `node scripts/generate-schemas.mjs --check` exits 1 when a committed file is stale.
import { mkdirSync, readFileSync, writeFileSync, existsSync } from 'node:fs';
import { fileURLToPath } from 'node:url';

const root = new URL('../', import.meta.url);
const { contractJsonSchemas } = await import(new URL('dist/contracts/index.js', root).href);
const check = process.argv.includes('--check');
const dir = fileURLToPath(new URL('schemas/', root));
mkdirSync(dir, { recursive: true });
let stale = 0;
for (const [name, schema] of Object.entries(contractJsonSchemas())) {
  const file = `${dir}${name}.json`;
  const text = `${JSON.stringify(schema, null, 2)}\n`;
  if (check) {
    if (!existsSync(file) || readFileSync(file, 'utf8') !== text) {
      console.error(`stale: schemas/${name}.json`);
      stale += 1;
    }
  } else {
    writeFileSync(file, text);
    console.log(`wrote schemas/${name}.json`);
  }
}
process.exitCode = stale === 0 ? 0 : 1;
