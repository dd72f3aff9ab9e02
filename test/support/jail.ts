import { jailStatus, type SandboxMode } from '../../src/host/index.js';

/**
 * Which sandbox tests should configure on this machine: 'jail' when bubblewrap
 * works, else 'none'. Under CI=true a missing jail is a failure, never a
 * silent downgrade (.ci/run installs bubblewrap).
 */
export async function sandboxForTests(): Promise<SandboxMode> {
  const status = await jailStatus();
  if (status.available) return 'jail';
  if (process.env.CI === 'true') throw new Error(`the jail is required under CI=true: ${status.reason}`);
  return 'none';
}

/** For `describe.skipIf(...)`: the one-line reason to skip jail tests, or null when they must run (the jail works, or CI=true, where they fail instead). */
export async function jailSkipReason(): Promise<string | null> {
  const status = await jailStatus();
  if (status.available || process.env.CI === 'true') return null;
  return `jail tests skipped: ${status.reason}`;
}
