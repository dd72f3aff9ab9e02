import { randomBytes } from 'node:crypto';
import { describe } from 'vitest';

/** The PostgreSQL URL tests use, from PROOFGATE_TEST_DATABASE_URL (undefined when unset). */
export function postgresTestUrl(): string | undefined {
  const url = process.env.PROOFGATE_TEST_DATABASE_URL;
  return url === undefined || url.trim() === '' ? undefined : url.trim();
}

/** The URL, or a thrown error for tests that cannot run without one. */
export function requirePostgresTestUrl(): string {
  const url = postgresTestUrl();
  if (url === undefined) throw new Error('PROOFGATE_TEST_DATABASE_URL is not set');
  return url;
}

/**
 * A describe block that needs PostgreSQL. Without PROOFGATE_TEST_DATABASE_URL
 * it is skipped with a one-line reason, except under CI=true, where a missing
 * URL is an error: CI must never silently skip the PostgreSQL run.
 */
export function describePostgres(name: string, fn: (url: string) => void, options: { readonly timeout?: number } = {}): void {
  const url = postgresTestUrl();
  if (url !== undefined) {
    describe(name, options, () => fn(url));
    return;
  }
  if (process.env.CI === 'true') {
    throw new Error(`${name}: PROOFGATE_TEST_DATABASE_URL must be set when CI=true`);
  }
  describe.skip(`${name} (skipped: PROOFGATE_TEST_DATABASE_URL is not set)`, () => fn(''));
}

/** A namespace no other test (in this or another process) uses. */
export function uniqueNamespace(prefix = 'test'): string {
  return `${prefix}-${process.pid}-${Date.now().toString(36)}-${randomBytes(4).toString('hex')}`;
}
