/**
 * The observer dashboard's files: a fixed list of names, each a file of
 * `assets/` beside this module (copied next to the built module and the CLI
 * bundle by scripts/bundle-cli.mjs) or uPlot's own files from its package.
 * A path not in the list is null (404): nothing is joined from a request's
 * path, so `/assets/../...` names no file.
 */
import { existsSync } from 'node:fs';
import { readFile } from 'node:fs/promises';
import { createRequire } from 'node:module';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import type { StaticAnswer } from '../http.js';

const TYPES: Readonly<Record<string, string>> = {
  html: 'text/html; charset=utf-8',
  js: 'text/javascript; charset=utf-8',
  css: 'text/css; charset=utf-8',
  svg: 'image/svg+xml',
};

/** Request path -> file name in the assets directory (or `uplot:` and a file of uPlot's dist/). */
export const DASHBOARD_FILES: Readonly<Record<string, string>> = {
  '/': 'index.html',
  '/assets/app.js': 'app.js',
  '/assets/api.js': 'api.js',
  '/assets/dom.js': 'dom.js',
  '/assets/board.js': 'board.js',
  '/assets/change.js': 'change.js',
  '/assets/charts.js': 'charts.js',
  '/assets/style.css': 'style.css',
  '/assets/favicon.svg': 'favicon.svg',
  '/assets/vendor/uPlot.esm.js': 'uplot:uPlot.esm.js',
  '/assets/vendor/uPlot.min.css': 'uplot:uPlot.min.css',
};

/** Where the dashboard's own files are: beside this module (src/, dist/service/), or under dist/service/ from the CLI bundle in dist/cli/. */
export function dashboardAssetsDir(from: string = import.meta.url): string | null {
  const here = dirname(fileURLToPath(from));
  const candidates = [join(here, 'assets'), join(here, 'dashboard', 'assets'), join(here, '..', 'service', 'dashboard', 'assets')];
  return candidates.find((dir) => existsSync(join(dir, 'index.html'))) ?? null;
}

/** uPlot's file: the copy under the assets directory (`vendor/`), else the installed package's. */
function uplotFile(assets: string | null, name: string): string | null {
  if (assets !== null && existsSync(join(assets, 'vendor', name))) return join(assets, 'vendor', name);
  try {
    return join(dirname(createRequire(import.meta.url).resolve('uplot/dist/uPlot.esm.js')), name);
  } catch {
    return null;
  }
}

/** The dashboard's file handler for `createServiceServer({ dashboard })` (files are read once and kept). */
export function dashboardFiles(assets: string | null = dashboardAssetsDir()): (path: string) => Promise<StaticAnswer | null> {
  const cache = new Map<string, StaticAnswer>();
  return async (path) => {
    const name = Object.hasOwn(DASHBOARD_FILES, path) ? DASHBOARD_FILES[path] : undefined;
    if (name === undefined) return null;
    const kept = cache.get(path);
    if (kept !== undefined) return kept;
    const file = name.startsWith('uplot:') ? uplotFile(assets, name.slice('uplot:'.length)) : assets === null ? null : join(assets, name);
    if (file === null) return null;
    let body: Buffer;
    try {
      body = await readFile(file);
    } catch {
      return null;
    }
    const answer: StaticAnswer = { contentType: TYPES[name.slice(name.lastIndexOf('.') + 1)] ?? 'application/octet-stream', body };
    cache.set(path, answer);
    return answer;
  };
}
