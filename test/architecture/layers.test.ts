import { readdirSync, readFileSync, statSync } from 'node:fs';
import { dirname, join, relative, resolve, sep } from 'node:path';
import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';

/**
 * The layer rule of docs/design.md, checked on the source: every relative
 * import of a file under src/<layer>/ must land in a layer that <layer> may
 * import. A new folder under src/ fails here until it is given a place.
 */
const SRC = resolve(dirname(fileURLToPath(import.meta.url)), '../../src');

const MAY_IMPORT: Record<string, readonly string[]> = {
  cli: ['service', 'dashboard', 'automerge', 'proof', 'review', 'forge', 'runtime', 'storage', 'host', 'contracts', 'core'],
  service: ['dashboard', 'automerge', 'proof', 'review', 'forge', 'runtime', 'storage', 'host', 'contracts', 'core'],
  dashboard: ['contracts'],
  automerge: ['proof', 'review', 'forge', 'runtime', 'storage', 'host', 'contracts', 'core'],
  proof: ['review', 'forge', 'runtime', 'storage', 'host', 'contracts', 'core'],
  review: ['forge', 'runtime', 'storage', 'host', 'contracts', 'core'],
  forge: ['runtime', 'storage', 'host', 'contracts', 'core'],
  runtime: ['storage', 'host', 'contracts', 'core'],
  storage: ['contracts', 'core'],
  host: ['core'],
  contracts: ['core'],
  core: [],
};

function sourceFiles(dir: string): string[] {
  return readdirSync(dir).flatMap((name) => {
    const path = join(dir, name);
    if (statSync(path).isDirectory()) return sourceFiles(path);
    return path.endsWith('.ts') ? [path] : [];
  });
}

function layerOf(file: string): string {
  const rel = relative(SRC, file);
  return rel.includes(sep) ? (rel.split(sep)[0] as string) : '(root)';
}

const IMPORT = /(?:^|\n)\s*(?:import|export)\s[^'"]*?from\s+['"](\.[^'"]+)['"]|import\(\s*['"](\.[^'"]+)['"]\s*\)/g;

describe('layers', () => {
  const files = sourceFiles(SRC);

  it('every folder under src/ has a place in the layer table', () => {
    const layers = new Set(files.map(layerOf).filter((layer) => layer !== '(root)'));
    expect([...layers].filter((layer) => !(layer in MAY_IMPORT))).toEqual([]);
  });

  it('imports only point down', () => {
    const violations: string[] = [];
    for (const file of files) {
      const from = layerOf(file);
      if (from === '(root)') continue;
      const text = readFileSync(file, 'utf8');
      for (const match of text.matchAll(IMPORT)) {
        const spec = match[1] ?? match[2];
        if (spec === undefined) continue;
        const to = layerOf(resolve(dirname(file), spec));
        if (to === from) continue;
        if (!(MAY_IMPORT[from] ?? []).includes(to)) violations.push(`${relative(SRC, file)} -> ${spec} (${from} may not import ${to})`);
      }
    }
    expect(violations).toEqual([]);
  });

  it('finds imports at all (the check is not vacuous)', () => {
    const count = files.reduce((sum, file) => sum + [...readFileSync(file, 'utf8').matchAll(IMPORT)].length, 0);
    expect(count).toBeGreaterThan(200);
  });
});
