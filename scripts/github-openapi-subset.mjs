#!/usr/bin/env node
// Write test/support/github-server/openapi/operations.json: the GitHub REST operations the
// test server answers and checks against, cut from a pinned @octokit/openapi.
//
//   npm run openapi:subset                 fetch the package with `npm pack` into a temporary folder
//   npm run openapi:subset -- --tarball F  use an already downloaded octokit-openapi-<version>.tgz
//   npm run openapi:subset -- --check      exit 1 when the committed file differs from a fresh cut
//
// The package is a 29 MB download that unpacks to over 400 MB, so it is never a dependency:
// only its REST description is read, and the temporary folder is removed afterwards.
// Needs `npm` and `tar` on PATH (tar reads the one member we need without unpacking the rest).
import { execFileSync } from 'node:child_process';
import { createHash } from 'node:crypto';
import { existsSync, mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';

const PACKAGE = '@octokit/openapi';
const VERSION = '23.0.2';
// `npm view @octokit/openapi@23.0.2 dist.integrity`; a changed tarball stops the script.
const INTEGRITY = 'sha512-pV8M7L9GY23AybNvTmo2nyjmpmnt6+2sRE/tqr0ZLQcPS4lnw7u5eZGNmwRNkBC3D7gZXbFx5AHzLUVRBXGDhg==';
const SOURCE = 'generated/api.github.com.deref.json';

/** The operations kept: what proofgate calls today, then what later work (App service, proof workflows) will call. */
const OPERATIONS = [
  // Apps: installation tokens
  'apps/create-installation-access-token',
  // pulls
  'pulls/get',
  'pulls/list',
  'pulls/list-commits',
  'pulls/list-files',
  'pulls/merge',
  'pulls/update-branch',
  // checks and statuses
  'checks/create',
  'checks/update',
  'checks/list-for-ref',
  'checks/list-suites-for-ref',
  'repos/get-combined-status-for-ref',
  'repos/list-commit-statuses-for-ref',
  'repos/create-commit-status',
  // issues, comments, labels, reactions
  'issues/get',
  'issues/list-comments',
  'issues/get-comment',
  'issues/create-comment',
  'issues/update-comment',
  'issues/add-labels',
  'issues/remove-label',
  'issues/create-label',
  'reactions/create-for-issue-comment',
  // repository, refs, contents
  'repos/get',
  'repos/get-branch',
  'repos/get-branch-protection',
  'repos/get-collaborator-permission-level',
  'repos/compare-commits',
  'repos/get-content',
  'git/get-ref',
  'git/update-ref',
  // added later: Actions
  'actions/create-workflow-dispatch',
  'actions/list-workflow-runs',
  'actions/get-workflow-run',
  'actions/list-jobs-for-workflow-run',
  'actions/download-job-logs-for-workflow-run',
  'actions/cancel-workflow-run',
  'actions/list-workflow-run-artifacts',
  'actions/get-artifact',
  'actions/download-artifact',
  // added later: Apps
  'apps/get-authenticated',
  'apps/list-installations',
  'apps/get-repo-installation',
  'apps/list-repos-accessible-to-installation',
  // added later: issues, reviews, check runs of a suite, git objects
  'issues/list-for-repo',
  'pulls/list-reviews',
  'checks/list-for-suite',
  'git/create-ref',
  'git/get-commit',
  // added later: deleting a merged change's head branch (automerge.deleteHeadBranch)
  'git/delete-ref',
  // added later: proofgate's own merge queue on GitHub (candidates merged into a staging branch)
  'repos/merge',
];

/** Operation members kept; the rest (summary, description, tags, externalDocs, x-github, x-octokit) is prose or SDK metadata. */
const OPERATION_KEYS = new Set(['operationId', 'parameters', 'requestBody', 'responses', 'deprecated']);
/** Prose dropped wherever it is a member of a parameter, schema, response, header or example object. */
const PROSE_KEYS = new Set(['description', 'summary', 'externalDocs']);
/** Members whose value is data (example payloads, defaults, enums): copied as they are, prose and all. */
const DATA_KEYS = new Set(['example', 'default', 'enum', 'value']);
/** Members whose value maps names (property names, media types, status codes, ...) to objects. */
const NAME_MAPS = new Set(['properties', 'content', 'responses', 'headers', 'examples', 'encoding']);

const root = fileURLToPath(new URL('../', import.meta.url));
const outDir = join(root, 'test/support/github-server/openapi');
const outFile = join(outDir, 'operations.json');
const licenseFile = join(outDir, 'LICENSE');

function argValue(name) {
  const i = process.argv.indexOf(name);
  return i === -1 ? undefined : process.argv[i + 1];
}

function sortKeys(value) {
  if (Array.isArray(value)) return value.map(sortKeys);
  if (value === null || typeof value !== 'object') return value;
  return Object.fromEntries(
    Object.keys(value)
      .sort()
      .map((key) => [key, sortKeys(value[key])]),
  );
}

/** Copy an OpenAPI node without its prose; `names` says the keys are names, not OpenAPI members. */
function strip(node, names = false) {
  if (Array.isArray(node)) return node.map((item) => strip(item));
  if (node === null || typeof node !== 'object') return node;
  const out = {};
  for (const [key, value] of Object.entries(node)) {
    if (names) out[key] = strip(value);
    else if (PROSE_KEYS.has(key)) continue;
    else if (DATA_KEYS.has(key)) out[key] = value;
    else out[key] = strip(value, NAME_MAPS.has(key));
  }
  return out;
}

/** Schemas at least this long (as JSON) that occur twice or more are written once, under components. */
const SHARED_MIN_LENGTH = 400;
const isSchema = (node) => typeof node.type === 'string' || Array.isArray(node.oneOf) || Array.isArray(node.anyOf) || Array.isArray(node.allOf);

/** Visit every object outside example data; `visit` returns a replacement or undefined. */
function mapObjects(node, visit) {
  if (Array.isArray(node)) return node.map((item) => mapObjects(item, visit));
  if (node === null || typeof node !== 'object') return node;
  const replaced = visit(node);
  if (replaced !== undefined) return replaced;
  return Object.fromEntries(Object.entries(node).map(([key, value]) => [key, DATA_KEYS.has(key) || key === 'examples' ? value : mapObjects(value, visit)]));
}

/**
 * The dereferenced description repeats each shared schema wherever it is used (a user object
 * about a hundred times). Write each repeated schema once under components.schemas, largest
 * first, and refer to it with $ref; the test server resolves the references when it loads the file.
 * Keys are sorted before, so equal schemas have equal JSON text.
 */
function shareRepeatedSchemas(paths) {
  const schemas = {};
  const everywhere = (visit) => {
    paths = mapObjects(paths, visit);
    for (const [name, schema] of Object.entries(schemas)) schemas[name] = mapObjects(schema, (node) => (node === schema ? undefined : visit(node)));
  };
  for (;;) {
    const seen = new Map();
    everywhere((node) => {
      if (!isSchema(node)) return undefined;
      const text = JSON.stringify(node);
      if (text.length >= SHARED_MIN_LENGTH) seen.set(text, (seen.get(text) ?? 0) + 1);
      return undefined;
    });
    const repeated = [...seen].filter(([, n]) => n > 1).map(([text]) => text);
    if (repeated.length === 0) return { paths, schemas };
    const text = repeated.sort((a, b) => b.length - a.length || (a < b ? -1 : 1))[0];
    const schema = JSON.parse(text);
    const title =
      typeof schema.title === 'string'
        ? schema.title
            .toLowerCase()
            .replace(/[^a-z0-9]+/g, '-')
            .replace(/^-|-$/g, '')
        : 'schema';
    const name = `${title}-${createHash('sha256').update(text).digest('hex').slice(0, 8)}`;
    const ref = { $ref: `#/components/schemas/${name}` };
    everywhere((node) => (isSchema(node) && JSON.stringify(node) === text ? ref : undefined));
    schemas[name] = schema;
  }
}

/** JSON text with one line per operation and per shared schema, so a regenerated file diffs by operation. */
function layout(value, depth = 0) {
  if (depth >= 3 || value === null || typeof value !== 'object' || Array.isArray(value)) return JSON.stringify(value);
  const pad = '  '.repeat(depth + 1);
  const members = Object.entries(value).map(([key, item]) => `${pad}${JSON.stringify(key)}: ${layout(item, depth + 1)}`);
  return `{\n${members.join(',\n')}\n${'  '.repeat(depth)}}`;
}

function readDescription(workDir) {
  let tarball = argValue('--tarball');
  if (tarball === undefined) {
    const packed = JSON.parse(
      execFileSync('npm', ['pack', `${PACKAGE}@${VERSION}`, '--json', '--silent', '--pack-destination', workDir], {
        cwd: workDir,
        encoding: 'utf8',
        stdio: ['ignore', 'pipe', 'inherit'],
      }),
    );
    tarball = join(workDir, packed[0].filename);
  }
  const integrity = `sha512-${createHash('sha512').update(readFileSync(tarball)).digest('base64')}`;
  if (integrity !== INTEGRITY) throw new Error(`${tarball}: integrity ${integrity}, expected ${INTEGRITY} (${PACKAGE}@${VERSION})`);
  execFileSync('tar', ['-xzf', tarball, '-C', workDir, `package/${SOURCE}`, 'package/package.json', 'package/LICENSE'], { stdio: 'inherit' });
  const manifest = JSON.parse(readFileSync(join(workDir, 'package/package.json'), 'utf8'));
  if (manifest.name !== PACKAGE || manifest.version !== VERSION) throw new Error(`${tarball} is ${manifest.name}@${manifest.version}`);
  return {
    description: JSON.parse(readFileSync(join(workDir, 'package', SOURCE), 'utf8')),
    license: `${manifest.name} ${manifest.version}, license ${manifest.license}:\n\n${readFileSync(join(workDir, 'package/LICENSE'), 'utf8').trim()}\n`,
  };
}

function subset(description) {
  const wanted = new Set(OPERATIONS);
  const paths = {};
  for (const [template, item] of Object.entries(description.paths)) {
    for (const [method, operation] of Object.entries(item)) {
      if (!wanted.has(operation?.operationId)) continue;
      wanted.delete(operation.operationId);
      const kept = Object.fromEntries(Object.entries(operation).filter(([key]) => OPERATION_KEYS.has(key)));
      (paths[template] ??= {})[method] = strip(kept);
    }
  }
  if (wanted.size > 0) throw new Error(`not in ${PACKAGE}@${VERSION}: ${[...wanted].join(', ')}`);
  const shared = shareRepeatedSchemas(sortKeys(paths));
  return sortKeys({
    openapi: description.openapi,
    info: {
      title: 'GitHub REST operations used by proofgate tests',
      version: VERSION,
      'x-source': `${PACKAGE}@${VERSION} ${SOURCE}, descriptions removed; regenerate with npm run openapi:subset`,
      license: { name: 'MIT', url: 'https://spdx.org/licenses/MIT' },
    },
    paths: shared.paths,
    components: { schemas: shared.schemas },
  });
}

const notice = (license) => `operations.json is cut from ${SOURCE} of the npm package ${PACKAGE}@${VERSION}
(https://github.com/octokit/openapi), which packages GitHub's published REST API description
(https://github.com/github/rest-api-description). It keeps ${OPERATIONS.length} operations with their
request and response schemas and examples; descriptions, summaries and SDK metadata are removed,
and repeated schemas are written once under components.schemas.
Regenerate it with \`npm run openapi:subset\` (scripts/github-openapi-subset.mjs).

The package's license applies to this file:

${license}`;

const workDir = mkdtempSync(join(tmpdir(), 'proofgate-openapi-'));
try {
  const { description, license } = readDescription(workDir);
  const files = [
    [outFile, `${layout(subset(description))}\n`],
    [licenseFile, notice(license)],
  ];
  if (process.argv.includes('--check')) {
    const stale = files.filter(([file, text]) => !existsSync(file) || readFileSync(file, 'utf8') !== text);
    for (const [file] of stale) console.error(`stale: ${file.slice(root.length)}`);
    if (stale.length === 0) console.log('test/support/github-server/openapi/ is up to date');
    process.exitCode = stale.length === 0 ? 0 : 1;
  } else {
    mkdirSync(outDir, { recursive: true });
    for (const [file, text] of files) {
      writeFileSync(file, text);
      console.log(`wrote ${file.slice(root.length)} (${text.length} bytes)`);
    }
  }
} finally {
  rmSync(workDir, { recursive: true, force: true });
}
