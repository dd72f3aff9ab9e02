import { readFileSync } from 'node:fs';
import { describe, expect, it } from 'vitest';
import { isProofgateError } from '../../src/core/index.js';
import { MANIFEST_EVENTS, MANIFEST_PERMISSIONS, githubAppManifest } from '../../src/service/index.js';
import { runCliAsync } from '../cli/helpers.js';

/** CLI tests run the built binary: `npm run build` first. */

/**
 * What proofgate may ask GitHub for, written here and not taken from the
 * code: each permission with the most access allowed. A new permission, or
 * more access, fails this test until it is added here with its reason.
 */
const ALLOWED_PERMISSIONS: Record<string, readonly string[]> = {
  metadata: ['read'],
  contents: ['read', 'write'],
  pull_requests: ['read', 'write'],
  issues: ['read'],
  checks: ['read'],
  statuses: ['read'],
  // write: a github-workflow proof scenario is dispatched (workflow_dispatch needs it); nothing else is written.
  actions: ['read', 'write'],
  administration: ['read'],
  // write: enqueue and dequeue in GitHub's merge queue, nothing else.
  merge_queues: ['read', 'write'],
};

/** The events proofgate may subscribe to, each with the permission GitHub requires for it. */
const ALLOWED_EVENTS: Record<string, string> = {
  pull_request: 'pull_requests',
  pull_request_review: 'pull_requests',
  issue_comment: 'issues',
  check_run: 'checks',
  check_suite: 'checks',
  status: 'statuses',
  workflow_run: 'actions',
  merge_group: 'merge_queues',
  push: 'contents',
};

function usageError(run: () => unknown): string {
  try {
    run();
  } catch (error) {
    if (isProofgateError(error, 'USAGE')) return error.message;
    throw error;
  }
  throw new Error('expected a USAGE error');
}

function lines(text: string): string[] {
  return text.split('\n').filter((line) => line !== '');
}

describe('githubAppManifest', () => {
  it("has the manifest flow's fields, a private App, and the webhook at <url>/webhooks", () => {
    const manifest = githubAppManifest({ url: 'https://proofgate.example.com' });
    expect(Object.keys(manifest).sort()).toEqual(
      ['name', 'url', 'description', 'hook_attributes', 'redirect_url', 'public', 'default_permissions', 'default_events'].sort(),
    );
    expect(manifest).toMatchObject({
      name: 'proofgate',
      url: 'https://proofgate.example.com',
      hook_attributes: { url: 'https://proofgate.example.com/webhooks', active: true },
      redirect_url: 'https://proofgate.example.com',
      public: false,
    });
    expect(typeof manifest.description).toBe('string');
  });

  it('the webhook URL is built from --url: a trailing slash is dropped, a path prefix kept', () => {
    expect(githubAppManifest({ url: 'https://host.example/' }).hook_attributes?.url).toBe('https://host.example/webhooks');
    expect(githubAppManifest({ url: 'https://host.example/tools/proofgate/' }).hook_attributes?.url).toBe('https://host.example/tools/proofgate/webhooks');
    expect(githubAppManifest({ url: 'http://10.0.0.5:8080' }).hook_attributes?.url).toBe('http://10.0.0.5:8080/webhooks');
  });

  it('every permission is on the allow-list, at no more than its allowed access', () => {
    const { default_permissions } = githubAppManifest({ url: 'https://h.example' });
    for (const [name, access] of Object.entries(default_permissions)) {
      expect(ALLOWED_PERMISSIONS[name], `permission ${name}`).toBeDefined();
      expect(ALLOWED_PERMISSIONS[name], `permission ${name}`).toContain(access);
    }
    // The core of what proofgate does needs these exactly.
    expect(default_permissions).toMatchObject({ contents: 'write', pull_requests: 'write', checks: 'read', statuses: 'read', administration: 'read' });
  });

  it('every event is on the allow-list, and the permission GitHub requires for it is granted', () => {
    const { default_events, default_permissions } = githubAppManifest({ url: 'https://h.example' });
    expect(new Set(default_events).size).toBe(default_events.length);
    for (const event of default_events) {
      const needs = ALLOWED_EVENTS[event];
      expect(needs, `event ${event}`).toBeDefined();
      expect(default_permissions, `event ${event} needs ${needs}`).toHaveProperty(needs as string);
    }
    expect(default_events).toEqual(expect.arrayContaining(['pull_request', 'issue_comment', 'check_run', 'check_suite', 'status', 'push']));
  });

  it('installation events are not subscribed to: GitHub sends them to every App and refuses them in the list', () => {
    const { default_events } = githubAppManifest({ url: 'https://h.example' });
    expect(default_events).not.toContain('installation');
    expect(default_events).not.toContain('installation_repositories');
  });

  it('every permission and event has a one-line reason (the docs table)', () => {
    for (const { reason } of [...Object.values(MANIFEST_PERMISSIONS), ...Object.values(MANIFEST_EVENTS)]) {
      expect(reason.trim()).not.toBe('');
      expect(reason).not.toMatch(/\n/);
    }
  });

  it('docs/service.md lists every permission with its access', () => {
    const docs = readFileSync(new URL('../../docs/service.md', import.meta.url), 'utf8');
    for (const [name, { access }] of Object.entries(MANIFEST_PERMISSIONS)) {
      expect(docs, `docs row for ${name}`).toMatch(new RegExp(`^\\| \`${name}\` *\\| ${access} *\\|`, 'm'));
    }
  });

  it('--name sets the name', () => {
    expect(githubAppManifest({ url: 'https://h.example', name: 'proofgate-acme' }).name).toBe('proofgate-acme');
  });

  it('without --url: no homepage, webhook or redirect, only what proofgate asks for', () => {
    const manifest = githubAppManifest();
    expect(manifest).not.toHaveProperty('url');
    expect(manifest).not.toHaveProperty('hook_attributes');
    expect(manifest).not.toHaveProperty('redirect_url');
    expect(manifest.default_permissions).toEqual(githubAppManifest({ url: 'https://h.example' }).default_permissions);
  });

  it.each([
    'ftp://host.example',
    'host.example',
    '/webhooks',
    '',
    'https://user:hunter2secret@host.example',
    'https://host.example/?token=hunter2secret',
    'https://host.example/#hunter2secret',
    'https://host .example',
  ])('a bad --url %j is one USAGE line naming --url, without the URL', (url) => {
    const message = usageError(() => githubAppManifest({ url }));
    expect(message).toMatch(/^--url must be /);
    expect(message).not.toMatch(/\n/);
    expect(message).not.toContain('hunter2secret');
  });

  it.each(['', 'x'.repeat(35), 'bad\nname'])('a bad --name %j is a USAGE line naming --name', (name) => {
    expect(usageError(() => githubAppManifest({ url: 'https://h.example', name }))).toMatch(/^--name must be /);
  });
});

describe('proofgate github manifest (the built CLI)', () => {
  it.concurrent('prints the manifest as JSON on stdout and exits 0', async () => {
    const run = await runCliAsync(['github', 'manifest', '--url', 'https://proofgate.example.com', '--name', 'pg-acme']);
    expect(run.stderr).toBe('');
    expect(run.status).toBe(0);
    expect(JSON.parse(run.stdout)).toEqual(githubAppManifest({ url: 'https://proofgate.example.com', name: 'pg-acme' }));
  });

  it.concurrent('--json prints it on one line', async () => {
    const run = await runCliAsync(['github', 'manifest', '--url', 'https://proofgate.example.com', '--json']);
    expect(run.status).toBe(0);
    expect(lines(run.stdout)).toHaveLength(1);
    expect(JSON.parse(run.stdout)).toMatchObject({ hook_attributes: { url: 'https://proofgate.example.com/webhooks' } });
  });

  it.concurrent('a bad --url exits 2 with one line on stderr and nothing on stdout', async () => {
    const run = await runCliAsync(['github', 'manifest', '--url', 'https://user:hunter2secret@proofgate.example.com']);
    expect(run.status).toBe(2);
    expect(run.stdout).toBe('');
    expect(lines(run.stderr)).toEqual(['proofgate: --url must be an absolute http(s) URL without credentials, query or fragment [USAGE]']);
  });

  it.concurrent('--help describes the command', async () => {
    const run = await runCliAsync(['github', 'manifest', '--help']);
    expect(run.status).toBe(0);
    expect(run.stdout).toContain('--url <url>');
    expect(run.stdout).toContain('manifest');
  });
});
